package host

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host/internal/hostabi"
)

// callNodes runs the batch form of Filter or Score over nodes on one
// instance, in one guest call (CallNodes without the memo). keyedBy is the
// layout of the rows the verdicts came from when the call read no node
// outside its row: within the cycle they may be shared under rows of that
// layout, and across cycles too if the version still remembers (the call
// read nothing that varies by pod, which sets variesByPod). nil: they may
// not.
//
// Nodes whose node-table rows are equal are evaluated once when the
// version may reuse verdicts (reusable): the guest sees each distinct row
// once and its verdict is given to every node with that row. A guest that
// turns out to read outside its row has the nodes that shared a row
// evaluated again, each on its own, and is not grouped again under that
// table's layout (unkeyableUnder).
func (v *Version) callNodes(ctx context.Context, kind CallKind, pod *PodState, nodes []fwk.NodeInfo, pc *PolicyCycle, results []Result, scores []int64) (done int, keyedBy *hostabi.Layout, cerr *CallError) {
	batchKind := abi.BatchNone
	if kind >= 0 && kind < NumCallKinds {
		batchKind = abi.Points[kind].Batch
	}
	if batchKind == abi.BatchNone || !v.implements(batchKind) || len(results) != len(nodes) || (kind == CallScore && len(scores) != len(nodes)) {
		name := "a batch form of " + kind.String()
		if batchKind != abi.BatchNone {
			name = abi.Points[batchKind].Export
		}
		return 0, nil, &CallError{Outcome: OutcomeUnavailable, Err: fmt.Errorf("module does not implement %s for %d nodes (results %d, scores %d)", name, len(nodes), len(results), len(scores))}
	}
	in, deadline, cerr := v.begin(ctx, kind, pc)
	if cerr != nil {
		return 0, nil, cerr
	}
	for i := range results {
		results[i] = Result{Code: hostabi.CodeUnselected}
	}
	if kind == CallScore {
		clear(scores)
	}
	// An ABI v2 guest that declared a node table large enough gets the
	// nodes' declared fields in its memory (abi.md §3.2), each distinct
	// row once if its verdicts may be reused (§3.4).
	var t *hostabi.Table
	var groups *hostabi.RowGroups
	if v.reusable() && len(nodes) > 1 && in.Table != nil && v.keyableUnder(in.Table.Layout()) && v.groupRows() {
		groups = &in.Groups
	}
	if in.Table != nil && len(nodes) <= in.Table.Rows() && v.abiVersion >= 2 && in.FillTable(in.mod.Memory(), in.Table, nodes, groups) {
		t = in.Table
		in.CallTable, in.TableCur, in.TableEpoch = t, -1, in.Caches.Epoch()
		v.tableBatches.Add(1)
	} else {
		groups = nil
	}
	if groups != nil {
		v.grouped(len(groups.Nodes) < len(nodes))
		if len(groups.Nodes) == len(nodes) {
			groups = nil // every row distinct: nothing to share
		}
	}
	// The guest's view of the batch: every node, or one node per row.
	bNodes, bResults, bScores := nodes, results, scores
	if groups != nil {
		n := len(groups.Nodes)
		bNodes, bResults = groups.Nodes, make([]Result, n)
		for i := range bResults {
			bResults[i] = Result{Code: hostabi.CodeUnselected}
		}
		if kind == CallScore {
			bScores = make([]int64, n)
		}
	}
	in.Pod, in.Cycle, in.Batch, in.Results, in.Cur, in.ScoresSet, in.Unkeyable, in.VariesByPod, in.Random = pod, abiCycle(pc), bNodes, bResults, -1, false, false, false, false
	if kind == CallScore {
		in.Scores = bScores
	}
	_, cerr = in.call(batchKind, pod.Cycle, uint32(len(bNodes)), deadline)
	done = in.Cur
	scoresSet := in.ScoresSet
	var fromTable []bool
	if t != nil {
		fromTable = make([]bool, len(bNodes))
		var sc []int64
		if kind == CallScore {
			sc = bScores
		}
		in.TableVerdicts(in.liveMemory(), t, len(bNodes), bResults, sc, fromTable)
		if cerr != nil {
			// The nodes the guest gave a verdict, in order, keep it; the
			// first without one was being evaluated and gets the failure.
			lead := 0
			for lead < len(bNodes) && fromTable[lead] {
				lead++
			}
			done = max(done, lead)
		}
	}
	var again []int // nodes that shared a row with an unkeyable guest
	if groups != nil {
		if !in.Unkeyable {
			v.p.rowsShared.Add(int64(len(nodes) - len(bNodes))) // the others are evaluated again
		}
		fromTable, done, again = groups.Scatter(bResults, bScores, fromTable, results, scores, done, cerr != nil, in.Unkeyable)
		if in.Unkeyable {
			v.unkeyableUnder(t.Layout())
		}
		groups.Release()
	}
	v.p.rowsEvaluated.Add(int64(len(bNodes)))
	if in.VariesByPod {
		v.variesByPod.Store(true)
	}
	if in.ReadsObjects {
		v.readsObjects.Store(true)
	}
	if in.Random {
		v.random.Store(true)
	}
	if in.Table != nil {
		v.layout.Store(in.Table.Layout()) // what the memo keys rows by
	}
	if t != nil && !in.Unkeyable {
		keyedBy = t.Layout()
	}
	in.Batch, in.Results, in.Cur, in.CallTable = nil, nil, -1, nil
	cerr = v.end(in, pc, cerr)
	if cerr != nil {
		done = max(done, 0)
		unselected(results[:done], nodes, batchKind, t != nil)
		return done, nil, cerr
	}
	if len(again) > 0 {
		// Evaluated again, each node on its own row, after a guest that
		// read outside its rows answered for them.
		if d, _, cerr := v.callSubset(ctx, kind, pod, nodes, again, pc, results, scores); cerr != nil {
			unselected(results[:d], nodes, batchKind, t != nil)
			return d, nil, cerr
		}
		for _, i := range again {
			fromTable[i] = true // its own call checked its score
		}
	}
	unselected(results, nodes, batchKind, t != nil)
	if kind == CallScore && !scoresSet {
		for i := range results {
			if results[i].Code == abi.CodeSuccess && (fromTable == nil || !fromTable[i]) {
				results[i] = Result{Code: abi.CodeError, Reason: "score_nodes returned without reporting its scores with scores_set"}
			}
		}
	}
	return len(nodes), keyedBy, nil
}

// callSubset runs callNodes over the nodes at idx (indices into nodes,
// ascending) and puts their verdicts at those indices of results (and
// scores). On a failure done is the index in nodes of the node that
// failed; keyedBy is callNodes'.
func (v *Version) callSubset(ctx context.Context, kind CallKind, pod *PodState, nodes []fwk.NodeInfo, idx []int, pc *PolicyCycle, results []Result, scores []int64) (done int, keyedBy *hostabi.Layout, cerr *CallError) {
	sub := make([]fwk.NodeInfo, len(idx))
	subResults := make([]Result, len(idx))
	var subScores []int64
	if scores != nil {
		subScores = make([]int64, len(idx))
	}
	for k, i := range idx {
		sub[k] = nodes[i]
	}
	d, keyedBy, cerr := v.callNodes(ctx, kind, pod, sub, pc, subResults, subScores)
	for k := range min(d, len(idx)) {
		results[idx[k]] = subResults[k]
		if subScores != nil {
			scores[idx[k]] = subScores[k]
		}
	}
	if cerr != nil {
		return idx[min(d, len(idx)-1)], nil, cerr
	}
	return len(nodes), keyedBy, nil
}

// Grouping rows costs a hash and a map entry per node (about a third of
// the host's side of a batch whose rows are all distinct); a version
// whose batches keep finding nothing to share groups one batch in
// groupProbe, and all of them again once that one shares a row.
const (
	groupIdleAfter = 4
	groupProbe     = 16
)

// groupRows reports whether this batch's rows are grouped.
func (v *Version) groupRows() bool { return v.grouping.try(groupIdleAfter, groupProbe) }

// grouped records whether a grouped batch shared a row.
func (v *Version) grouped(shared bool) { v.grouping.record(shared, groupIdleAfter) }

// backoff stops a kind of sharing that keeps finding nothing, but for one
// try in every probe, until one finds something again. A try is a batch
// (grouping) or a cycle (a cycle's table).
type backoff struct {
	// idle counts the tries in a row that found nothing; tries counts
	// the tries since it reached idleAfter.
	idle, tries atomic.Int32
}

// try reports whether this try looks for something to share.
func (b *backoff) try(idleAfter, probe int32) bool {
	if b.idle.Load() < idleAfter {
		return true
	}
	return b.tries.Add(1)%probe == 0
}

// record records whether a try that looked found something.
func (b *backoff) record(found bool, idleAfter int32) {
	if found {
		b.idle.Store(0)
	} else if b.idle.Load() < idleAfter {
		b.idle.Add(1)
	}
}

// reusable reports whether the version's verdicts may be shared by nodes
// with equal rows: not when the policy turned reuse off, the guest said
// it keeps state across calls, or it was seen reading outside its rows in
// a single-node call or under more than maxUnkeyableLayouts layouts.
func (v *Version) reusable() bool {
	return !v.p.noReuse && !v.exports.KeepsState && !v.unkeyable.Load()
}

// maxUnkeyableLayouts is how many layouts a guest may be seen reading
// outside the rows of before its rows are never grouped again. A guest
// learns its columns batch by batch (the SDK declares a table of what the
// last batch read), so a read the table does not have yet is how a new
// column starts: noderesourcesfit's first Score batch read the scoring
// columns its Filter batches had not declared, and its rows were then
// never grouped, nor remembered (2.2 million rows evaluated in the
// 500-node topology-aware pod-group workload, none shared). A read no
// column can carry adds no column: such a guest is caught once under each
// layout it has, and its rows are never grouped under that layout again.
const maxUnkeyableLayouts = 4

// keyableUnder reports whether the guest may have its rows of layout l
// grouped: it was never seen reading outside them.
func (v *Version) keyableUnder(l *hostabi.Layout) bool {
	if at := v.unkeyableAt.Load(); at != nil {
		for _, u := range *at {
			if u == l {
				return false
			}
		}
	}
	return true
}

// unkeyableUnder records that the guest read outside its rows of layout l.
func (v *Version) unkeyableUnder(l *hostabi.Layout) {
	for {
		old := v.unkeyableAt.Load()
		var next []*hostabi.Layout
		if old != nil {
			next = append(next, *old...)
		}
		if slices.Contains(next, l) {
			return
		}
		if next = append(next, l); len(next) > maxUnkeyableLayouts {
			v.unkeyable.Store(true)
			return
		}
		if v.unkeyableAt.CompareAndSwap(old, &next) {
			return
		}
	}
}

// unselected gives the nodes of a batch the guest never selected an Error
// verdict: a guest that returns early must not pass nodes it did not look
// at (abi.md §3.1), so the policy's failurePolicy decides for them.
func unselected(results []Result, nodes []fwk.NodeInfo, batchKind CallKind, table bool) {
	what := "selecting"
	if table {
		what = "a verdict in its node table or selecting"
	}
	for i := range results {
		if results[i].Code == hostabi.CodeUnselected {
			name := ""
			if n := nodes[i].Node(); n != nil {
				name = n.Name
			}
			results[i] = Result{Code: abi.CodeError, Reason: fmt.Sprintf("%s returned without %s node %d (%s)", abi.Points[batchKind].Export, what, i, name)}
		}
	}
}

// begin takes an instance for a call of pc's cycle, and the budget's
// deadline for it.
func (v *Version) begin(ctx context.Context, kind CallKind, pc *PolicyCycle) (*instance, int64, *CallError) {
	var b *Budget
	if pc != nil {
		b = pc.Budget
	}
	if cerr := b.stoppedCall(); cerr != nil {
		return nil, 0, cerr
	}
	// The running token comes first: an instance is only held by a call
	// that runs, so at most one instance per P is in use at any time, and
	// a policy never needs more instances than that (memoryBudget).
	tokens := *v.p.e.proc.running.Load()
	select {
	case tokens <- struct{}{}:
	default:
		var gate chan struct{} // nil: never ready
		if kind == CallPreEnqueue {
			gate = v.p.e.proc.gate
		}
		select {
		case tokens <- struct{}{}:
		case gate <- struct{}{}:
			tokens = gate
		case <-ctx.Done():
			return nil, 0, &CallError{Outcome: OutcomeUnavailable, Err: fmt.Errorf("%w (%w)", errRunWait, context.Cause(ctx))}
		}
	}
	in, err := v.acquire(ctx)
	if err != nil {
		<-tokens
		return nil, 0, &CallError{Outcome: OutcomeUnavailable, Err: err}
	}
	in.token = tokens
	if b == nil {
		return in, 0, nil
	}
	deadline, cerr := b.begin(in)
	if cerr != nil {
		v.release(in, true)
		<-tokens
		return nil, 0, cerr
	}
	return in, deadline, nil
}

// end charges the call to pc's budget (a failure stops the budget) and
// returns the instance to the pool, or discards it after a failed call.
func (v *Version) end(in *instance, pc *PolicyCycle, cerr *CallError) *CallError {
	if pc != nil && pc.Budget != nil {
		cerr = pc.Budget.end(in, cerr)
	}
	// A call stopped before it was armed left the instance untouched.
	tokens := in.token
	in.token = nil
	v.release(in, cerr == nil || cerr.Outcome == OutcomeStopped && !in.interrupted())
	<-tokens
	return cerr
}

// implements reports whether the module exports the entry point of kind.
func (v *Version) implements(kind CallKind) bool { return v.exports.Has(kind) }

// Call runs one extension point on a pooled instance. node is nil for
// PreFilter, PreScore and NormalizeScore; pc is the policy's state for this
// cycle (the guest's cycle state, written by prefilter/prescore and read
// later, and the cycle budget); scores is the in/out slice for
// NormalizeScore. A CallError means the call failed (timeout, trap, exit,
// budget, or no instance) and the instance was discarded, or that the
// cycle's budget had stopped and the guest was not called.
func (v *Version) Call(ctx context.Context, kind CallKind, pod *PodState, node fwk.NodeInfo, pc *PolicyCycle, scores []int64) (int64, Result, *CallError) {
	if kind < 0 || kind >= NumCallKinds || abi.Points[kind].BatchOf != abi.BatchNone || !v.implements(kind) {
		return 0, Result{}, &CallError{Outcome: OutcomeUnavailable, Err: fmt.Errorf("module does not implement extension point %d", kind)}
	}
	in, deadline, cerr := v.begin(ctx, kind, pc)
	if cerr != nil {
		return 0, Result{}, cerr
	}
	in.Pod, in.Node, in.Cycle, in.Scores, in.Unkeyable, in.VariesByPod, in.Random = pod, node, abiCycle(pc), scores, false, false, false
	// A reserve that does not pass keeps none of the counts it took: a
	// failed one may never see an Unreserve (failurePolicy Ignore lets
	// its pod go on).
	counters, mark := in.Counters, 0
	if kind == CallReserve && counters != nil && pod != nil {
		mark = counters.Held(string(pod.Pod.UID))
	}
	if kind == CallNormalizeScore && pc != nil && len(pc.Scored) == len(scores) {
		in.Batch, in.Cur = pc.Scored, -1 // select_node picks a scored node
	}
	ret, cerr := in.call(kind, pod.Cycle, uint32(len(scores)), deadline)
	in.Batch, in.Cur = nil, -1
	// A guest may keep what a call read for the rest of the cycle (the
	// SDK's PerCycle): a read that varies by pod in any call, prefilter
	// included, makes the batches after it depend on it too (memo.go).
	if in.VariesByPod {
		v.variesByPod.Store(true)
	}
	if in.ReadsObjects {
		v.readsObjects.Store(true)
	}
	if in.Unkeyable {
		v.unkeyable.Store(true)
	}
	if in.Random {
		v.random.Store(true)
	}
	res := Result{Code: in.Code, Reason: in.Reason}
	if cerr = v.end(in, pc, cerr); cerr != nil || kind.Read(res.Code) != abi.Passes {
		if kind == CallReserve && counters != nil && pod != nil {
			counters.RollBack(string(pod.Pod.UID), mark)
		}
	}
	if cerr != nil {
		return 0, Result{}, cerr
	}
	return int64(ret), res, nil
}
