package host

import (
	"unsafe"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/host/internal/hostabi"
)

// memoBatch is a batch whose every node had a remembered verdict, kept
// whole: the next cycle of the template finds the same NodeInfos at the
// same generations in most of its batches, and takes their verdicts
// without building a row or looking one up per node (BenchmarkCycle: the
// row lookups were 15% of a 1000-node cycle). A NodeInfo's generation
// comes from kube-scheduler's process-wide counter, taken anew on every
// change, so a node at the generation seen is the node whose rows gave
// these verdicts (as the node cache, hostabi, assumes too). A pod-group
// cycle's snapshot puts a member into a NodeInfo and restores its
// generation; hostabi.Generation gives such a node a generation of its own
// while the member is in it, and this memo keys on that one.
// Entries are not changed once stored.
type memoBatch struct {
	nodes  []uintptr // the NodeInfos' pointers (identity, not kept alive)
	gens   []int64
	res    []Result
	scores []int64
}

// memoBatchBytes is about what a memoBatch costs per node (its slices'
// elements, 48 bytes, and their growth's slack). The three estimates here
// are measured (docs/security.md, RATIONALE: remembered verdicts are
// charged what they hold).
const memoBatchBytes = 64

// nodeIdentity is the pointer a NodeInfo holds.
func nodeIdentity(ni fwk.NodeInfo) uintptr {
	return uintptr((*[2]unsafe.Pointer)(unsafe.Pointer(&ni))[1])
}

// batch answers a whole batch from a stored memoBatch, if its nodes are
// those of one at the same generations.
func (t *memoTable) batch(nodes []fwk.NodeInfo, results []Result, scores []int64) bool {
	t.mu.RLock()
	b := t.batches[nodeIdentity(nodes[0])]
	t.mu.RUnlock()
	if b == nil || len(b.nodes) != len(nodes) {
		return false
	}
	for i, ni := range nodes {
		if nodeIdentity(ni) != b.nodes[i] || hostabi.Generation(ni) != b.gens[i] {
			return false
		}
	}
	copy(results, b.res)
	if scores != nil {
		copy(scores, b.scores)
	}
	return true
}

// newMemoBatch records a batch answered from rows; nil when some node has
// no generation (a NodeInfo made outside kube-scheduler's counter) or one
// of a pod-group cycle's trial placements (a negative one, which ends with
// the trial: the batch kept for the node as it was stays).
func newMemoBatch(nodes []fwk.NodeInfo, results []Result, scores []int64) *memoBatch {
	var gens [32]int64 // a batch's worth, so a batch not kept allocates nothing
	g := gens[:0]
	for _, ni := range nodes {
		gen := hostabi.Generation(ni)
		if gen <= 0 {
			return nil
		}
		g = append(g, gen)
	}
	b := &memoBatch{nodes: make([]uintptr, len(nodes)), gens: append([]int64(nil), g...), res: append([]Result(nil), results...)}
	for i, ni := range nodes {
		b.nodes[i] = nodeIdentity(ni)
	}
	if scores != nil {
		b.scores = append([]int64(nil), scores...)
	}
	return b
}

// keepBatch stores a batch answered wholly from rows, within the memo's
// bounds (its bytes count as rows' do).
func (t *memoTable) keepBatch(v *Version, nodes []fwk.NodeInfo, results []Result, scores []int64) {
	if len(nodes) == 0 || !v.p.e.memoRoom(int64(len(nodes)*memoBatchBytes+memoEntryBytes)) || v.memo.bytes.Load() > maxMemoBytes {
		return
	}
	b := newMemoBatch(nodes, results, scores)
	if b == nil {
		return
	}
	size := int64(len(nodes)*memoBatchBytes + memoEntryBytes)
	key := b.nodes[0]
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.evicted {
		return
	}
	if t.batches == nil {
		t.batches = map[uintptr]*memoBatch{}
	}
	if old, replaced := t.batches[key]; replaced {
		size -= int64(len(old.nodes)*memoBatchBytes + memoEntryBytes)
	} else if len(t.batches) >= maxMemoBatches {
		return
	}
	t.batches[key] = b
	t.bytes += size
	v.memo.bytes.Add(size)
	v.p.e.memoBytes.Add(size)
}

// maxMemoBatches bounds the batches one table keeps: 5000 nodes in
// batches of 32 are 157.
const maxMemoBatches = 1024
