package wasmpolicy

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/verdict"
)

// Reserve and Unreserve for guests (ABI v4, docs/abi.md §3.6). A policy
// that keeps state takes counts for a pod at its reserve (counter_add);
// the host keeps them per policy and pod, and gives them back when the
// placement is undone (Unreserve: a later plugin's Reserve or Permit
// refused it, binding failed, a pod-group trial was reverted) and when the
// pod is deleted or finishes. The guest's unreserve runs after that, for
// what the host cannot undo; nothing it does, a trap included, can keep a
// count held.

// countersFor are the counts of the policy named name: those of the
// policy of that name the plugin runs, if any, so that a new config (a new
// host policy) keeps the counts its pods hold; new ones otherwise. A
// removed policy's counts go with it.
func (w *WasmPolicy) countersFor(name string) *host.Counters {
	if set := w.current(); set != nil {
		for _, p := range set.all {
			if p.cfg.Name == name && p.counters != nil {
				return p.counters
			}
		}
	}
	return new(host.Counters)
}

// releaseCounts gives back what pod uid holds at every policy.
func (w *WasmPolicy) releaseCounts(uid string) {
	if set := w.current(); set != nil {
		for _, p := range set.all {
			if p.counters != nil {
				p.counters.RollBack(uid, 0)
			}
		}
	}
}

// Counters are the counts of the policy named name (for tools that run a
// policy outside the plugin too, and share its counts with it).
func (w *WasmPolicy) Counters(name string) *host.Counters { return w.countersFor(name) }

// podFinished gives back what a pod that completed holds: it runs no more.
// A pod that was bound leaves the policies' rejected pods: nothing is to
// be retried for it, and the records (bounded) stay for the pods that
// wait.
func (w *WasmPolicy) podFinished(oldObj, obj interface{}) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		w.releaseCounts(string(pod.UID))
	}
	if old, ok := oldObj.(*v1.Pod); ok && old.Spec.NodeName == "" && pod.Spec.NodeName != "" {
		w.forgetRejected(pod)
	}
}

// reserveGuests calls the reserve of each policy of the cycle that
// exports one, with the chosen node, in the policies' order, and returns
// the first enforced refusal or failure (the framework then runs
// Unreserve, which gives back what every policy took).
func (w *WasmPolicy) reserveGuests(ctx context.Context, c *cycleData, nodeName string) *fwk.Status {
	var node fwk.NodeInfo
	for i, p := range c.policies {
		m := c.runs[i].module
		if m == nil || !m.Exports().Has(host.CallReserve) || c.stopReason(i) != "" {
			continue
		}
		if node == nil {
			if node = w.nodeNamed(c, nodeName); node == nil {
				return fwk.AsStatus(errNodeGone(nodeName))
			}
		}
		enforce := !p.audit()
		_, res, cerr := p.call(ctx, m, host.CallReserve, c, i, node, nil)
		if cerr != nil {
			if v := p.callFailed(ctx, c, i, host.CallReserve, cerr, enforce); v.Rejects() {
				return p.status(host.CallReserve, v)
			}
			continue
		}
		a := c.auditFor(i)
		v := p.read(ctx, host.CallReserve, res, enforce, func(reason string) {
			a.refuse(nodeName, "would have refused the placement at Reserve: "+orUnspecified(reason))
		})
		if v.Rejects() {
			if v.Code != fwk.Error {
				p.remember(c.pod.Pod)
			}
			return p.status(host.CallReserve, v)
		}
	}
	return nil
}

// unreserveGuests gives back what the pod holds at the cycle's policies,
// then calls the unreserve of each that exports one, in reverse order.
// Each call stands alone: a failure is logged and counted, and the next
// policy's unreserve runs all the same. trial is a pod-group cycle's undone
// trial placement (on the scheduling goroutine): its guests read the
// snapshot's node and reach no waiting pods, since the group's placement
// may still stand. Otherwise Unreserve may run on a binding goroutine and
// reads the copy of the node kept at Reserve, or no node.
func (w *WasmPolicy) unreserveGuests(ctx context.Context, c *cycleData, nodeName string, trial bool) {
	w.waiting.forget(c.pod.Pod.UID)
	uid := string(c.pod.Pod.UID)
	for _, p := range c.policies {
		if p.counters == nil {
			continue
		}
		if n := p.counters.RollBack(uid, 0); n > 0 {
			klog.FromContext(ctx).V(2).Info("Placement undone; gave back the pod's counts", "policy", p.cfg.Name, "pod", klog.KObj(c.pod.Pod), "node", nodeName, "takes", n, "podsHolding", p.counters.Holders())
		}
	}
	if !c.has(host.CallUnreserve) {
		return
	}
	var node fwk.NodeInfo
	if trial {
		node = w.nodeNamed(c, nodeName)
	} else {
		c.mu.Lock()
		node = c.bindNode
		c.mu.Unlock()
	}
	logger := klog.FromContext(ctx)
	for i := len(c.policies) - 1; i >= 0; i-- {
		p, m := c.policies[i], c.runs[i].module
		if m == nil || !m.Exports().Has(host.CallUnreserve) {
			continue
		}
		// Its own cycle: the scheduling cycle's budget may be spent, and
		// this runs whatever the cycle's calls did.
		pc := &host.PolicyCycle{}
		pc.State = c.runs[i].pc.State
		if !trial {
			pc.Waiting = w.waitingAt(ctx, p, host.CallUnreserve)
		}
		start := time.Now()
		_, res, cerr := m.Call(ctx, host.CallUnreserve, c.pod, node, pc, nil)
		p.m.observe(host.CallUnreserve, start)
		if ns := p.cfg.Scope.Namespace; ns != "" && w.shares != nil {
			w.shares.of(ns).chargeCycle(time.Since(start))
		}
		if cerr != nil {
			p.m.evaluated(host.CallUnreserve, resultOfOutcome(cerr.Outcome))
			logger.Error(cerr.Err, "Policy's unreserve failed; its counts for the pod were given back all the same", "policy", p.cfg.Name, "pod", klog.KObj(c.pod.Pod), "node", nodeName, "outcome", cerr.Outcome.String())
			continue
		}
		p.m.evaluated(host.CallUnreserve, resultOf(res.Code))
		if _, ok := verdict.Read(host.CallUnreserve, res.Code, res.Reason); !ok {
			logger.Error(nil, "Policy returned an error from unreserve; its counts for the pod were given back all the same", "policy", p.cfg.Name, "pod", klog.KObj(c.pod.Pod), "node", nodeName, "reason", res.Reason)
		}
	}
}

func errNodeGone(nodeName string) error {
	return fmt.Errorf("%s: the chosen node %s is not in the scheduler's snapshot", Name, nodeName)
}

// nodeNamed is the snapshot's NodeInfo of nodeName, or outside a
// scheduler the one of the nodes PreFilter was given.
func (w *WasmPolicy) nodeNamed(c *cycleData, nodeName string) fwk.NodeInfo {
	if ni := w.snapshotNode(nodeName); ni != nil {
		return ni
	}
	for _, n := range c.nodes {
		if n.Node() != nil && n.Node().Name == nodeName {
			return n
		}
	}
	return nil
}
