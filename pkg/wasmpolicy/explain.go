package wasmpolicy

import (
	"context"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/schedcycle"
	"github.com/wasmsched/wasmsched/internal/verdict"
)

// Explanation is what every policy decides about one pod on a set of nodes,
// computed by the plugin's own PreFilter, Filter, PreScore, Score and
// NormalizeScore. Tools (wasmsched test and explain) print it.
type Explanation struct {
	Pod string `json:"pod"`
	// Nodes are in the order given, each with every policy's verdict.
	Nodes []NodeExplanation `json:"nodes"`
	// Policies are each policy's cycle budget and circuit breaker after
	// the explained cycle.
	Policies []PolicyState `json:"policies"`
	// SingleCalls is true when every node got its own guest call; false
	// when policies exporting filter_nodes/score_nodes were called in
	// batches, as the scheduler calls them.
	SingleCalls bool `json:"singleCalls"`
	// OutOfScope names the policies whose scope does not take the pod:
	// they were not called.
	OutOfScope []string `json:"outOfScope,omitempty"`
	// Gates are the verdicts of the policies with a preenqueue: whether
	// each would let the pod into the scheduling queue.
	Gates []GateVerdict `json:"gates,omitempty"`
	// Best are the feasible nodes with the best combined score, by name:
	// the scheduler binds the pod to one of them, at random when there
	// are several.
	Best []string `json:"best,omitempty"`
	// PreBind shows, for each of Best, what each policy with a prebind
	// would write on the pod if it were bound there. Nothing is written.
	PreBind []NodePatches `json:"preBind,omitempty"`
	// Error is what failed the cycle (a policy's error at PreScore or
	// Score, with failurePolicy Fail): the scheduler would not place the
	// pod in this cycle.
	Error string `json:"error,omitempty"`
	// PostFilter, when no node fits, is what each policy with a
	// postfilter would add to the pod's unschedulable message.
	PostFilter []MessageVerdict `json:"postFilter,omitempty"`
}

// NodePatches are the prebind verdicts for a binding to Node.
type NodePatches struct {
	Node     string         `json:"node"`
	Policies []PatchVerdict `json:"policies"`
}

// GateVerdict is one policy's preenqueue verdict on the pod.
type GateVerdict struct {
	Policy string `json:"policy"`
	Mode   string `json:"mode"`
	// Verdict is Pass or Gated (or the failed call's outcome, with the
	// failurePolicy's effect in Reason).
	Verdict string `json:"verdict"`
	Reason  string `json:"reason,omitempty"`
	// Recheck says when a gated pod would be checked again.
	Recheck string `json:"recheck,omitempty"`
}

// PatchVerdict is one policy's prebind verdict and the patch it wrote.
type PatchVerdict struct {
	Policy      string            `json:"policy"`
	Mode        string            `json:"mode"`
	Verdict     string            `json:"verdict"`
	Reason      string            `json:"reason,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	// Refused is the first write the host refused (a key outside the
	// policy's patchPrefixes, or over the limits).
	Refused string `json:"refused,omitempty"`
}

// ExplainOptions choose how Explain calls the guests.
type ExplainOptions struct {
	// SingleCalls gives every node its own filter and score call even when
	// the module has batch forms. The zero value takes the scheduler's
	// path: batches of BatchSize nodes, where a node's time is its batch's
	// time (carried by the batch's first node).
	SingleCalls bool
	// Cluster, when set, is what the cycle's policies read of the cluster
	// (docs/abi.md §4.6) instead of the nodes explained: a case table's
	// cluster.
	Cluster *host.ClusterView
}

// PolicyState is what one policy's explained cycle cost and left behind.
type PolicyState struct {
	Policy string `json:"policy"`
	// Breaker is the policy's circuit breaker: closed, open or half-open.
	Breaker string `json:"breaker"`
	// ConsecutiveFailures counts the failed cycles since the breaker
	// last closed (the name is kept for the JSON's readers).
	ConsecutiveFailures int `json:"consecutiveFailures"`
	// Quarantined counts the pod inputs the policy failed on and holds
	// in quarantine.
	Quarantined int `json:"quarantined"`
	// BudgetSpent is the guest time the cycle charged to the policy, of
	// Budget (its cycleBudget).
	BudgetSpent time.Duration `json:"budgetSpent"`
	Budget      time.Duration `json:"budget"`
	// Stopped says why the policy was not called again in the cycle (a
	// failed call, its spent budget, or its open breaker); empty when it
	// was not stopped.
	Stopped string `json:"stopped,omitempty"`
}

// NodeExplanation is the plugin's outcome on one node.
type NodeExplanation struct {
	Node string `json:"node"`
	// Feasible is true when no enforced policy rejects the node.
	Feasible bool `json:"feasible"`
	// Status is the code of the node's status when it is not feasible
	// (Unschedulable, UnschedulableAndUnresolvable, or Error), and Reason
	// its message, as FailedScheduling shows it: the first enforced
	// rejection.
	Status string `json:"status,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Score is WasmPolicy's combined score (Σ weight·score / Σ weight over
	// enforced scoring policies), set for feasible nodes.
	Score    *int64          `json:"score,omitempty"`
	Policies []PolicyVerdict `json:"policies"`
}

// PolicyVerdict is one policy's verdict on one node.
type PolicyVerdict struct {
	Policy string `json:"policy"`
	Mode   string `json:"mode"`
	// Verdict is Pass, Skip (the policy does not filter this pod), or the
	// rejection's code: Unschedulable, UnschedulableAndUnresolvable.
	Verdict string `json:"verdict"`
	Reason  string `json:"reason,omitempty"`
	// RawScore is what the guest's score returned; Score is after its
	// normalize_score (0..100). Only for nodes feasible for every policy.
	RawScore   *int64        `json:"rawScore,omitempty"`
	Score      *int64        `json:"score,omitempty"`
	FilterTime time.Duration `json:"filterTime"`
	ScoreTime  time.Duration `json:"scoreTime,omitempty"`
}

// Explain runs one scheduling cycle of pod on nodes through
// kube-scheduler's framework, with the plugin as its only plugin, and
// reports what each policy decided on each node. The cycle is recorded
// (cycleRecord): each policy is evaluated on every node the framework
// filters, also after another policy rejected it, and a policy in Audit
// mode as if it enforced; only enforced policies decide feasibility and
// the combined score, as in the scheduler. Other scheduler plugins
// (resources, taints, affinity) are not part of the explanation. Guests
// are called the way the scheduler calls them, batches included (see
// ExplainWith).
func (w *WasmPolicy) Explain(ctx context.Context, pod *v1.Pod, nodes []fwk.NodeInfo) *Explanation {
	return w.ExplainWith(ctx, pod, nodes, ExplainOptions{})
}

// ExplainWith is Explain with options: tools run it once per path to check
// that a module's batch forms agree with its single forms.
func (w *WasmPolicy) ExplainWith(ctx context.Context, pod *v1.Pod, nodes []fwk.NodeInfo, o ExplainOptions) *Explanation {
	ex := &Explanation{Pod: klog.KObj(pod).String(), Nodes: make([]NodeExplanation, len(nodes)), SingleCalls: o.SingleCalls}
	rec := &cycleRecord{singleCalls: o.SingleCalls, cluster: o.Cluster}
	res, err := w.runCycle(ctx, pod, nodes, rec)
	if err != nil {
		ex.Error = err.Error()
		return ex
	}
	c := rec.c
	for _, p := range w.current().all {
		if !slices.Contains(c.policies, p) {
			ex.OutOfScope = append(ex.OutOfScope, p.cfg.Name)
		}
	}
	ex.Gates = w.explainGates(ctx, c)
	for j, n := range res.Nodes {
		ne := &ex.Nodes[j]
		ne.Node, ne.Feasible, ne.Score, ne.Policies = n.Name, n.Status == nil, n.Score, rec.verdictsOn(n.Name)
		if n.Status != nil {
			ne.Status, ne.Reason = n.Status.Code().String(), n.Status.Message()
		}
	}
	if res.Err != nil {
		ex.Error = res.Err.Message()
	}
	ex.Best = res.Best
	if len(res.Best) == 0 && res.Err == nil {
		ex.PostFilter = w.explainPostFilter(ctx, c)
	}
	if len(res.Best) > 0 {
		byName := make(map[string]fwk.NodeInfo, len(nodes))
		for _, ni := range nodes {
			byName[ni.Node().Name] = ni
		}
		for _, name := range res.Best {
			if pb := w.explainPreBind(ctx, c, byName[name]); len(pb) > 0 {
				ex.PreBind = append(ex.PreBind, NodePatches{Node: name, Policies: pb})
			}
		}
	}
	ex.Policies = w.policyStates(c)
	return ex
}

// runCycle runs a recorded scheduling cycle of pod on nodes (with the
// pods they hold) through a framework of this plugin alone, in a snapshot
// of its own.
func (w *WasmPolicy) runCycle(ctx context.Context, pod *v1.Pod, nodes []fwk.NodeInfo, rec *cycleRecord) (schedcycle.Result, error) {
	var pods []*v1.Pod
	objs := make([]*v1.Node, len(nodes))
	for i, ni := range nodes {
		objs[i] = ni.Node()
		for _, pi := range ni.GetPods() {
			p := pi.GetPod()
			if p.Spec.NodeName != objs[i].Name {
				p = p.DeepCopy()
				p.Spec.NodeName = objs[i].Name
			}
			pods = append(pods, p)
		}
	}
	lister, list := schedcycle.Snapshot(pods, objs)
	// The framework's metrics recorder runs until ctx ends.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	registry, profile := schedcycle.OnePlugin(Name, w, schedcycle.CyclePoints...)
	fw, err := schedcycle.New(ctx, registry, profile, lister)
	if err != nil {
		return schedcycle.Result{}, err
	}
	// fw is not closed: closing it would close the plugin, which outlives it.
	state := intree.NewCycleState()
	state.Write(recordKey, rec)
	res := schedcycle.Run(ctx, fw, state, pod, list)
	if rec.c == nil { // PreFilter did not run
		rec.start(w.newCycle(pod, !rec.singleCalls))
	}
	return res, nil
}

// explainGates runs the preenqueue of the cycle's policies for pod, with
// none of PreEnqueue's side effects (events, the gate tracker, the breaker).
func (w *WasmPolicy) explainGates(ctx context.Context, c *cycleData) []GateVerdict {
	var out []GateVerdict
	for i, p := range c.policies {
		m := c.runs[i].module
		if m == nil || !m.Exports().Has(host.CallPreEnqueue) {
			continue
		}
		gv := GateVerdict{Policy: p.cfg.Name, Mode: string(p.mode()), Verdict: "Pass"}
		pc := &host.PolicyCycle{}
		_, res, cerr := m.Call(ctx, host.CallPreEnqueue, host.NewPodState(c.pod.Pod), nil, pc, nil)
		v, ok := verdict.Read(host.CallPreEnqueue, res.Code, res.Reason)
		switch {
		case cerr != nil:
			gv.Verdict = cerr.Outcome.String()
			gv.Reason = cerr.Error() + "; failurePolicy " + string(p.cfg.FailurePolicy)
		case !ok:
			gv.Verdict, gv.Reason = "Error", res.Reason+"; failurePolicy "+string(p.cfg.FailurePolicy)
		case v.Rejects():
			gv.Verdict, gv.Reason = "Gated", res.Reason
			r := pc.Recheck
			if r == (host.Recheck{}) {
				r = host.DefaultRecheck
			}
			gv.Recheck = describeRecheck(r)
		}
		out = append(out, gv)
	}
	return out
}

// describeRecheck phrases when a gated pod is checked again.
func describeRecheck(r host.Recheck) string {
	var on []string
	for _, e := range []struct {
		bit  int32
		name string
	}{{abi.RecheckPodUpdate, "its labels or annotations change"}, {abi.RecheckPodsChange, "pods are bound or deleted"}, {abi.RecheckNodesChange, "nodes change"}} {
		if r.Events&e.bit != 0 {
			on = append(on, e.name)
		}
	}
	if r.After > 0 {
		on = append(on, "after "+r.After.String())
	}
	on = append(on, "the policy changes")
	return "when " + strings.Join(on, ", or ")
}

// explainPreBind runs the prebind of the cycle's policies on node and
// reports the patch each would write; nothing is written.
func (w *WasmPolicy) explainPreBind(ctx context.Context, c *cycleData, node fwk.NodeInfo) []PatchVerdict {
	var records [][3]string
	for i, p := range c.policies {
		if m := c.runs[i].module; m != nil {
			records = append(records, [3]string{p.cfg.Name, m.SHA256(), string(p.mode())})
		}
	}
	var out []PatchVerdict
	for i, p := range c.policies {
		m := c.runs[i].module
		if m == nil || !m.Exports().Has(host.CallPreBind) {
			continue
		}
		pv := PatchVerdict{Policy: p.cfg.Name, Mode: string(p.mode()), Verdict: "Success"}
		pc := &host.PolicyCycle{}
		pc.State, pc.Policies = c.runs[i].pc.State, host.EncodeCyclePolicies(records)
		_, res, cerr := m.Call(ctx, host.CallPreBind, c.pod, node, pc, nil)
		v, ok := verdict.Read(host.CallPreBind, res.Code, res.Reason)
		switch {
		case cerr != nil:
			pv.Verdict, pv.Reason = cerr.Outcome.String(), cerr.Error()+"; failurePolicy "+string(p.cfg.FailurePolicy)
		case !ok:
			pv.Verdict, pv.Reason = "Error", res.Reason+"; failurePolicy "+string(p.cfg.FailurePolicy)
		case v.Rejects():
			pv.Verdict, pv.Reason = resultName(res.Code), res.Reason
		default:
			pv.Labels, pv.Annotations = pc.Patch.Labels, pc.Patch.Annotations
		}
		pv.Refused = pc.Patch.Refused
		out = append(out, pv)
	}
	return out
}

// policyStates reports each policy's budget and breaker after cycle c.
func (w *WasmPolicy) policyStates(c *cycleData) []PolicyState {
	out := make([]PolicyState, len(c.policies))
	for i, p := range c.policies {
		state, failures := p.breaker.snapshot()
		b := c.runs[i].pc.Budget
		out[i] = PolicyState{Policy: p.cfg.Name, Breaker: state.String(), ConsecutiveFailures: failures, Quarantined: p.quarantine.size(),
			BudgetSpent: b.Spent(), Budget: b.Limit(), Stopped: c.stopReason(i)}
	}
	return out
}
