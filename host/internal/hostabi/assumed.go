package hostabi

import (
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
)

// A pod-group cycle (the GenericWorkload gate, v1.36 on) places each
// member it has found a node for into the snapshot's NodeInfo, runs
// Reserve, goes on to the next member, and takes the members out again
// (Unreserve, then ForgetPod), in reverse order. The snapshot puts the
// NodeInfo's old generation back after each change, so a NodeInfo at one
// generation holds different pods during one cycle, and every cache here
// keyed on the generation would serve the next member a node without its
// placed siblings.
//
// WasmPolicy's Reserve and Unreserve run right after each such assume and
// right before each forget, with no Filter or Score in between, so they
// mark the node (Assumed, Forgotten): while a mark is on, the node's
// generation as the caches see it (Generation) is a number of its own,
// never issued by kube-scheduler's counter (which counts up from 1) and
// never reused, so an entry filled while the node held the member is
// found only while it holds it. Taking the mark off gives the node its
// real generation back, and the node cache's entries and the memo's
// batches filled before the member came are good again (count_pods
// counts the node once more).
//
// A mark is the node's, by name, at the generation the NodeInfo had: the
// framework filters some nodes through a copy of their NodeInfo (one with
// nominated pods: NodeInfo.Snapshot, at another address and the same
// generation), and the copy holds the member too.

// assumedFrame is one mark: the pod that was placed, the NodeInfo's real
// generation then, and the generation the caches see instead.
type assumedFrame struct {
	uid   types.UID
	gen   int64
	stamp int64
}

var (
	// assumedNodes holds each marked node's marks, oldest first, by the
	// node's name. A value is never changed once stored, so Generation
	// reads it without a lock.
	assumedNodes sync.Map // string → []assumedFrame
	// assumedCount is the number of marks held: 0 outside pod-group
	// cycles, where Generation costs one atomic load more than the
	// NodeInfo's own.
	assumedCount atomic.Int64
	assumedMu    sync.Mutex
	// assumedTotal counts every mark ever made.
	assumedTotal atomic.Int64
	// lastStamp issues the stand-in generations, counting down from -1.
	lastStamp atomic.Int64
)

// Generation is ni's generation as the node caches key on it: the
// NodeInfo's own, unless a pod-group cycle has placed a pod into it since
// the generation was issued.
func Generation(ni fwk.NodeInfo) int64 {
	gen := ni.GetGeneration()
	if assumedCount.Load() == 0 {
		return gen
	}
	node := ni.Node()
	if node == nil {
		return gen
	}
	v, ok := assumedNodes.Load(node.Name)
	if !ok {
		return gen
	}
	frames := v.([]assumedFrame)
	if top := frames[len(frames)-1]; top.gen == gen {
		return top.stamp
	}
	// The node changed for real since (a new snapshot): its generation is
	// new, and no entry of it is stale.
	return gen
}

// Assumed marks ni's node as holding the pod uid beyond what its
// generation says.
func Assumed(ni fwk.NodeInfo, uid types.UID) {
	if ni.Node() == nil {
		return
	}
	name := ni.Node().Name
	assumedMu.Lock()
	defer assumedMu.Unlock()
	var frames []assumedFrame
	if v, ok := assumedNodes.Load(name); ok {
		frames = v.([]assumedFrame)
	}
	frames = append(frames[:len(frames):len(frames)], assumedFrame{uid: uid, gen: ni.GetGeneration(), stamp: lastStamp.Add(-1)})
	assumedNodes.Store(name, frames)
	assumedCount.Add(1)
	assumedTotal.Add(1)
}

// Forgotten takes off the mark Assumed put on ni's node for uid, and
// reports whether there was one.
func Forgotten(ni fwk.NodeInfo, uid types.UID) bool {
	if ni.Node() == nil {
		return false
	}
	name := ni.Node().Name
	assumedMu.Lock()
	defer assumedMu.Unlock()
	v, ok := assumedNodes.Load(name)
	if !ok {
		return false
	}
	frames := v.([]assumedFrame)
	// The newest first: a snapshot forgets in the reverse of assuming.
	for i := len(frames) - 1; i >= 0; i-- {
		if frames[i].uid != uid {
			continue
		}
		rest := append(append([]assumedFrame(nil), frames[:i]...), frames[i+1:]...)
		if i != len(frames)-1 {
			// Not the newest: the stand-in generation of the newest was
			// issued while the node held this pod too.
			rest[len(rest)-1].stamp = lastStamp.Add(-1)
		}
		if len(rest) == 0 {
			assumedNodes.Delete(name)
		} else {
			assumedNodes.Store(name, rest)
		}
		assumedCount.Add(-1)
		return true
	}
	return false
}

// AssumedMarks is the number of marks held, and the number ever made.
func AssumedMarks() (held, made int64) { return assumedCount.Load(), assumedTotal.Load() }
