package wasmpolicy

import (
	"context"
	"time"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework"
	"github.com/wasmsched/wasmsched/internal/verdict"
)

// PreScore runs each policy's prescore and skips Score when no policy scores.
func (w *WasmPolicy) PreScore(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	c := w.cycleFor(state, pod)
	viewNodes(c, nodes)
	w.startScoring(c, nodes)
	anyScore := false
	var st *fwk.Status // a recorded cycle goes on to the other policies
	for i, p := range c.policies {
		v := w.preScorePolicy(ctx, c, i, !p.audit() || c.record != nil)
		if v.Rejects() {
			if c.record != nil {
				c.record.normalized(names(nodes), i, nil, p.status(host.CallPreScore, v).Message())
			}
			if !p.audit() && st == nil {
				st = p.status(host.CallPreScore, v)
			}
			if c.record == nil {
				return st
			}
		}
		anyScore = anyScore || !c.runs[i].scoreSkipped
	}
	if st != nil {
		return st
	}
	if !anyScore {
		return fwk.NewStatus(fwk.Skip)
	}
	return nil
}

// startScoring prepares the cycle for scoring nodes (the feasible ones).
func (w *WasmPolicy) startScoring(c *cycleData, nodes []fwk.NodeInfo) {
	c.scoring = true
	for i := range c.runs {
		r := &c.runs[i]
		r.rawScores, r.rawScoresOffList, r.scoreBatches = nil, nil, nil
	}
	c.scoreNodes, c.scoreOf, c.scorePos, c.batchNodes, c.batchOf = nodes, nil, nil, nil, nil
	if c.index != nil {
		of := make([]int32, len(c.nodes))
		for i, ni := range nodes {
			p := c.position(ni)
			if p < 0 || of[p] != 0 {
				of = nil
				break
			}
			of[p] = int32(i) + 1
		}
		c.scoreOf = of
	}
	if c.scoreOf != nil {
		c.batchNodes, c.batchOf = make([]fwk.NodeInfo, 0, len(nodes)), make([]int32, len(c.nodes))
		for p, j := range c.scoreOf {
			if j > 0 {
				c.batchNodes = append(c.batchNodes, c.nodes[p])
				c.batchOf[p] = int32(len(c.batchNodes))
			}
		}
	}
	if c.scoreOf == nil {
		c.scorePos = make(map[unsafe.Pointer]int, len(nodes))
		for i, ni := range nodes {
			c.scorePos[identity(ni)] = i
		}
	}
}

// scoreSlot is where a node's raw scores and batch results are kept: found
// once per node in Score and shared by every policy's scorePolicy (the
// identity lookups cost about as much as a remembered verdict).
type scoreSlot struct {
	// pos is the node's position in the scored nodes; indexed says it is
	// one of them (otherwise its score goes to rawScoresOffList).
	pos     int
	indexed bool
	// list and at name the node's batch entry: the batch list cut in
	// PreFilter order, or the scored nodes themselves.
	list []fwk.NodeInfo
	at   int
}

// scoreIndex returns the node's slot among the scored nodes.
func (c *cycleData) scoreIndex(ni fwk.NodeInfo) scoreSlot {
	j, p := -1, -1
	if c.scoreOf != nil {
		if p = c.position(ni); p >= 0 {
			j = int(c.scoreOf[p]) - 1
		}
	} else if k, ok := c.scorePos[identity(ni)]; ok {
		j = k
	}
	sl := scoreSlot{pos: j, indexed: j >= 0 && j < len(c.scoreNodes) && c.scoreNodes[j] == ni}
	if sl.indexed {
		sl.list, sl.at = c.scoreNodes, j
		if c.batchOf != nil {
			sl.list, sl.at = c.batchNodes, int(c.batchOf[p])-1
		}
	}
	return sl
}

// preScorePolicy runs policy i's prescore, if it has one, and marks it
// scoreSkipped when it will not score this pod; otherwise it makes room for
// the policy's raw scores.
func (w *WasmPolicy) preScorePolicy(ctx context.Context, c *cycleData, i int, enforce bool) verdict.Verdict {
	p, m := c.policies[i], c.runs[i].module
	if m == nil || !m.Exports().Has(host.CallScore) || p.cfg.Weight == 0 {
		c.runs[i].scoreSkipped = true
		return verdict.Skip
	}
	if why := c.stopReason(i); why != "" { // stopped during Filter, or its breaker is open
		c.runs[i].scoreSkipped = true
		p.m.evaluated(host.CallPreScore, rNotCalled)
		return p.onFailure(host.CallPreScore, why, enforce)
	}
	if m.Exports().Has(host.CallPreScore) {
		_, res, cerr := p.call(ctx, m, host.CallPreScore, c, i, nil, nil)
		if cerr != nil {
			c.runs[i].scoreSkipped = true
			return p.callFailed(ctx, c, i, host.CallPreScore, cerr, enforce)
		}
		// Skipped, or failed (an ignored failure skips the policy too).
		if v := p.read(ctx, host.CallPreScore, res, enforce, nil); res.Code != abi.CodeSuccess {
			c.runs[i].scoreSkipped = true
			return v
		}
	}
	c.runs[i].rawScores = make([]int64, len(c.scoreNodes))
	c.runs[i].rawScoresOffList = map[string]int64{}
	if c.batching && m.Exports().Has(host.CallScoreNodes) {
		c.runs[i].scoreBatches = newBatches(len(c.scoreNodes))
	}
	return verdict.Pass
}

// Score collects each policy's raw score for the node; NormalizeScore turns
// them into the plugin's 0..100 score.
func (w *WasmPolicy) Score(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	c := w.cycleFor(state, pod)
	if !c.scoring {
		return 0, nil
	}
	slot := c.scoreIndex(nodeInfo)
	if c.record != nil {
		return 0, w.scoreRecorded(ctx, c, nodeInfo, slot)
	}
	for i, p := range c.policies {
		if c.runs[i].scoreSkipped {
			continue
		}
		if _, v := w.scorePolicy(ctx, c, i, nodeInfo, slot, !p.audit()); v.Rejects() {
			return 0, p.status(host.CallScore, v)
		}
	}
	return 0, nil
}

// scoreRecorded is Score in a recorded cycle: every scoring policy's raw
// score is recorded, and the first enforced rejection is the status.
func (w *WasmPolicy) scoreRecorded(ctx context.Context, c *cycleData, nodeInfo fwk.NodeInfo, slot scoreSlot) *fwk.Status {
	var st *fwk.Status
	for i, p := range c.policies {
		if c.runs[i].scoreSkipped {
			continue
		}
		start := time.Now()
		raw, v := w.scorePolicy(ctx, c, i, nodeInfo, slot, true)
		took := time.Since(start)
		why := ""
		if v.Rejects() {
			why = p.status(host.CallScore, v).Message()
			if !p.audit() && st == nil {
				st = p.status(host.CallScore, v)
			}
		}
		c.record.scored(nodeInfo.Node().Name, i, raw, why, took)
	}
	return st
}

// names are the nodes' names.
func names(nodes []fwk.NodeInfo) []string {
	out := make([]string, len(nodes))
	for i, ni := range nodes {
		out[i] = ni.Node().Name
	}
	return out
}

// scorePolicy runs policy i's score on one node (from its batch when the
// node is one of the scored nodes; slot is scoreIndex's for the node) and records the raw score for
// NormalizeScore: 0 when the call failed or the guest returned an error.
func (w *WasmPolicy) scorePolicy(ctx context.Context, c *cycleData, i int, nodeInfo fwk.NodeInfo, slot scoreSlot, enforce bool) (int64, verdict.Verdict) {
	p, m := c.policies[i], c.runs[i].module
	pos, indexed := slot.pos, slot.indexed
	var s int64
	var res host.Result
	var cerr *host.CallError
	batched := false
	if indexed && c.runs[i].scoreBatches != nil {
		res, s, cerr, batched = batchResult(ctx, p, m, c, i, host.CallScore, c.runs[i].scoreBatches, slot.list, slot.at)
	}
	if !batched {
		s, res, cerr = p.call(ctx, m, host.CallScore, c, i, nodeInfo, nil)
	}
	var v verdict.Verdict
	if cerr != nil {
		v, s = p.callFailed(ctx, c, i, host.CallScore, cerr, enforce), 0
	} else if batched {
		v = p.readCounted(ctx, host.CallScore, res, enforce, nil)
	} else {
		v = p.read(ctx, host.CallScore, res, enforce, nil)
	}
	if cerr == nil && res.Code != abi.CodeSuccess {
		s = 0 // a failure, whatever its failurePolicy made of it, scores 0
	}
	if v.Rejects() {
		return 0, v
	}
	if indexed {
		c.runs[i].rawScores[pos] = s // each position is written by one Score call only
	} else {
		c.mu.Lock()
		c.runs[i].rawScoresOffList[nodeInfo.Node().Name] = s
		c.mu.Unlock()
	}
	return s, v
}

// ScoreExtensions implements framework.ScorePlugin.
func (w *WasmPolicy) ScoreExtensions() framework.ScoreExtensions { return w }
