package wasmpolicy

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

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

// Signature: a fake's verdicts are a function of the node's name, unless
// it loops for some pods.
func (f *fakeModule) Signature() (string, bool) { return "fake/" + f.sha, f.loops == nil }

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

// set makes m the module the runtime serves, as a reload would.
func (r *fakeRuntime) set(m *fakeModule) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m = m
}

func (r *fakeRuntime) SuppressedLines() int64          { return 0 }
func (r *fakeRuntime) RowStats() (int64, int64, int64) { return 0, 0, 0 }
func (r *fakeRuntime) Close(context.Context) error     { return nil }

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
		ni.SetNode(st.MakeNode().Name(fmt.Sprintf("n%d", i)).Obj())
		out[i] = ni
	}
	return out
}

func fakePod() *v1.Pod {
	return st.MakePod().Name("p").Namespace("default").UID("p").Obj()
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
	// Reserve on the first feasible node, for the policies that export it.
	reserve := func() cycleResult {
		if c := readCycle(state); c != nil && c.has(host.CallReserve) && len(feasible) > 0 {
			if st := w.Reserve(ctx, state, pod, feasible[0].Node().Name); st != nil {
				r.status, r.point = st, "Reserve"
			}
		}
		return r
	}
	if ps := w.PreScore(ctx, state, pod, feasible); ps != nil {
		if !ps.IsSkip() {
			r.status, r.point = ps, "PreScore"
			return r
		}
		return reserve()
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
	return reserve()
}
