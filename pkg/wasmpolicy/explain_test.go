package wasmpolicy

import (
	"context"
	"fmt"
	"github.com/google/go-cmp/cmp"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"testing"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	"github.com/wasmsched/wasmsched/pkg/source"
)

// Explain reports each policy's own verdict, unprefixed, and the node's
// first enforced rejection as FailedScheduling phrases it.
func TestExplainVerdicts(t *testing.T) {
	reject := func(reason string) guestFunc {
		return func(node string) (int64, host.Result, *host.CallError) {
			if node == "n1" {
				return 0, host.Result{Code: abi.CodeUnschedulable, Reason: reason}, nil
			}
			return succeed("")
		}
	}
	enforced, audited := &fakeModule{}, &fakeModule{}
	enforced.fns[host.CallFilter], audited.fns[host.CallFilter] = reject("wrong team"), reject("would not fit")
	w := fakePlugin(fakePolicy("team", enforced, nil), fakePolicy("fit", audited, func(c *config.Policy) { c.Mode = config.ModeAudit }))
	ex := w.Explain(context.Background(), fakePod(), fakeNodes(2))
	n1 := ex.Nodes[1]
	if n1.Feasible || n1.Reason != "node(s) rejected by WasmPolicy/team: wrong team" {
		t.Fatalf("n1: feasible %v, reason %q", n1.Feasible, n1.Reason)
	}
	for i, want := range []PolicyVerdict{{Policy: "team", Mode: "Enforce", Verdict: "Unschedulable", Reason: "wrong team"}, {Policy: "fit", Mode: "Audit", Verdict: "Unschedulable", Reason: "would not fit"}} {
		got := n1.Policies[i]
		if got.Policy != want.Policy || got.Mode != want.Mode || got.Verdict != want.Verdict || got.Reason != want.Reason {
			t.Errorf("policy %d: %+v, want %+v", i, got, want)
		}
	}
	if !ex.Nodes[0].Feasible || ex.Nodes[0].Policies[1].Verdict != "Pass" {
		t.Errorf("n0: %+v", ex.Nodes[0])
	}
}

// Explain skips a policy whose prescore fails under Ignore, as PreScore does.
func TestExplainIgnoredPreScoreFailure(t *testing.T) {
	m := &fakeModule{}
	m.fns[host.CallFilter], m.fns[host.CallPreScore], m.fns[host.CallScore] = succeed, errorOut, scoreOf(50)
	ok := &fakeModule{}
	ok.fns[host.CallScore] = scoreOf(80)
	w := fakePlugin(fakePolicy("broken", m, func(c *config.Policy) { c.FailurePolicy = config.FailurePolicyIgnore }), fakePolicy("fine", ok, nil))
	ex := w.Explain(context.Background(), fakePod(), fakeNodes(2))
	for _, n := range ex.Nodes {
		if n.Score == nil || *n.Score != 80 || n.Policies[0].Score != nil {
			t.Fatalf("%s: combined %v, broken policy's score %v; want 80 from the other policy alone", n.Node, n.Score, n.Policies[0].Score)
		}
	}
	r := runCycle(w, fakeNodes(2))
	if r.status != nil || r.scores["n0"] != 80 {
		t.Fatalf("scheduling: %v %v", r.status, r.scores)
	}
}

// The plugin hands the guest a node at exactly the extension points where
// abi.Points says node data is available.
func TestNodeDataMatchesPoints(t *testing.T) {
	m := &fakeModule{batch: true, normalize: func([]int64) host.Result { return host.Result{} }}
	for _, k := range []host.CallKind{host.CallPreFilter, host.CallFilter, host.CallPreScore, host.CallScore, host.CallPreEnqueue, host.CallPreBind, host.CallPostFilter, host.CallPostBind, host.CallReserve, host.CallUnreserve, host.CallPermit} {
		m.fns[k] = succeed
	}
	w := fakePlugin(fakePolicy("p", m, nil))
	if st := w.PreEnqueue(context.Background(), fakePod()); st != nil {
		t.Fatal(st)
	}
	// 40 nodes: one full batch; the other 8 in the PreFilter list are batched
	// too, so Explain's single calls cover the single forms.
	if r := runCycle(w, fakeNodes(BatchSize+8)); r.status != nil {
		t.Fatal(r.status)
	}
	// Explain also runs the gate and the prebind (on its best node).
	w.ExplainWith(context.Background(), fakePod(), fakeNodes(2), ExplainOptions{SingleCalls: true})
	// A cycle's outcome: no node (PostFilter), then bound (PostBind).
	ctx, state, nodes := context.Background(), intree.NewCycleState(), fakeNodes(2)
	if _, st := w.PreFilter(ctx, state, fakePod(), nodes); st != nil {
		t.Fatal(st)
	}
	w.PostFilter(ctx, state, fakePod(), nil)
	w.Reserve(ctx, state, fakePod(), nodes[0].Node().Name)
	w.Permit(ctx, state, fakePod(), nodes[0].Node().Name)
	w.PostBind(ctx, state, fakePod(), nodes[0].Node().Name)
	w.Unreserve(ctx, state, fakePod(), nodes[0].Node().Name)
	for k := host.CallKind(0); k < host.NumCallKinds; k++ {
		with, without := m.withNode.Load()&k.Cap() != 0, m.withoutNode.Load()&k.Cap() != 0
		if !with && !without {
			t.Errorf("%s was never called", abi.Points[k].Export)
			continue
		}
		if with != abi.Points[k].NodeData || without == abi.Points[k].NodeData {
			t.Errorf("%s: called with a node %v, without %v; abi.Points says node data %v", abi.Points[k].Export, with, without, abi.Points[k].NodeData)
		}
	}
}

// Explain calls a module with batch forms the way the scheduler does (one
// batch call for up to BatchSize nodes), and with SingleCalls once per node.
func TestExplainTakesTheSchedulersPath(t *testing.T) {
	m := &fakeModule{batch: true}
	m.fns[host.CallFilter] = succeed
	m.fns[host.CallScore] = scoreOf(10)
	w := fakePlugin(fakePolicy("p", m, nil))
	if ex := w.Explain(context.Background(), fakePod(), fakeNodes(3)); ex.SingleCalls || !ex.Nodes[2].Feasible {
		t.Fatalf("explanation %+v", ex)
	}
	if b, s := m.batchCalls.Load(), m.singleCalls.Load(); b != 2 || s != 0 {
		t.Fatalf("Explain: %d batch and %d single calls, want 2 (filter_nodes, score_nodes) and 0", b, s)
	}
	if ex := w.ExplainWith(context.Background(), fakePod(), fakeNodes(3), ExplainOptions{SingleCalls: true}); !ex.SingleCalls {
		t.Fatal("SingleCalls not reported")
	}
	if b, s := m.batchCalls.Load(), m.singleCalls.Load(); b != 2 || s != 6 {
		t.Fatalf("SingleCalls: %d batch and %d single calls, want 2 and 6", b, s)
	}
}

// Until a policy's first load ends, pods it would evaluate wait with a
// reason naming it (whatever its failurePolicy; an audited policy does not
// hold them), and the load ending wakes them: with a module they are
// evaluated, after a failed load the failurePolicy applies.
func TestPodsWaitForALoadingPolicy(t *testing.T) {
	for _, c := range []struct {
		name  string
		fp    config.FailurePolicy
		mode  config.Mode
		loads bool
		wait  bool   // the pod waits while loading
		after string // the PreFilter status message after the load ("" passes)
	}{
		{"Fail, loads", config.FailurePolicyFail, config.ModeEnforce, true, true, ""},
		{"Ignore, loads", config.FailurePolicyIgnore, config.ModeEnforce, true, true, ""},
		{"Fail, load fails", config.FailurePolicyFail, config.ModeEnforce, false, true, "rejected by WasmPolicy/p: policy has no module loaded (file /fake/p.wasm): Error: no fake module to load"},
		{"Ignore, load fails", config.FailurePolicyIgnore, config.ModeEnforce, false, true, ""},
		{"Audit", config.FailurePolicyFail, config.ModeAudit, true, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			good := &fakeModule{}
			good.fns[host.CallFilter] = succeed
			p := fakePolicy("p", nil, func(cfg *config.Policy) { cfg.FailurePolicy, cfg.Mode = c.fp, c.mode })
			rt := &fakeRuntime{}
			if c.loads {
				rt.next = good
			}
			p.runtime = rt
			p.settled.Store(false) // the first load has not ended
			w := fakePlugin(p)
			r := runCycle(w, fakeNodes(3))
			want := "rejected by WasmPolicy/p: policy is loading its module (file /fake/p.wasm); the pod is retried when it has loaded"
			if got := r.status; c.wait && (got.Code() != fwk.UnschedulableAndUnresolvable || got.Message() != want) {
				t.Fatalf("while loading: %v %q, want the pod to wait with %q", got.Code(), got.Message(), want)
			} else if !c.wait && got != nil {
				t.Fatalf("while loading: %v, want an audited policy not to hold the pod", got)
			}
			w.apply(context.Background(), p, source.Update{Data: []byte("v1")})
			r = runCycle(w, fakeNodes(3))
			if c.after == "" && r.status != nil {
				t.Fatalf("after the load: %v, want the pod evaluated and passed", r.status)
			}
			if c.after != "" && r.status.Message() != c.after {
				t.Fatalf("after the load: %q, want %q", r.status.Message(), c.after)
			}
		})
	}
}

// normalize_score can select the node of each score (PolicyCycle.Scored),
// in the order of the score list the framework passes, whatever it is.
func TestNormalizeScoreGetsScoredNodes(t *testing.T) {
	m := &fakeModule{normalize: func([]int64) host.Result { return host.Result{} }}
	m.fns[host.CallScore] = scoreOf(10)
	w := fakePlugin(fakePolicy("p", m, nil))
	ctx, state, pod, nodes := context.Background(), intree.NewCycleState(), fakePod(), fakeNodes(3)
	if st := w.PreScore(ctx, state, pod, nodes); st != nil {
		t.Fatal(st)
	}
	list := make(framework.NodeScoreList, len(nodes))
	for k, ni := range nodes {
		if _, st := w.Score(ctx, state, pod, ni); st != nil {
			t.Fatal(st)
		}
		list[len(nodes)-1-k].Name = ni.Node().Name // the reverse of PreScore's order
	}
	if st := w.NormalizeScore(ctx, state, pod, list); st != nil {
		t.Fatal(st)
	}
	want := []string{list[0].Name, list[1].Name, list[2].Name}
	if strings.Join(m.scored, ",") != strings.Join(want, ",") {
		t.Fatalf("normalize_score saw nodes %v, want the score list's order %v", m.scored, want)
	}
}

// The nodes enforced policies name in prefilter (prefilter_nodes) become
// the plugin's PreFilterResult, intersected; an audited policy's list does
// not narrow it; Explain rejects the nodes outside a list.
func TestPreFilterNodeSubset(t *testing.T) {
	policy := func(name string, nodes []string, audit bool) *policy {
		m := &fakeModule{preFilterNodes: nodes}
		m.fns[host.CallPreFilter] = succeed
		m.fns[host.CallFilter] = succeed
		return fakePolicy(name, m, func(c *config.Policy) {
			if audit {
				c.Mode = config.ModeAudit
			}
		})
	}
	w := fakePlugin(policy("a", []string{"n0", "n1", "n2"}, false), policy("b", []string{"n1", "n2", "n3"}, false), policy("c", []string{"n9"}, true))
	nodes := fakeNodes(4)
	res, st := w.PreFilter(context.Background(), intree.NewCycleState(), fakePod(), nodes)
	if st != nil || res == nil || strings.Join(sets.List(res.NodeNames), ",") != "n1,n2" {
		t.Fatalf("PreFilter = %+v, %v; want nodes n1,n2", res, st)
	}
	// Explain runs the framework, which does not filter n0 and n3 and
	// gives them kube-scheduler's status; the policy whose list left a
	// node out says so, the other was not run there.
	ex := w.Explain(context.Background(), fakePod(), nodes)
	const outside = "node(s) didn't satisfy plugin(s) [WasmPolicy]"
	if ex.Nodes[0].Feasible || ex.Nodes[0].Reason != outside || !ex.Nodes[1].Feasible || ex.Nodes[3].Feasible || ex.Nodes[3].Reason != outside {
		t.Fatalf("explanation: %+v", ex.Nodes)
	}
	got := func(j int) []string {
		var out []string
		for _, pv := range ex.Nodes[j].Policies {
			out = append(out, pv.Policy+"="+pv.Verdict)
		}
		return out
	}
	for j, want := range [][]string{
		{"a=NotRun", "b=UnschedulableAndUnresolvable", "c=UnschedulableAndUnresolvable"},
		{"a=Pass", "b=Pass", "c=UnschedulableAndUnresolvable"},
		{"a=Pass", "b=Pass", "c=UnschedulableAndUnresolvable"},
		{"a=UnschedulableAndUnresolvable", "b=NotRun", "c=UnschedulableAndUnresolvable"},
	} {
		if diff := cmp.Diff(want, got(j)); diff != "" {
			t.Errorf("node n%d's verdicts (-want +got):\n%s", j, diff)
		}
	}
}

// BenchmarkExplain is one Explain of a pod on 1 and on 100 nodes: the
// framework and snapshot it builds per call, and the recorded cycle.
func BenchmarkExplain(b *testing.B) {
	m := &fakeModule{batch: true}
	m.fns[host.CallFilter] = succeed
	m.fns[host.CallScore] = scoreOf(10)
	w := fakePlugin(fakePolicy("p", m, nil))
	for _, n := range []int{1, 100} {
		nodes := fakeNodes(n)
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			for b.Loop() {
				w.Explain(context.Background(), fakePod(), nodes)
			}
		})
	}
}
