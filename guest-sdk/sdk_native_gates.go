//go:build !wasip1

package sdk

import (
	"time"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

// Gates and patches, natively.

var (
	nativePatchPrefixes []string
	nativeNow           time.Time
	nativeCyclePolicies []CyclePolicy
	// nativeKind is the entry point running (abi.NumPoints: none known).
	nativeKind    = abi.NumPoints
	nativeRecheck RecheckRequest
	nativePatch   abi.Patch
)

// SetPatchPrefixes sets the key prefixes SetPodLabel and SetPodAnnotation
// may write under natively, as policies[].patchPrefixes does in the
// scheduler; none (the default) refuses every key.
func SetPatchPrefixes(prefixes ...string) { nativePatchPrefixes = prefixes }

// SetNow fixes what Now returns natively; the zero Time restores the real clock.
func SetNow(t time.Time) { nativeNow = t }

// SetCyclePolicies sets what CyclePolicies returns in RunPreBind.
func SetCyclePolicies(ps []CyclePolicy) { nativeCyclePolicies = ps }

func now() time.Time {
	if nativeNow.IsZero() {
		return time.Now()
	}
	return nativeNow
}

// RecheckRequest is when a gated pod is to be checked again, as the
// PreEnqueue function asked with Recheck (the default when it did not:
// OnPodUpdate, no delay). The delay is clamped as the host clamps it.
type RecheckRequest struct {
	On    RecheckEvent
	After time.Duration
}

// RunPreEnqueue runs the registered PreEnqueue natively with a cycle of its
// own, as the host calls it, and returns its status and what it asked
// about rechecking. It returns Success when none is registered.
func RunPreEnqueue(pod *PodData) (Status, RecheckRequest) {
	nativeCycle++
	nativeCycleState = nil
	nativeRecheck = RecheckRequest{On: OnPodUpdate}
	if st, ok := use(pod, nil); !ok {
		return st, nativeRecheck
	}
	if preEnqueueFn == nil {
		return Success(), nativeRecheck
	}
	nativeKind = abi.PreEnqueue
	defer func() { nativeKind = abi.NumPoints }()
	return asReported(preEnqueueFn(Pod{})), nativeRecheck
}

// PodPatch is what a PreBind function wrote with SetPodLabel and
// SetPodAnnotation (nil maps when it wrote none).
type PodPatch struct {
	Labels      map[string]string
	Annotations map[string]string
}

// RunPreBind runs the registered PreBind natively for pod on node, in the
// pod's current cycle (the one its PreFilter started, if any), and returns
// its status and its patch. It returns Success when none is registered.
func RunPreBind(pod *PodData, node *NodeData) (Status, PodPatch) {
	enterCycle(pod)
	nativePatch = abi.Patch{}
	if st, ok := use(pod, node); !ok {
		return st, PodPatch{}
	}
	if preBindFn == nil {
		return Success(), PodPatch{}
	}
	nativeKind = abi.PreBind
	defer func() { nativeKind = abi.NumPoints }()
	st := asReported(preBindFn(Pod{}, Node{}))
	return st, PodPatch{Labels: nativePatch.Labels, Annotations: nativePatch.Annotations}
}

func recheck(events int32, after time.Duration) {
	if nativeKind != abi.PreEnqueue || events&^abi.RecheckAll != 0 {
		return
	}
	// As the host sees it: whole milliseconds (rounded up), clamped.
	r := RecheckRequest{On: RecheckEvent(events)}
	if ms := recheckMillis(after); ms > 0 {
		r.After = time.Duration(max(ms, abi.MinRecheckAfterMillis)) * time.Millisecond
	}
	nativeRecheck = r
}

func patch(label bool, key, value string) int32 {
	if nativeKind != abi.PreBind {
		return abi.NotAvailable
	}
	return nativePatch.Set(label, key, value, nativePatchPrefixes)
}

func cyclePolicies() []byte {
	if nativeKind != abi.PreBind {
		return nil
	}
	ps := make([][3]string, len(nativeCyclePolicies))
	for i, p := range nativeCyclePolicies {
		ps[i] = [3]string{p.Name, p.SHA256, p.Mode}
	}
	return model.EncodeCyclePolicies(ps)
}

// RunPostFilter runs the registered PostFilter natively in the pod's
// current cycle (its filters have run), and returns its status; Success
// when none is registered.
func RunPostFilter(pod *PodData) Status {
	enterCycle(pod)
	if st, ok := use(pod, nil); !ok {
		return st
	}
	if postFilterFn == nil {
		return Success()
	}
	nativeKind = abi.PostFilter
	defer func() { nativeKind = abi.NumPoints }()
	return asReported(postFilterFn(Pod{}))
}

// RunPostBind runs the registered PostBind natively for pod, bound to
// node, in the pod's current cycle. Its status is Success unless reading
// the pod or node failed (as a read the policy does not declare does).
func RunPostBind(pod *PodData, node *NodeData) Status {
	enterCycle(pod)
	st, ok := use(pod, node)
	if !ok || postBindFn == nil {
		return st
	}
	postBindFn(Pod{}, Node{})
	return Success()
}
