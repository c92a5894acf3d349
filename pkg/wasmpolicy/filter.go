package wasmpolicy

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework"
	"github.com/wasmsched/wasmsched/internal/verdict"
)

// Filter runs each policy's filter in order and stops at the first rejection.
func (w *WasmPolicy) Filter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	c := w.cycleFor(state, pod)
	if c.record != nil {
		return w.filterRecorded(ctx, c, nodeInfo)
	}
	pos := -2 // not looked up yet; -1: not in the PreFilter list
	for i, p := range c.policies {
		if c.runs[i].filterSkipped {
			continue
		}
		v := w.filterPolicy(ctx, c, i, nodeInfo, &pos, !p.audit())
		if c.hasPrimaries {
			c.recordPrimary(i, nodeInfo.Node().Name, v)
		}
		if v.Rejects() {
			if !c.runs[i].rejectedBy.Load() { // one write per cycle, not a shared line written per node
				c.runs[i].rejectedBy.Store(true)
				if framework.InPodGroupCycle(state) {
					// No PostFilter comes for a pod-group member: a new
					// module of the policy requeues it from here.
					w.rememberRejected(p, pod, c.runs[i].module)
				}
			}
			return p.status(host.CallFilter, v)
		}
	}
	return nil
}

// filterRecorded is Filter in a recorded cycle: every policy's verdict on
// the node is recorded, and the first enforced rejection is the status.
func (w *WasmPolicy) filterRecorded(ctx context.Context, c *cycleData, nodeInfo fwk.NodeInfo) *fwk.Status {
	var st *fwk.Status
	pos, name := -2, nodeInfo.Node().Name
	for i, p := range c.policies {
		var v verdict.Verdict
		var took time.Duration
		point := host.CallFilter
		switch {
		case c.record.outside(i, name):
			// An audited policy's prefilter_nodes (an enforced one's
			// keep the node from Filter): what it would do if it enforced.
			v = verdict.Verdict{Code: fwk.UnschedulableAndUnresolvable, Reason: outsidePreFilterResult}
		case c.record.pre[i].Rejects(): // read-only after PreFilter
			v, point = c.record.pre[i], host.CallPreFilter
		case c.runs[i].module != nil && !c.runs[i].module.Exports().Has(host.CallFilter):
			c.record.filtered(name, i, "Pass", "(the policy does not filter)", 0)
			continue
		case c.runs[i].filterSkipped:
			c.record.filtered(name, i, "Skip", "", 0)
			continue
		default:
			start := time.Now()
			v = w.filterPolicy(ctx, c, i, nodeInfo, &pos, true)
			took = time.Since(start)
		}
		if !v.Rejects() {
			c.record.filtered(name, i, "Pass", "", took)
			continue
		}
		status := p.status(point, v)
		reason := v.Reason
		if reason == "" {
			reason = status.Message() // the policy gave no reason: say who rejected
		}
		c.record.filtered(name, i, v.Code.String(), reason, took)
		if !p.audit() && st == nil {
			c.runs[i].rejectedBy.Store(true)
			st = status
		}
	}
	return st
}

// filterPolicy runs policy i's filter on one node, from its batch when the
// cycle batches and the node is in the PreFilter list. *pos caches the
// node's position across the policies (-2: not looked up yet).
func (w *WasmPolicy) filterPolicy(ctx context.Context, c *cycleData, i int, nodeInfo fwk.NodeInfo, pos *int, enforce bool) verdict.Verdict {
	p, m := c.policies[i], c.runs[i].module
	if m == nil {
		return p.onFailure(host.CallFilter, notLoaded(p), enforce)
	}
	var res host.Result
	var cerr *host.CallError
	batched := false
	if c.runs[i].filterBatches != nil {
		if *pos == -2 {
			*pos = c.position(nodeInfo)
		}
		if *pos >= 0 {
			res, _, cerr, batched = batchResult(ctx, p, m, c, i, host.CallFilter, c.runs[i].filterBatches, c.nodes, *pos)
		}
	}
	if !batched {
		_, res, cerr = p.call(ctx, m, host.CallFilter, c, i, nodeInfo, nil)
	}
	if cerr != nil {
		return p.callFailed(ctx, c, i, host.CallFilter, cerr, enforce)
	}
	audit := func(reason string) { c.auditFor(i).rejectNode(nodeInfo.Node().Name, reason) }
	if batched {
		return p.readCounted(ctx, host.CallFilter, res, enforce, audit)
	}
	return p.read(ctx, host.CallFilter, res, enforce, audit)
}
