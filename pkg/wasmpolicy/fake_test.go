package wasmpolicy

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"sync"
	"sync/atomic"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
	"github.com/wasmsched/wasmsched/pkg/source"
)

// The tests in this file drive the plugin's own logic (failurePolicy,
// Audit, batching, score combination) through the module seam with fake
// guests: each extension point of a fake is a Go function of the node's
// name. The real-guest tests (plugin_test.go, audit_test.go,
// adversarial_test.go) cover the same paths with compiled modules.

// guestFunc answers one call of a fake guest about one node ("" when the
// extension point has no node): a score, a status, or a failed call.
type guestFunc func(node string) (int64, host.Result, *host.CallError)

// fakeModule is a module whose extension points are guestFuncs.
type fakeModule struct {
	fns                     [host.NumCallKinds]guestFunc
	batch                   bool // implements filter_nodes and score_nodes
	singleCalls, batchCalls atomic.Int64
	normalize               func(scores []int64) host.Result
	sha                     string // "fake" when empty
	// withNode and withoutNode record which kinds were called with and
	// without a node (one bit per kind).
	withNode, withoutNode atomic.Int32
	// scored are the names of the nodes normalize_score could select, in
	// score order (PolicyCycle.Scored), from its last call.
	scored []string
	// preFilterNodes, when set, are what its prefilter names (prefilter_nodes).
	preFilterNodes []string
	// recheck is what its preenqueue asks (recheck_on), and patch what its
	// prebind writes: label:<key> or annotation:<key> to value.
	recheck host.Recheck
	patch   map[string]string
	// loops, when set, makes every call for a pod it picks time out (after
	// counting it in loopCalls), whatever fns says.
	loops     func(*v1.Pod) bool
	loopCalls atomic.Int64
}

// looping reports, and counts, a call the fake guest times out on.
func (f *fakeModule) looping(ps *host.PodState) bool {
	if f.loops == nil || ps == nil || !f.loops(ps.Pod) {
		return false
	}
	f.loopCalls.Add(1)
	return true
}

func (f *fakeModule) Exports() host.Exports {
	var e host.Exports
	for k, fn := range f.fns {
		if fn != nil {
			e.Points |= host.CallKind(k).Cap()
		}
	}
	if f.normalize != nil {
		e.Points |= host.CallNormalizeScore.Cap()
	}
	if f.batch {
		e.Points |= host.CallFilterNodes.Cap() | host.CallScoreNodes.Cap()
	}
	return e
}

func (f *fakeModule) SHA256() string {
	if f.sha == "" {
		return "fake"
	}
	return f.sha
}
func (f *fakeModule) PoolStats() (live, inUse int64) { return 0, 0 }
func (f *fakeModule) MemoryBytes() int64             { return 0 }
func (f *fakeModule) MemoryShare() int64             { return 0 }

// stopped applies the host's budget rule to a fake call: no call once the
// cycle's budget stopped, and a failed call stops it.
func stopped(pc *host.PolicyCycle) *host.CallError {
	if pc == nil || pc.Budget == nil {
		return nil
	}
	if cause := pc.Budget.Stopped(); cause != nil {
		return &host.CallError{Outcome: host.OutcomeStopped, Err: cause}
	}
	return nil
}

func fail(pc *host.PolicyCycle, err *host.CallError) *host.CallError {
	if err != nil && pc != nil && pc.Budget != nil && err.Outcome != host.OutcomeUnavailable {
		pc.Budget.Stop(err)
	}
	return err
}

func (f *fakeModule) Call(_ context.Context, kind host.CallKind, pod *host.PodState, node fwk.NodeInfo, pc *host.PolicyCycle, scores []int64) (int64, host.Result, *host.CallError) {
	if err := stopped(pc); err != nil {
		return 0, host.Result{}, err
	}
	f.singleCalls.Add(1)
	if node != nil {
		f.withNode.Or(kind.Cap())
	} else {
		f.withoutNode.Or(kind.Cap())
	}
	if kind == host.CallPreFilter && f.preFilterNodes != nil {
		pc.NodeNames, pc.NodeNamesSet = f.preFilterNodes, true
	}
	if kind == host.CallPreEnqueue {
		pc.Recheck = f.recheck
	}
	if kind == host.CallPreBind {
		for k, v := range f.patch {
			kind, key, _ := strings.Cut(k, ":")
			pc.Patch.Set(kind == "label", key, v, []string{"t.example.com/"})
		}
	}
	if kind == host.CallNormalizeScore {
		f.scored = nil
		for _, ni := range pc.Scored {
			f.scored = append(f.scored, ni.Node().Name)
		}
		return 0, f.normalize(scores), nil
	}
	name := ""
	if node != nil {
		name = node.Node().Name
	}
	if f.looping(pod) {
		return 0, host.Result{}, fail(pc, &host.CallError{Outcome: host.OutcomeTimeout})
	}
	s, r, err := f.fns[kind](name)
	return s, r, fail(pc, err)
}

func (f *fakeModule) CallNodes(_ context.Context, kind host.CallKind, pod *host.PodState, nodes []fwk.NodeInfo, pc *host.PolicyCycle, results []host.Result, scores []int64) (int, *host.CallError) {
	if err := stopped(pc); err != nil {
		return 0, err
	}
	f.batchCalls.Add(1)
	if f.looping(pod) {
		return 0, fail(pc, &host.CallError{Outcome: host.OutcomeTimeout})
	}
	f.withNode.Or(abi.Points[kind].Batch.Cap())
	for i, ni := range nodes {
		s, r, err := f.fns[kind](ni.Node().Name)
		if err != nil {
			return i, fail(pc, err)
		}
		results[i] = r
		if scores != nil {
			scores[i] = s
		}
	}
	return len(nodes), nil
}

// fakeRuntime serves one fake module (nil: no module loaded). Loading src
// serves a copy of its module's guest functions with sha256 src.
type fakeRuntime struct {
	mu sync.Mutex
	m  *fakeModule
	// next, when set, is what the first Load serves while m is nil.
	next *fakeModule
}

func (r *fakeRuntime) Current() module {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		return nil
	}
	return r.m
}
func (r *fakeRuntime) Load(_ context.Context, src []byte, _ string) (module, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil && r.next != nil {
		r.m, r.next = r.next, nil
		return r.m, nil
	}
	if r.m == nil {
		return nil, errors.New("no fake module to load")
	}
	r.m = &fakeModule{fns: r.m.fns, batch: r.m.batch, normalize: r.m.normalize, sha: string(src)}
	return r.m, nil
}
func (r *fakeRuntime) SuppressedLines() int64      { return 0 }
func (r *fakeRuntime) Close(context.Context) error { return nil }

// fakePolicy is a policy with defaulted args, changed by edit, serving m.
func fakePolicy(name string, m *fakeModule, edit func(*config.Policy)) *policy {
	cfg := configv1.DefaultPolicy(name, config.Source{File: "/fake/" + name + ".wasm"})
	if edit != nil {
		edit(&cfg)
	}
	p := (&WasmPolicy{}).newPolicy(cfg, &fakeRuntime{m: m}, breakerConfigOf(config.CircuitBreaker{}))
	p.source = &source.File{Path: cfg.Source.File}
	p.settled.Store(true) // its first load has ended (nil m: it failed)
	return p
}

func fakePlugin(policies ...*policy) *WasmPolicy {
	registerMetrics()
	w := &WasmPolicy{static: policies}
	w.publish(nil)
	return w
}

func fakeNodes(n int) []fwk.NodeInfo {
	out := make([]fwk.NodeInfo, n)
	for i := range out {
		ni := intree.NewNodeInfo()
		ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i)}})
		out[i] = ni
	}
	return out
}

func fakePod() *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "p"}}
}

var (
	succeed guestFunc = func(string) (int64, host.Result, *host.CallError) { return 0, host.Result{}, nil }
	timeout guestFunc = func(string) (int64, host.Result, *host.CallError) {
		return 0, host.Result{}, &host.CallError{Outcome: host.OutcomeTimeout}
	}
	errorOut guestFunc = func(string) (int64, host.Result, *host.CallError) {
		return 0, host.Result{Code: abi.CodeError, Reason: "no data"}, nil
	}
)

func scoreOf(s int64) guestFunc {
	return func(string) (int64, host.Result, *host.CallError) { return s, host.Result{}, nil }
}

// cycleResult is what one scheduling cycle of the plugin decided.
type cycleResult struct {
	status  *fwk.Status // the first failing extension point's status
	point   string
	filters map[string]*fwk.Status
	scores  map[string]int64
}

// runCycle runs PreFilter, Filter on every node, PreScore, Score and
// NormalizeScore on the feasible ones, as the scheduler does.
func runCycle(w *WasmPolicy, nodes []fwk.NodeInfo) cycleResult {
	return runCycleFor(w, fakePod(), nodes)
}

// runCycleFor is runCycle for a given pod.
func runCycleFor(w *WasmPolicy, pod *v1.Pod, nodes []fwk.NodeInfo) cycleResult {
	ctx := context.Background()
	state := intree.NewCycleState()
	r := cycleResult{filters: map[string]*fwk.Status{}, scores: map[string]int64{}}
	_, st := w.PreFilter(ctx, state, pod, nodes)
	if st != nil && !st.IsSkip() {
		r.status, r.point = st, "PreFilter"
		return r
	}
	var feasible []fwk.NodeInfo
	for _, ni := range nodes {
		if st == nil {
			r.filters[ni.Node().Name] = w.Filter(ctx, state, pod, ni)
		}
		if r.filters[ni.Node().Name].IsSuccess() {
			feasible = append(feasible, ni)
		}
	}
	if ps := w.PreScore(ctx, state, pod, feasible); ps != nil {
		if !ps.IsSkip() {
			r.status, r.point = ps, "PreScore"
		}
		return r
	}
	list := make(framework.NodeScoreList, len(feasible))
	for k, ni := range feasible {
		list[k].Name = ni.Node().Name
		if _, st := w.Score(ctx, state, pod, ni); st != nil {
			r.status, r.point = st, "Score"
			return r
		}
	}
	if st := w.NormalizeScore(ctx, state, pod, list); st != nil {
		r.status, r.point = st, "NormalizeScore"
		return r
	}
	for _, s := range list {
		r.scores[s.Name] = s.Score
	}
	return r
}

// A failure at each extension point, under each failurePolicy and in Audit
// mode: Fail stops the pod with a status that names the policy, Ignore and
// Audit let it through.
func TestFailurePolicyTable(t *testing.T) {
	type want struct {
		point string
		code  fwk.Code
		msg   string
	}
	for _, c := range []struct {
		name   string
		module func() *fakeModule
		fail   want // under FailurePolicy Fail; Ignore and Audit must pass
	}{
		{"no module", func() *fakeModule { return nil },
			want{"PreFilter", fwk.UnschedulableAndUnresolvable, "rejected by WasmPolicy/p: policy has no module loaded (file /fake/p.wasm)"}},
		{"prefilter timeout", func() *fakeModule {
			m := &fakeModule{}
			m.fns[host.CallPreFilter], m.fns[host.CallFilter] = timeout, succeed
			return m
		},
			want{"PreFilter", fwk.UnschedulableAndUnresolvable, "rejected by WasmPolicy/p: policy call exceeded its timeout of 100ms; the pod (and pods like it) is quarantined for 30s: the policy is not called for it until then or until a new module loads; fix the policy or raise its timeout"}},
		{"filter timeout", func() *fakeModule { m := &fakeModule{}; m.fns[host.CallFilter] = timeout; return m },
			want{"Filter", fwk.UnschedulableAndUnresolvable, "node(s) rejected by WasmPolicy/p: policy call exceeded its timeout of 100ms; the pod (and pods like it) is quarantined for 30s: the policy is not called for it until then or until a new module loads; fix the policy or raise its timeout"}},
		{"filter error status", func() *fakeModule { m := &fakeModule{}; m.fns[host.CallFilter] = errorOut; return m },
			want{"Filter", fwk.UnschedulableAndUnresolvable, "node(s) rejected by WasmPolicy/p: policy error: no data"}},
		{"prescore error status", func() *fakeModule {
			m := &fakeModule{}
			m.fns[host.CallPreScore], m.fns[host.CallScore] = errorOut, scoreOf(10)
			return m
		}, want{"PreScore", fwk.Error, "WasmPolicy/p: policy error: no data"}},
		{"score timeout", func() *fakeModule { m := &fakeModule{}; m.fns[host.CallScore] = timeout; return m },
			want{"Score", fwk.Error, "WasmPolicy/p: policy call exceeded its timeout of 100ms; the pod (and pods like it) is quarantined for 30s: the policy is not called for it until then or until a new module loads; fix the policy or raise its timeout"}},
		{"score out of range", func() *fakeModule { m := &fakeModule{}; m.fns[host.CallScore] = scoreOf(1000); return m },
			want{"NormalizeScore", fwk.Error, "WasmPolicy/p: score out of range 0..100 (register a NormalizeScore function to rescale raw scores)"}},
		{"normalize error", func() *fakeModule {
			m := &fakeModule{normalize: func([]int64) host.Result { return host.Result{Code: abi.CodeError, Reason: "bad"} }}
			m.fns[host.CallScore] = scoreOf(10)
			return m
		}, want{"NormalizeScore", fwk.Error, "WasmPolicy/p: policy error: bad"}},
	} {
		for _, mode := range []string{"Fail", "Ignore", "Audit"} {
			t.Run(c.name+"/"+mode, func(t *testing.T) {
				p := fakePolicy("p", c.module(), func(cfg *config.Policy) {
					switch mode {
					case "Ignore":
						cfg.FailurePolicy = config.FailurePolicyIgnore
					case "Audit":
						cfg.Mode = config.ModeAudit
					}
				})
				r := runCycle(fakePlugin(p), fakeNodes(3))
				if mode != "Fail" {
					if r.status != nil {
						t.Fatalf("%s at %s: %v, want the failure ignored", mode, r.point, r.status)
					}
					for n, st := range r.filters {
						if !st.IsSuccess() {
							t.Fatalf("%s: node %s rejected: %v", mode, n, st)
						}
					}
					return
				}
				got := r.status
				if c.fail.point == "Filter" {
					got = r.filters["n0"]
				} else if r.point != c.fail.point {
					t.Fatalf("failed at %s (%v), want %s", r.point, r.status, c.fail.point)
				}
				if got.Code() != c.fail.code || got.Message() != c.fail.msg {
					t.Fatalf("status %v %q, want %v %q", got.Code(), got.Message(), c.fail.code, c.fail.msg)
				}
			})
		}
	}
}

// A batch that fails on one node: the nodes before it keep their batched
// verdicts, the failing node gets the failure, and the policy is not called
// again in the cycle: every node left gets the same reason (one line of the
// FailedScheduling event) under Fail, and passes under Ignore.
func TestFailureStopsTheCycle(t *testing.T) {
	for _, fp := range []config.FailurePolicy{config.FailurePolicyFail, config.FailurePolicyIgnore} {
		t.Run(string(fp), func(t *testing.T) {
			m := &fakeModule{batch: true}
			m.fns[host.CallFilter] = func(node string) (int64, host.Result, *host.CallError) {
				switch node {
				case "n5":
					return 0, host.Result{}, &host.CallError{Outcome: host.OutcomeTrap, Err: errors.New("unreachable")}
				case "n3", "n7", "n40":
					return 0, host.Result{Code: abi.CodeUnschedulable, Reason: "busy"}, nil
				}
				return succeed("")
			}
			m.fns[host.CallScore] = scoreOf(10)
			p := fakePolicy("p", m, func(c *config.Policy) { c.FailurePolicy = fp })
			r := runCycle(fakePlugin(p), fakeNodes(BatchSize+10))
			const stop = "policy trapped: unreachable; the pod (and pods like it) is quarantined for 30s: the policy is not called for it until then or until a new module loads; fix the policy"
			for n, st := range r.filters {
				switch {
				case n == "n3":
					if st.Code() != fwk.Unschedulable || st.Message() != "node(s) rejected by WasmPolicy/p: busy" {
						t.Errorf("%s: %v, want the guest's rejection", n, st)
					}
				case n < "n5" && len(n) == 2:
					if !st.IsSuccess() {
						t.Errorf("%s: %v, want its batched verdict", n, st)
					}
				case fp == config.FailurePolicyIgnore:
					if !st.IsSuccess() {
						t.Errorf("%s: %v, want the failure ignored", n, st)
					}
				default:
					if st.Code() != fwk.UnschedulableAndUnresolvable || st.Message() != "node(s) rejected by WasmPolicy/p: "+stop {
						t.Errorf("%s: %v, want %q", n, st, stop)
					}
				}
			}
			// One batch call (nodes 0-31, failing at 5); nothing after it,
			// neither the second batch, nor single calls, nor Score.
			if b, s := m.batchCalls.Load(), m.singleCalls.Load(); b != 1 || s != 0 {
				t.Fatalf("%d batch calls and %d single calls, want 1 and 0", b, s)
			}
			if fp == config.FailurePolicyIgnore && (r.status != nil || len(r.scores) != 0) {
				t.Fatalf("Ignore: status %v, scores %v; want the pod scheduled and Score skipped", r.status, r.scores)
			}
		})
	}
}

// NormalizeScore and Explain combine scores the same way: Σ weight·score /
// Σ weight over enforced policies whose scores count.
func TestScoreCombination(t *testing.T) {
	byNode := func(scores map[string]int64) guestFunc {
		return func(node string) (int64, host.Result, *host.CallError) { return scores[node], host.Result{}, nil }
	}
	scorer := func(scores map[string]int64, batch bool) *fakeModule {
		m := &fakeModule{batch: batch}
		m.fns[host.CallFilter], m.fns[host.CallScore] = succeed, byNode(scores)
		return m
	}
	weight := func(w int32) func(*config.Policy) { return func(c *config.Policy) { c.Weight = w } }
	for _, c := range []struct {
		name     string
		policies []*policy
		want     map[string]int64
	}{
		{"one policy", []*policy{fakePolicy("a", scorer(map[string]int64{"n0": 10, "n1": 90}, false), nil)},
			map[string]int64{"n0": 10, "n1": 90}},
		{"weights 1 and 3, batched and not", []*policy{
			fakePolicy("a", scorer(map[string]int64{"n0": 100, "n1": 0}, true), weight(1)),
			fakePolicy("b", scorer(map[string]int64{"n0": 0, "n1": 100}, false), weight(3)),
		}, map[string]int64{"n0": 25, "n1": 75}},
		{"audited policy does not count", []*policy{
			fakePolicy("a", scorer(map[string]int64{"n0": 40, "n1": 60}, false), nil),
			fakePolicy("audit", scorer(map[string]int64{"n0": 100, "n1": 0}, false), func(c *config.Policy) { c.Mode = config.ModeAudit }),
		}, map[string]int64{"n0": 40, "n1": 60}},
		{"ignored failure does not count", []*policy{
			fakePolicy("a", scorer(map[string]int64{"n0": 40, "n1": 60}, false), nil),
			fakePolicy("broken", scorer(map[string]int64{"n0": 500, "n1": 500}, false), func(c *config.Policy) { c.FailurePolicy = config.FailurePolicyIgnore }),
		}, map[string]int64{"n0": 40, "n1": 60}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := fakePlugin(c.policies...)
			nodes := fakeNodes(2)
			r := runCycle(w, nodes)
			if r.status != nil {
				t.Fatal(r.status)
			}
			ex := w.Explain(context.Background(), fakePod(), nodes)
			for _, n := range ex.Nodes {
				if r.scores[n.Node] != c.want[n.Node] || n.Score == nil || *n.Score != c.want[n.Node] {
					t.Fatalf("%s: NormalizeScore %d, Explain %v, want %d", n.Node, r.scores[n.Node], n.Score, c.want[n.Node])
				}
			}
		})
	}
}

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
	for _, k := range []host.CallKind{host.CallPreFilter, host.CallFilter, host.CallPreScore, host.CallScore, host.CallPreEnqueue, host.CallPreBind} {
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
	ex := w.Explain(context.Background(), fakePod(), nodes)
	if ex.Nodes[0].Feasible || ex.Nodes[0].Reason != "node(s) rejected by WasmPolicy/b: not among the nodes its prefilter named (prefilter_nodes)" || !ex.Nodes[1].Feasible || ex.Nodes[3].Feasible {
		t.Fatalf("explanation: %+v", ex.Nodes)
	}
}
