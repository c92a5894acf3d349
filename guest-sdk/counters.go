package sdk

import (
	"errors"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
)

// Reserve, Unreserve and counters (ABI v4, docs/abi.md §3.6): a policy
// that declares KeepsState takes counts as pods are placed, and the host
// gives them back when a placement is undone or its pod goes away.

var (
	reserveFn   func(Pod, Node) Status
	unreserveFn func(Pod, Node)
)

// RegisterReserve sets a function called once the scheduler has chosen the
// pod's node, before the pod waits at Permit and is bound, with that node.
// It takes what the pod uses with AddCount. A rejection (Unschedulable)
// undoes the placement: every policy's Unreserve runs and the pod is tried
// again later. The policy must call KeepsState; the host refuses a module
// that registers Reserve or Unreserve without it.
//
// In a pod-group cycle (the Workload API) Reserve runs for each trial
// placement of a member too, and Unreserve when the trial is undone.
func RegisterReserve(f func(pod Pod, node Node) Status) { reserveFn = f }

// RegisterUnreserve sets a function called when the pod's reserved
// placement is undone: a later Reserve or Permit refused it, binding
// failed, or a pod-group trial was reverted. The host has already given
// back every count the pod held at this policy, whatever this function
// does (and if it fails); it is for what the host cannot undo, such as
// telling other pods. Its status is only logged.
func RegisterUnreserve(f func(pod Pod, node Node)) { unreserveFn = f }

// Errors of AddCount and Count.
var (
	// ErrNotInReserve: AddCount called outside a Reserve function, or
	// Count outside a call that has a pod.
	ErrNotInReserve = errors.New("counts are taken in Reserve only")
	// ErrNoKeepsState: the policy does not call KeepsState, so it has no
	// counters.
	ErrNoKeepsState = errors.New("counters need KeepsState")
	// ErrCountKey: an empty key, a key longer than 253 bytes, or n
	// outside 1..2^53.
	ErrCountKey = errors.New("bad counter key or amount")
	// ErrTooManyCounts: the count would pass 2^53, the policy would hold
	// more than 1024 keys, or the pod more than 64 takes.
	ErrTooManyCounts = errors.New("counter limit reached")
)

// AddCount, in a Reserve function, takes n of the count key for the pod
// being placed and returns the key's new count. The pod holds what it
// took until its placement is undone, or it is deleted or finishes: the
// host gives it back then, so a policy never decrements.
func AddCount(key string, n int64) (int64, error) { return countResult(counterAdd(key, n)) }

// Count returns the count key: what the pods that hold it took (0 when
// none does). It can be read in any function that has a pod.
func Count(key string) (int64, error) { return countResult(counterGet(key)) }

func countResult(v int64) (int64, error) {
	if v >= 0 {
		return v, nil
	}
	switch int32(v) {
	case abi.NotAvailable:
		return 0, ErrNotInReserve
	case abi.NotDeclared:
		return 0, ErrNoKeepsState
	case abi.TooLarge:
		return 0, ErrTooManyCounts
	}
	return 0, ErrCountKey
}
