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
	// node's name; only under assumedMu.
	assumedNodes = map[string][]assumedFrame{}
	// assumedTops is what Generation reads: each marked node's newest
	// mark, republished whole under assumedMu at every change. nil
	// outside pod-group cycles.
	assumedTops atomic.Pointer[assumedSet]
	// assumedCount is the number of marks held.
	assumedCount atomic.Int64
	assumedMu    sync.Mutex
	// assumedTotal counts every mark ever made.
	assumedTotal atomic.Int64
	// lastStamp issues the stand-in generations, counting down from -1.
	lastStamp atomic.Int64
)

// assumedTop is a marked node's newest mark, as Generation looks it up.
type assumedTop struct {
	gen, stamp int64
	name       string
}

// assumedSet is the marked nodes' tops; byGen indexes them by generation
// once there are more than scanTops of them (a large gang's cycle).
type assumedSet struct {
	tops  []assumedTop
	byGen map[int64][]int
}

// scanTops is how many tops Generation scans before it looks one up by
// generation in a map instead.
const scanTops = 16

// publishTops republishes assumedTops from assumedNodes; assumedMu held.
//
// Generation runs for every node of every policy's call, several times
// (the memo's batches, the node cache, the table rows), so its lookup is
// a scan of the few marked nodes' generations (a pod-group cycle marks
// at most the members it has placed so far) rather than a sync.Map
// lookup by name: that hashed the name per node and took a quarter of
// WasmPolicy's Filter time in the topology-aware pod-group workload
// (TopologyAwareScheduling, 500 nodes; docs/architecture.md).
func publishTops() {
	if len(assumedNodes) == 0 {
		assumedTops.Store(nil)
		return
	}
	set := &assumedSet{tops: make([]assumedTop, 0, len(assumedNodes))}
	for name, frames := range assumedNodes {
		top := frames[len(frames)-1]
		set.tops = append(set.tops, assumedTop{gen: top.gen, stamp: top.stamp, name: name})
	}
	if len(set.tops) > scanTops {
		set.byGen = make(map[int64][]int, len(set.tops))
		for i, t := range set.tops {
			set.byGen[t.gen] = append(set.byGen[t.gen], i)
		}
	}
	assumedTops.Store(set)
}

// Generation is ni's generation as the node caches key on it: the
// NodeInfo's own, unless a pod-group cycle has placed a pod into it since
// the generation was issued.
func Generation(ni fwk.NodeInfo) int64 {
	gen := ni.GetGeneration()
	set := assumedTops.Load()
	if set == nil {
		return gen
	}
	// A generation is issued once, to one node: a top at gen is this
	// node's (or its copy's), unless the NodeInfo is not from the
	// scheduler's cache, so the name is compared too. A node that changed
	// for real since its mark has a new generation, and none of its
	// entries is stale.
	node := ni.Node()
	if node == nil {
		return gen
	}
	if set.byGen != nil {
		for _, i := range set.byGen[gen] {
			if set.tops[i].name == node.Name {
				return set.tops[i].stamp
			}
		}
		return gen
	}
	for i := range set.tops {
		if t := &set.tops[i]; t.gen == gen && t.name == node.Name {
			return t.stamp
		}
	}
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
	frames := assumedNodes[name]
	assumedNodes[name] = append(frames[:len(frames):len(frames)], assumedFrame{uid: uid, gen: ni.GetGeneration(), stamp: lastStamp.Add(-1)})
	publishTops()
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
	frames, ok := assumedNodes[name]
	if !ok {
		return false
	}
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
			delete(assumedNodes, name)
		} else {
			assumedNodes[name] = rest
		}
		publishTops()
		assumedCount.Add(-1)
		return true
	}
	return false
}

// AssumedMarks is the number of marks held, and the number ever made.
func AssumedMarks() (held, made int64) { return assumedCount.Load(), assumedTotal.Load() }
