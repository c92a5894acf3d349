package wasmpolicy

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/verdict"
)

// PostBind implements framework.PostBindPlugin: it calls the postbind of
// each policy of the pod's cycle that exports one (ABI v4), with the node
// the pod was bound to. It is informational: nothing it returns changes
// the binding, and a failure or an error status is logged and counted
// (failurePolicy does not apply). A namespace's policy pays for the call
// from its share, as for prebind.
func (w *WasmPolicy) PostBind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) {
	w.waiting.forget(pod.UID) // bound: it waits no more
	c := readCycle(state)
	if c == nil || !c.has(host.CallPostBind) {
		return
	}
	c.mu.Lock()
	node := c.bindNode
	c.mu.Unlock()
	logger := klog.FromContext(ctx)
	for i, p := range c.policies {
		m := c.runs[i].module
		if m == nil || !m.Exports().Has(host.CallPostBind) {
			continue
		}
		pc := &host.PolicyCycle{}
		pc.State = c.runs[i].pc.State
		start := time.Now()
		_, res, cerr := m.Call(ctx, host.CallPostBind, c.pod, node, pc, nil)
		p.m.observe(host.CallPostBind, start)
		if ns := p.cfg.Scope.Namespace; ns != "" && w.shares != nil {
			w.shares.of(ns).chargeCycle(time.Since(start))
		}
		if cerr != nil {
			// Only counted and logged: the pod is bound, and a pod's
			// quarantine (as prebind's failure brings) would keep the
			// policy from judging pods like it, for a call that judges
			// nothing.
			p.m.evaluated(host.CallPostBind, resultOfOutcome(cerr.Outcome))
			logger.Error(cerr.Err, "Policy's postbind failed; the pod stays bound", "policy", p.cfg.Name, "pod", klog.KObj(pod), "node", nodeName, "outcome", cerr.Outcome.String())
			continue
		}
		p.m.evaluated(host.CallPostBind, resultOf(res.Code))
		if _, ok := verdict.Read(host.CallPostBind, res.Code, res.Reason); !ok {
			logger.Error(nil, "Policy returned an error from postbind; the pod stays bound", "policy", p.cfg.Name, "pod", klog.KObj(pod), "node", nodeName, "reason", res.Reason)
		}
	}
}
