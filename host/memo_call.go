package host

import (
	"context"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host/internal/hostabi"
)

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
	remember := v.remembers(kind, pod)
	if !remember && !v.sharesInCycle(kind, pod, pc) || len(results) != len(nodes) || (kind == CallScore && len(scores) != len(nodes)) {
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
	epoch := caches.Epoch()
	t := v.memoTableOf(kind, pod, pc, l, epoch, remember)
	if t == nil || t.transient && !t.on.Load() {
		d, _, cerr := v.callNodes(ctx, kind, pod, nodes, pc, results, scores)
		return d, cerr
	}
	if len(nodes) > 0 && t.batch(nodes, results, scores) {
		v.p.rowsRemembered.Add(int64(len(nodes)))
		v.memo.hits.Add(1)
		return len(nodes), nil
	}
	// A batch of up to 32 nodes (the plugin's size) keeps its rows and
	// misses on the stack.
	var rowBuf [32][]byte
	var missBuf [32]int
	rows := rowBuf[:0]
	if len(nodes) > len(rowBuf) {
		rows = make([][]byte, 0, len(nodes))
	}
	rows = rows[:len(nodes)]
	for i, ni := range nodes {
		var e uint32
		if rows[i], e = caches.Row(l, ni); e != epoch {
			d, _, cerr := v.callNodes(ctx, kind, pod, nodes, pc, results, scores) // the interner moved on: no key
			return d, cerr
		}
	}
	miss := missBuf[:0]
	t.mu.RLock()
	empty := len(t.rows) == 0
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
	if t.transient {
		if !empty {
			t.looked(v, kind, len(miss) < len(nodes))
		}
		v.p.rowsShared.Add(int64(len(nodes) - len(miss)))
	} else {
		v.p.rowsRemembered.Add(int64(len(nodes) - len(miss)))
		if len(miss) < len(nodes) {
			v.memo.hits.Add(1)
		}
	}
	if len(miss) == 0 {
		if !t.transient {
			t.keepBatch(v, nodes, results, scores)
		}
		return len(nodes), nil
	}
	var d int
	var keyedBy *hostabi.Layout
	var cerr *CallError
	if len(miss) == len(nodes) {
		d, keyedBy, cerr = v.callNodes(ctx, kind, pod, nodes, pc, results, scores)
	} else {
		d, keyedBy, cerr = v.callSubset(ctx, kind, pod, nodes, miss, pc, results, scores)
	}
	if cerr != nil {
		// The remembered nodes before the failed one keep their verdicts.
		return d, cerr
	}
	if keyedBy != l || !t.transient && (!v.remembers(kind, pod) || t.reads != v.podReads.Set().Gen) {
		// The guest read something else, or its instance's table has
		// other columns than the rows the memo is keyed by; or a call of
		// the version read what varies by pod, which the guest may have
		// kept for this call without reading it again; or a guest read a
		// label or annotation the key does not hold.
		return len(nodes), nil
	}
	var added int64
	t.mu.Lock()
	limit := maxMemoRows
	if t.transient {
		limit = maxCycleRows
	}
	for _, i := range miss {
		if t.full || len(t.rows) >= limit {
			t.full = true
			break
		}
		if !t.transient && !v.p.e.memoRoom(int64(len(rows[i])+memoEntryBytes)) {
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
	if !t.transient {
		v.memo.bytes.Add(added)
		v.p.e.memoBytes.Add(added)
	}
	t.mu.Unlock()
	return len(nodes), nil
}
