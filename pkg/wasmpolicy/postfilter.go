package wasmpolicy

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework"
)

// PostFilter runs when no node fits and preemption found none either. It
// cannot make the pod fit, but:
//   - each policy that exports postfilter (ABI v4) may add a message of
//     its own to the pod's: it nominates no node and evicts nothing;
//   - it remembers which policies rejected the pod, so that a new version
//     of such a policy requeues the pod immediately;
//   - it has a pod that some node rejected only because a policy found no
//     CPU in time retried soon: no cluster event may come to retry it.
//
// Its status is always Unschedulable, whatever a guest returns, so no
// policy can keep kube-scheduler from trying the pod's other PostFilter
// plugins.
func (w *WasmPolicy) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ framework.NodeToStatusReader) (*framework.PostFilterResult, *fwk.Status) {
	c := readCycle(state)
	var reasons []string
	if c != nil && c.shareWait == 0 {
		// Not for a pod its namespace's share held at PreFilter: no
		// guest is called for it in this cycle.
		reasons = w.postFilterGuests(ctx, c)
	}
	w.reportAudit(ctx, state, pod, "")
	if c != nil {
		if c.shareWait > 0 {
			w.gates.retry(pod, c.shareWait)
		}
		if c.notEvaluated.Load() {
			klog.FromContext(ctx).V(2).Info("Pod not evaluated by every policy for lack of CPU; retrying it", "pod", klog.KObj(pod), "after", busyRecheck.After)
			w.gates.retry(pod, busyRecheck.After)
		}
		for i := range c.runs {
			if c.runs[i].rejectedBy.Load() {
				w.rememberRejected(c.policies[i], pod, c.runs[i].module)
			}
		}
	}
	return nil, fwk.NewStatus(fwk.Unschedulable, reasons...)
}

// postFilterGuests calls the postfilter of each policy of the cycle that
// exports one and returns the enforced policies' messages, each framed as
// "WasmPolicy/<policy>: <reason>"; an audited policy's goes to its audit.
func (w *WasmPolicy) postFilterGuests(ctx context.Context, c *cycleData) []string {
	var reasons []string
	for i, p := range c.policies {
		m := c.runs[i].module
		if m == nil || !m.Exports().Has(host.CallPostFilter) || c.stopReason(i) != "" {
			continue
		}
		enforce := !p.audit()
		c.runs[i].pc.Waiting = w.waitingAt(ctx, p, host.CallPostFilter)
		_, res, cerr := p.call(ctx, m, host.CallPostFilter, c, i, nil, nil)
		c.runs[i].pc.Waiting = nil
		if cerr != nil {
			if v := p.callFailed(ctx, c, i, host.CallPostFilter, cerr, enforce); v.Rejects() {
				reasons = append(reasons, p.status(host.CallPostFilter, v).Message())
			}
			continue
		}
		if v := p.read(ctx, host.CallPostFilter, res, enforce, c.auditFor(i).postFilter); v.Rejects() {
			reasons = append(reasons, p.status(host.CallPostFilter, v).Message())
		}
	}
	return reasons
}
