package host

import (
	"context"
	"crypto/sha256"
	"sync"
	"sync/atomic"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host/internal/hostabi"
)

// Verdicts across cycles (docs/abi.md §3.4). A Filter or Score verdict is a
// function of what the guest read: the node's row of its node table, the
// pod (less its identity: PodState.Key), its cycle state, its config and
// module. The pods of one ReplicaSet read the same, so a version remembers
// the verdicts of each (pod key, cycle state, row) and a later cycle takes
// them instead of calling the guest. A node that changed has another row;
// a changed module or config is another Version, with its own memo.
//
// Not remembered: the verdicts of a call that read anything else (the pod's
// name, UID or whole object, the cluster, a node outside its row, random
// bytes); after one such call the version stops remembering. A policy with
// the real clock, one that keeps state, and one whose args disable reuse
// are never remembered.

// memoKey is what a remembered verdict depends on besides its row.
type memoKey struct {
	kind   CallKind
	pod    [32]byte
	state  [32]byte
	layout *hostabi.Layout
	epoch  uint32
}

// memoVerdict is one remembered verdict.
type memoVerdict struct {
	res   Result
	score int64
}

// memoTable is the verdicts of one memoKey by row.
type memoTable struct {
	mu    sync.RWMutex
	rows  map[string]memoVerdict
	bytes int64
	// full is set once the table takes no more rows (evicted, or at
	// maxMemoRows).
	full bool
}

// memoEntryBytes is about what a remembered verdict costs besides its
// row's bytes: the map entry, the string header, the verdict.
const memoEntryBytes = 64

// verdictMemo is a version's remembered verdicts.
type verdictMemo struct {
	mu     sync.Mutex
	tables map[memoKey]*memoTable
	order  []memoKey // oldest first, for eviction
	// bytes is about what the tables hold (rows and verdicts).
	bytes atomic.Int64
}

// Bounds of a version's memo: the keys (pod templates × cycle states) and
// the bytes it holds, and the rows of one key. Past either of the first
// two the oldest key goes; a key with maxMemoRows rows takes no more. A
// row of a few columns and its verdict take about 100 bytes: 4 MiB hold
// 40,000 verdicts, 40 pod templates on 1000 distinct nodes.
const (
	maxMemoKeys  = 256
	maxMemoBytes = 4 << 20
	maxMemoRows  = 8192
)

// table returns the memo table of k, made if new.
func (m *verdictMemo) table(k memoKey) *memoTable {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := m.tables[k]; t != nil {
		return t
	}
	if m.tables == nil {
		m.tables = map[memoKey]*memoTable{}
	}
	for len(m.order) > 0 && (len(m.order) >= maxMemoKeys || m.bytes.Load() > maxMemoBytes) {
		old := m.tables[m.order[0]]
		delete(m.tables, m.order[0])
		m.order = m.order[1:]
		old.mu.Lock()
		m.bytes.Add(-old.bytes)
		old.rows, old.bytes = map[string]memoVerdict{}, 0 // a call holding it stores nothing more
		old.full = true
		old.mu.Unlock()
	}
	t := &memoTable{rows: map[string]memoVerdict{}}
	m.tables[k] = t
	m.order = append(m.order, k)
	return t
}

// remembers reports whether the version may remember kind's verdicts for
// calls of this pod.
func (v *Version) remembers(kind CallKind, pod *PodState) bool {
	return (kind == CallFilter || kind == CallScore) && pod != nil && v.reusable() &&
		!v.variesByPod.Load() && !v.p.realClock && v.layout.Load() != nil
}

// memoKeyOf is the key of pod's verdicts of kind in cycle pc.
func (v *Version) memoKeyOf(kind CallKind, pod *PodState, pc *PolicyCycle, l *hostabi.Layout, epoch uint32) memoKey {
	k := memoKey{kind: kind, pod: pod.Key(), layout: l, epoch: epoch}
	if pc != nil && len(pc.State) > 0 {
		k.state = sha256.Sum256(pc.State)
	}
	return k
}

// CallNodes runs the batch form of Filter or Score (kind CallFilter or
// CallScore) over nodes. results[i] (and, for Score, scores[i]) receive
// node i's verdict. Each node gets the full policy timeout, within what
// pc's budget has left. On a failed call, done is the index of the node
// being evaluated when it failed; results after it are not set.
//
// Verdicts the version remembers (verdictMemo) are taken without a call;
// the other nodes go to the guest in one call (callNodes), and their
// verdicts are remembered if the call read nothing that varies by pod.
func (v *Version) CallNodes(ctx context.Context, kind CallKind, pod *PodState, nodes []fwk.NodeInfo, pc *PolicyCycle, results []Result, scores []int64) (int, *CallError) {
	if !v.remembers(kind, pod) || len(results) != len(nodes) || (kind == CallScore && len(scores) != len(nodes)) {
		d, _, cerr := v.callNodes(ctx, kind, pod, nodes, pc, results, scores)
		return d, cerr
	}
	if pc != nil {
		// A cycle whose budget stopped calls the policy no more, and takes
		// nothing remembered either: its failure decides (docs/security.md).
		if cerr := pc.Budget.stoppedCall(); cerr != nil {
			return 0, cerr
		}
	}
	caches := v.p.e.caches
	l := v.layout.Load()
	var epoch uint32
	rows := make([][]byte, len(nodes))
	for i, ni := range nodes {
		var e uint32
		rows[i], e = caches.Row(l, ni)
		if i == 0 {
			epoch = e
		} else if e != epoch {
			d, _, cerr := v.callNodes(ctx, kind, pod, nodes, pc, results, scores) // the interner moved on: no key
			return d, cerr
		}
	}
	t := v.memo.table(v.memoKeyOf(kind, pod, pc, l, epoch))
	var miss []int
	t.mu.RLock()
	for i, row := range rows {
		mv, ok := t.rows[string(row)]
		if !ok {
			miss = append(miss, i)
			continue
		}
		results[i] = mv.res
		if scores != nil {
			scores[i] = mv.score
		}
	}
	t.mu.RUnlock()
	v.p.rowsRemembered.Add(int64(len(nodes) - len(miss)))
	if len(miss) == 0 {
		return len(nodes), nil
	}
	d, keyedBy, cerr := v.callSubset(ctx, kind, pod, nodes, miss, pc, results, scores)
	if cerr != nil {
		// The remembered nodes before the failed one keep their verdicts.
		return d, cerr
	}
	if keyedBy != l || !v.remembers(kind, pod) {
		// The guest read something else, or its instance's table has
		// other columns than the rows the memo is keyed by; or a call of
		// the version read what varies by pod, which the guest may have
		// kept for this call without reading it again.
		return len(nodes), nil
	}
	var added int64
	t.mu.Lock()
	for _, i := range miss {
		if t.full || len(t.rows) >= maxMemoRows {
			t.full = true
			break
		}
		if r := results[i]; r.Code != abi.CodeError {
			mv := memoVerdict{res: r}
			if scores != nil {
				mv.score = scores[i]
			}
			if _, dup := t.rows[string(rows[i])]; !dup {
				added += int64(len(rows[i]) + len(r.Reason) + memoEntryBytes)
			}
			t.rows[string(rows[i])] = mv
		}
	}
	t.bytes += added
	t.mu.Unlock()
	v.memo.bytes.Add(added)
	return len(nodes), nil
}
