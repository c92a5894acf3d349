package sdk

import (
	"errors"
	"time"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
)

// PreEnqueue gates and PreBind patches (ABI v3, docs/abi.md §3.3).

var (
	preEnqueueFn func(Pod) Status
	preBindFn    func(Pod, Node) Status
)

// RegisterPreEnqueue sets a gate: a function called with the pod before it
// enters the scheduling queue, each time it would. Success lets it in; any
// rejection (Unschedulable or UnschedulableAndUnresolvable) keeps it out,
// pending, with the reason in an Event on the pod, until a recheck lets it
// in (Recheck says when that happens). Only pod data is available: Node
// reads return nothing, and so do cluster reads.
func RegisterPreEnqueue(f func(pod Pod) Status) { preEnqueueFn = f }

// RegisterPreBind sets a function called once the scheduler has chosen the
// pod's node, before the pod is bound to it. It reads the pod and the
// chosen node, and records on the pod what was decided with SetPodLabel
// and SetPodAnnotation; the scheduler applies every policy's changes in one
// patch. A rejection (Unschedulable) keeps the pod from being bound to the
// node, whatever the failurePolicy; an Error does under failurePolicy Fail
// (the pod is retried), and with Ignore the pod is bound without this
// policy's changes.
func RegisterPreBind(f func(pod Pod, node Node) Status) { preBindFn = f }

// RecheckEvent is a kind of change that may lift a gate (Recheck).
type RecheckEvent int32

// The events a gate can ask to be checked again on.
const (
	// OnPodUpdate: the gated pod's own labels or annotations change. Without
	// a Recheck call a gated pod is checked again on this alone.
	OnPodUpdate = RecheckEvent(abi.RecheckPodUpdate)
	// OnPodsChange: another pod is bound, changes its labels or is deleted.
	OnPodsChange = RecheckEvent(abi.RecheckPodsChange)
	// OnNodesChange: a node is added or its labels, taints, annotations or
	// allocatable resources change.
	OnNodesChange = RecheckEvent(abi.RecheckNodesChange)
)

// Recheck, called from a PreEnqueue function that gates the pod, says when
// the scheduler checks the pod again: when one of the events happens
// (OnPodUpdate|OnPodsChange...), or after the delay (0: no timer; clamped
// to 1s..1h). A freeze window gates until its end with
// Recheck(OnPodUpdate, end.Sub(now)). The policy's new module or config
// always rechecks the pods it gated.
func Recheck(on RecheckEvent, after time.Duration) { recheck(int32(on), after) }

// recheckMillis is recheck_on's after_ms for a delay: whole milliseconds
// rounded up, so that a delay shorter than a millisecond (a window ending
// now) still asks for a recheck rather than for none (0); at most the
// ABI's maximum.
func recheckMillis(after time.Duration) int32 {
	if after <= 0 {
		return 0
	}
	ms := (after + time.Millisecond - 1) / time.Millisecond
	return int32(min(ms, abi.MaxRecheckAfterMillis))
}

// Errors of SetPodLabel and SetPodAnnotation.
var (
	// ErrNotAllowed: the key is under none of the prefixes the policy's
	// args allow it to write (policies[].patchPrefixes).
	ErrNotAllowed = errors.New("key outside the policy's patchPrefixes")
	// ErrInvalid: Kubernetes would refuse the key or the label value.
	ErrInvalid = errors.New("invalid key or label value")
	// ErrTooLarge: the policy's patch of this pod would exceed 64 keys or
	// 16 KiB.
	ErrTooLarge = errors.New("patch exceeds 64 keys or 16 KiB")
	// ErrNotInPreBind: called outside a PreBind function.
	ErrNotInPreBind = errors.New("pod patches are written in PreBind only")
)

// SetPodLabel, in a PreBind function, sets a label on the pod being bound.
func SetPodLabel(key, value string) error { return patchError(patch(true, key, value)) }

// SetPodAnnotation, in a PreBind function, sets an annotation on the pod
// being bound.
func SetPodAnnotation(key, value string) error { return patchError(patch(false, key, value)) }

func patchError(code int32) error {
	switch code {
	case 0:
		return nil
	case abi.NotAllowed:
		return ErrNotAllowed
	case abi.TooLarge:
		return ErrTooLarge
	case abi.NotAvailable:
		return ErrNotInPreBind
	}
	return ErrInvalid
}

// CyclePolicy is one policy of the scheduling cycle that placed the pod.
type CyclePolicy struct {
	Name string
	// SHA256 is the digest of the module version the cycle ran.
	SHA256 string
	// Mode is "Enforce" or "Audit".
	Mode string
}

// CyclePolicies, in a PreBind function, returns the policies of the
// scheduling cycle that chose the pod's node, in the scheduler's order
// (nil elsewhere): what an audit annotation records.
func CyclePolicies() []CyclePolicy {
	var out []CyclePolicy
	r := abi.NewListReader(cyclePolicies())
	for r.Len() >= abi.CyclePolicyColumns {
		f := next(&r, abi.CyclePolicyColumns)
		out = append(out, CyclePolicy{Name: f[0], SHA256: f[1], Mode: f[2]})
	}
	return out
}

// Now is the wall clock a policy sees: the host's when its args set
// realClock, otherwise a deterministic clock (docs/abi.md §1). Natively it
// reads what SetNow set, or the real clock.
func Now() time.Time { return now() }
