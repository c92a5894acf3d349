//go:build !wasip1

package sdk

import "github.com/wasmsched/wasmsched/guest-sdk/abi"

// Counters, natively: one policy's, kept with the same limits as the host.
var nativeCounters abi.Counters

// ResetCounters drops every count, as a new scheduler process starts.
func ResetCounters() { nativeCounters = abi.Counters{} }

// Counts returns the counts above zero.
func Counts() map[string]int64 { return nativeCounters.Counts() }

// ReleasePod gives back what pod holds, as the host does when the pod is
// deleted or finishes.
func ReleasePod(pod *PodData) { nativeCounters.RollBack(string(pod.UID), 0) }

func counterAdd(key string, n int64) int64 {
	switch {
	case nativeKind != abi.Reserve:
		return int64(abi.NotAvailable)
	case !keepsState:
		return int64(abi.NotDeclared)
	}
	ns := ""
	if nativeGiven != nil {
		ns = nativeGiven.Namespace
	}
	return nativeCounters.Add(nativeUID(), ns, key, n)
}

func counterGet(key string) int64 {
	switch {
	case nativePod == nil:
		return int64(abi.NotAvailable)
	case !keepsState:
		return int64(abi.NotDeclared)
	}
	return nativeCounters.Get(key)
}

func nativeUID() string {
	if nativeGiven == nil {
		return ""
	}
	return string(nativeGiven.UID)
}

// RunReserve runs the registered Reserve natively for pod on node, in the
// pod's current cycle, and returns its status (Success when none is
// registered). As in the scheduler, a Reserve that does not pass (a
// refusal or an error) keeps none of the counts it took.
func RunReserve(pod *PodData, node *NodeData) Status {
	enterCycle(pod)
	st, ok := use(pod, node)
	if !ok || reserveFn == nil {
		return st
	}
	uid := string(pod.UID)
	mark := nativeCounters.Held(uid)
	nativeKind = abi.Reserve
	defer func() { nativeKind = abi.NumPoints }()
	st = asReported(reserveFn(Pod{}, Node{}))
	if st.Code != CodeSuccess && st.Code != CodeSkip {
		nativeCounters.RollBack(uid, mark)
	}
	return st
}

// RunUnreserve undoes pod's placement on node natively: it gives back
// what the pod holds, then runs the registered Unreserve.
func RunUnreserve(pod *PodData, node *NodeData) {
	nativeCounters.RollBack(string(pod.UID), 0)
	take(string(pod.UID)) // it waits no more
	enterCycle(pod)
	if _, ok := use(pod, node); !ok || unreserveFn == nil {
		return
	}
	nativeKind = abi.Unreserve
	defer func() { nativeKind = abi.NumPoints }()
	unreserveFn(Pod{}, Node{})
}
