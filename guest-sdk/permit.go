package sdk

import (
	"errors"
	"time"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
)

// Permit and waiting pods (ABI v4, docs/abi.md §3.7): a policy holds a
// reserved pod before it is bound until something it waits for happens,
// such as the rest of a gang being reserved.

var permitFn func(Pod, Node) Status

// RegisterPermit sets a function called once the pod is reserved on its
// node, before it is bound. Success lets it be bound; a rejection
// (Unschedulable) undoes the placement; Wait holds it, for at most the
// Wait's timeout, until a later call of this policy (another pod's Permit,
// a PostFilter, an Unreserve) allows it with AllowWaiting or rejects it
// with RejectWaiting. A pod that times out is rejected and its placement
// undone. The timeout may not pass the policy's maxPermitWait (default
// 1m): a longer one is the policy's error.
func RegisterPermit(f func(pod Pod, node Node) Status) { permitFn = f }

// Wait, returned from a Permit function, makes the pod wait for at most
// timeout; the reason is logged and shown if the wait ends in a timeout.
func Wait(reason string, timeout time.Duration) Status {
	return Status{Code: CodeWait, Reason: reason, Timeout: timeout}
}

// permitMillis is permit's result for a Wait: whole milliseconds, rounded
// up (a positive timeout never becomes 0, which the host refuses).
func permitMillis(st Status) int64 {
	if st.Code != CodeWait || st.Timeout <= 0 {
		return 0
	}
	return int64((st.Timeout + time.Millisecond - 1) / time.Millisecond)
}

// WaitingPod is a pod waiting at this policy: its Permit returned Wait and
// no call of the policy has allowed or rejected it since.
type WaitingPod struct {
	UID, Namespace, Name string
	// Node is the node the pod is reserved on.
	Node string
}

// Errors of WaitingPods, AllowWaiting and RejectWaiting.
var (
	// ErrNotWaiting: the pod is not waiting at this policy (it was allowed,
	// rejected or timed out, or another policy made it wait).
	ErrNotWaiting = errors.New("pod not waiting at this policy")
	// ErrNoWaitingPods: called outside Permit, PostFilter and Unreserve.
	ErrNoWaitingPods = errors.New("waiting pods are reached from Permit, PostFilter and Unreserve only")
	// ErrBadSelector: the label selector does not parse.
	ErrBadSelector = errors.New("bad label selector")
)

// WaitingPods lists the pods waiting at this policy whose labels match
// selector (kubectl's syntax: "gang=a,tier!=x"; "" for all), ordered by
// namespace and name. The native backend takes equality-based selectors
// only (=, ==, !=, a key alone, !key).
func WaitingPods(selector string) ([]WaitingPod, error) {
	b, code := waitingPods(selector)
	switch code {
	case 0:
	case abi.BadArgs:
		return nil, ErrBadSelector
	default:
		return nil, ErrNoWaitingPods
	}
	var out []WaitingPod
	r := abi.NewListReader(b)
	for r.Len() >= abi.WaitingColumns {
		f := next(&r, abi.WaitingColumns)
		out = append(out, WaitingPod{UID: f[0], Namespace: f[1], Name: f[2], Node: f[3]})
	}
	return out, nil
}

// AllowWaiting allows the waiting pod with that UID on this policy's
// behalf: once every policy that made it wait has allowed it, it is bound.
func AllowWaiting(uid string) error { return waitingError(permitAllow(uid)) }

// RejectWaiting rejects the waiting pod with that UID: its placement is
// undone, and message is in its PodScheduled condition.
func RejectWaiting(uid, message string) error { return waitingError(permitReject(uid, message)) }

func waitingError(code int32) error {
	switch code {
	case 0:
		return nil
	case abi.NotFound:
		return ErrNotWaiting
	}
	return ErrNoWaitingPods
}
