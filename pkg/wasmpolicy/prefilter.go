package wasmpolicy

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework"
	"github.com/wasmsched/wasmsched/internal/verdict"
)

// PreFilter pins the module versions for the cycle and runs each policy's
// prefilter. A policy rejecting the pod here rejects it for every node.
func (w *WasmPolicy) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*framework.PreFilterResult, *fwk.Status) {
	if st := w.podGroupStatus(state); st != nil {
		return nil, st
	}
	c := w.cycleFor(state, pod)
	if d, why := w.shareHeld(pod, c.policies, false); d > 0 {
		// No guest is called: the namespace's policies have had their
		// share; PostFilter retries the pod when it has refilled.
		// Unresolvable: preempting other pods cannot help it (and
		// preemption's search over every node is not spent on it).
		c.shareWait = d
		if framework.InPodGroupCycle(state) {
			// No PostFilter comes for a pod-group member.
			w.gates.retry(pod, d)
		}
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, why)
	}
	w.cycleStarted(c.policies)
	c.nodes = w.filteredNodes(state, nodes)
	c.index = w.indexFor(c.nodes)
	viewNodes(c, nodes)
	for i := range c.runs {
		c.runs[i].filterBatches = nil
	}
	anyFilter := false
	var subset sets.Set[string] // nil: every node
	var rejected *fwk.Status    // a recorded cycle goes on to the other policies
	for i, p := range c.policies {
		v := w.preFilterPolicy(ctx, c, i, !p.audit() || c.record != nil)
		if c.record != nil {
			c.record.preFilter(i, v)
		}
		if v.Rejects() && !p.audit() {
			if rejected == nil {
				c.recordPrimary(i, "", v)
				// Remembered also when a failure rejected it: a new module, or
				// the breaker letting a probe through, retries the pod at once.
				w.rememberRejected(p, pod, c.runs[i].module)
				rejected = p.status(host.CallPreFilter, v)
			}
			if c.record == nil {
				return nil, rejected
			}
			continue
		}
		// An enforced policy's prefilter_nodes narrows the nodes the
		// scheduler filters; several policies' lists intersect.
		if pc := &c.runs[i].pc; pc.NodeNamesSet && !p.audit() {
			named := sets.New(pc.NodeNames...)
			if subset == nil {
				subset = named
			} else {
				subset = subset.Intersection(named)
			}
		}
		if !c.runs[i].filterSkipped {
			anyFilter = true
			if c.batching && c.runs[i].module.Exports().Has(host.CallFilterNodes) && c.index != nil {
				c.runs[i].filterBatches = newBatches(len(c.nodes))
			}
		}
	}
	if rejected != nil {
		return nil, rejected
	}
	if subset != nil {
		return &framework.PreFilterResult{NodeNames: subset}, nil
	}
	if !anyFilter {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return nil, nil
}

// preFilterPolicy runs policy i's prefilter, if it has one, and marks it
// filterSkipped when it will not filter this pod. Only a rejecting verdict
// matters to the caller; an audited rejection is recorded and passes.
func (w *WasmPolicy) preFilterPolicy(ctx context.Context, c *cycleData, i int, enforce bool) verdict.Verdict {
	p, m := c.policies[i], c.runs[i].module
	if m == nil {
		c.runs[i].filterSkipped = true
		if enforce && !p.settled.Load() {
			// Still loading its first module: the pod waits (and is woken
			// when the load ends) rather than getting the failurePolicy.
			return verdict.Verdict{Code: fwk.UnschedulableAndUnresolvable, Reason: loading(p), Failure: true}
		}
		return p.onFailure(host.CallPreFilter, notLoaded(p), enforce)
	}
	if why := c.stopReason(i); why != "" { // its circuit breaker is open
		c.runs[i].filterSkipped = true
		p.m.evaluated(host.CallPreFilter, rNotCalled)
		return p.onFailure(host.CallPreFilter, why, enforce)
	}
	ex := m.Exports()
	if !ex.Has(host.CallFilter) {
		c.runs[i].filterSkipped = true
	}
	if !ex.Has(host.CallPreFilter) {
		return verdict.Pass
	}
	_, res, cerr := p.call(ctx, m, host.CallPreFilter, c, i, nil, nil)
	if cerr != nil {
		c.runs[i].filterSkipped = true
		return p.callFailed(ctx, c, i, host.CallPreFilter, cerr, enforce)
	}
	if res.Code != abi.CodeSuccess {
		// Skipped, rejected (in Audit mode too) or failed: its filter has
		// nothing to add.
		c.runs[i].filterSkipped = true
	}
	return p.read(ctx, host.CallPreFilter, res, enforce, c.auditFor(i).rejectPod)
}

// PreFilterExtensions implements framework.PreFilterPlugin; policies keep no
// per-pod state that AddPod/RemovePod would need to update.
func (w *WasmPolicy) PreFilterExtensions() framework.PreFilterExtensions { return nil }
