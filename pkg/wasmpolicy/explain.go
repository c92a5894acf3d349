package wasmpolicy

import (
	"context"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework"
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
	// BindNode is the feasible node with the best combined score (the
	// first on a tie), where PreBind shows what each policy with a prebind
	// would write on the pod if it were bound there. Nothing is written.
	BindNode string         `json:"bindNode,omitempty"`
	PreBind  []PatchVerdict `json:"preBind,omitempty"`
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
	// Reason is the first enforced rejection, as FailedScheduling shows it.
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

// Explain evaluates pod on nodes with each policy on its own (so every
// policy's verdict is known, not only the first rejection's), then scores
// the nodes that every enforced policy admits, as a scheduling cycle would.
// Audited policies are evaluated like enforced ones, but do not decide
// feasibility or the combined score. Other scheduler plugins (resources,
// taints, affinity) are not part of the explanation. Guests are called the
// way the scheduler calls them, batches included (see ExplainWith).
func (w *WasmPolicy) Explain(ctx context.Context, pod *v1.Pod, nodes []fwk.NodeInfo) *Explanation {
	return w.ExplainWith(ctx, pod, nodes, ExplainOptions{})
}

// ExplainWith is Explain with options: tools run it once per path to check
// that a module's batch forms agree with its single forms.
func (w *WasmPolicy) ExplainWith(ctx context.Context, pod *v1.Pod, nodes []fwk.NodeInfo, o ExplainOptions) *Explanation {
	ex := &Explanation{Pod: klog.KObj(pod).String(), Nodes: make([]NodeExplanation, len(nodes)), SingleCalls: o.SingleCalls}
	c := w.newCycle(pod, !o.SingleCalls)
	for _, p := range w.current().all {
		if !slices.Contains(c.policies, p) {
			ex.OutOfScope = append(ex.OutOfScope, p.cfg.Name)
		}
	}
	for j, ni := range nodes {
		ex.Nodes[j] = NodeExplanation{Node: ni.Node().Name, Feasible: true, Policies: make([]PolicyVerdict, len(c.policies))}
	}
	c.nodes = nodes
	viewNodes(c, nodes)
	c.filterBatches = make([][]batch, len(c.policies))
	defer func() { ex.Policies = w.policyStates(c) }()
	ex.Gates = w.explainGates(ctx, c)
	for i, p := range c.policies {
		mode := string(p.mode())
		pre := w.preFilterPolicy(ctx, c, i, true)
		var named sets.Set[string] // the nodes its prefilter_nodes named, if it did
		if pc := &c.pcs[i]; pc.NodeNamesSet {
			named = sets.New(pc.NodeNames...)
		}
		filters := true
		if m := c.modules[i]; m != nil {
			filters = m.Exports().Has(host.CallFilter)
			if c.batching && m.Exports().Has(host.CallFilterNodes) && len(nodes) > 0 {
				c.filterBatches[i] = newBatches(len(nodes))
			}
		}
		for j, ni := range nodes {
			pv := &ex.Nodes[j].Policies[i]
			pv.Policy, pv.Mode = p.cfg.Name, mode
			var v verdict.Verdict
			point := host.CallFilter
			switch {
			case named != nil && !named.Has(ni.Node().Name):
				pv.Verdict, pv.Reason = fwk.UnschedulableAndUnresolvable.String(), "not among the nodes its prefilter named (prefilter_nodes)"
				if !p.audit() && ex.Nodes[j].Feasible {
					ex.Nodes[j].Feasible, ex.Nodes[j].Reason = false, "node(s) rejected by WasmPolicy/"+p.cfg.Name+": "+pv.Reason
				}
				continue
			case pre.Rejects(): // a policy without a filter may still reject the pod at PreFilter
				v, point = pre, host.CallPreFilter
			case !filters:
				pv.Verdict, pv.Reason = "Pass", "(the policy does not filter)"
				continue
			case c.filterSkipped[i]:
				pv.Verdict = "Skip"
				continue
			default:
				pos := -1
				if c.batching {
					pos = j
				}
				start := time.Now()
				v = w.filterPolicy(ctx, c, i, ni, &pos, true)
				pv.FilterTime = time.Since(start)
			}
			if !v.Rejects() {
				pv.Verdict = "Pass"
				continue
			}
			msg := p.status(point, v).Message()
			pv.Verdict, pv.Reason = v.Code.String(), v.Reason
			if pv.Reason == "" {
				pv.Reason = msg // the policy gave no reason: say who rejected
			}
			if !p.audit() && ex.Nodes[j].Feasible {
				ex.Nodes[j].Feasible, ex.Nodes[j].Reason = false, msg
			}
		}
	}

	var feasible []fwk.NodeInfo
	var at []int
	for j, ni := range nodes {
		if ex.Nodes[j].Feasible {
			feasible = append(feasible, ni)
			at = append(at, j)
		}
	}
	if len(feasible) == 0 {
		return ex
	}
	w.startScoring(c, feasible)
	list := make(framework.NodeScoreList, len(feasible))
	for k, ni := range feasible {
		list[k] = framework.NodeScore{Name: ni.Node().Name}
	}
	sum := newScoreSum(len(feasible))
	for i, p := range c.policies {
		if v := w.preScorePolicy(ctx, c, i, true); !v.OK() || c.scoreSkipped[i] {
			continue // skipped, or failed (an ignored failure skips the policy too)
		}
		ok := true
		for k, ni := range feasible {
			pv := &ex.Nodes[at[k]].Policies[i]
			start := time.Now()
			raw, v := w.scorePolicy(ctx, c, i, ni, c.scoreIndex(ni), true)
			pv.ScoreTime = time.Since(start)
			pv.RawScore = &raw
			if v.Rejects() {
				pv.Reason = p.status(host.CallScore, v).Message()
				ok = false
			}
		}
		if !ok {
			continue
		}
		vals, v := w.normalizePolicy(ctx, c, i, list, true)
		if v.Rejects() {
			for k := range feasible {
				ex.Nodes[at[k]].Policies[i].Reason = p.status(host.CallNormalizeScore, v).Message()
			}
			continue
		}
		if vals == nil {
			continue // an ignored failure: the policy does not count, as in NormalizeScore
		}
		for k := range feasible {
			s := vals[k]
			ex.Nodes[at[k]].Policies[i].Score = &s
		}
		if !p.audit() {
			sum.add(p.cfg.Weight, vals)
		}
	}
	best := -1
	for k := range feasible {
		s := sum.score(k)
		ex.Nodes[at[k]].Score = &s
		if best < 0 || s > *ex.Nodes[at[best]].Score {
			best = k
		}
	}
	ex.BindNode = feasible[best].Node().Name
	ex.PreBind = w.explainPreBind(ctx, c, feasible[best])
	return ex
}

// explainGates runs the preenqueue of the cycle's policies for pod, with
// none of PreEnqueue's side effects (events, the gate tracker, the breaker).
func (w *WasmPolicy) explainGates(ctx context.Context, c *cycleData) []GateVerdict {
	var out []GateVerdict
	for i, p := range c.policies {
		m := c.modules[i]
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
		if m := c.modules[i]; m != nil {
			records = append(records, [3]string{p.cfg.Name, m.SHA256(), string(p.mode())})
		}
	}
	var out []PatchVerdict
	for i, p := range c.policies {
		m := c.modules[i]
		if m == nil || !m.Exports().Has(host.CallPreBind) {
			continue
		}
		pv := PatchVerdict{Policy: p.cfg.Name, Mode: string(p.mode()), Verdict: "Success"}
		pc := &host.PolicyCycle{}
		pc.State, pc.Policies = c.pcs[i].State, host.EncodeCyclePolicies(records)
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
		b := c.pcs[i].Budget
		out[i] = PolicyState{Policy: p.cfg.Name, Breaker: state.String(), ConsecutiveFailures: failures, Quarantined: p.quarantine.size(),
			BudgetSpent: b.Spent(), Budget: b.Limit(), Stopped: c.stopReason(i)}
	}
	return out
}
