package wasmpolicy

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
)

func gate(reason string) guestFunc {
	return func(string) (int64, host.Result, *host.CallError) {
		return 0, host.Result{Code: abi.CodeUnschedulableAndUnresolvable, Reason: reason}, nil
	}
}

func withGates(w *WasmPolicy) *WasmPolicy {
	w.gates = newGateTracker(nil)
	return w
}

// PreEnqueue under each failurePolicy and mode: a gate's rejection holds
// the pod with the policy's reason; a failed call gates it under Fail and
// lets it in under Ignore; an audited policy never gates.
func TestPreEnqueueTable(t *testing.T) {
	for _, c := range []struct {
		name string
		fn   guestFunc
		fail string // the status under Fail ("" for none)
		pass bool   // the pod passes under Ignore (false: the gate holds it whatever the failurePolicy)
	}{
		{"pass", succeed, "", true},
		{"gate", gate("frozen"), "gated by WasmPolicy/p: frozen", false},
		{"timeout", timeout, "gated by WasmPolicy/p: policy call exceeded its preEnqueueTimeout of 10ms; the pod (and pods like it) is quarantined for 30s: the policy is not called for it until then or until a new module loads; fix the policy or raise its preEnqueueTimeout", true},
		{"error", errorOut, "gated by WasmPolicy/p: policy error: no data", true},
	} {
		for _, mode := range []string{"Fail", "Ignore", "Audit"} {
			t.Run(c.name+"/"+mode, func(t *testing.T) {
				m := &fakeModule{}
				m.fns[host.CallPreEnqueue] = c.fn
				p := fakePolicy("p", m, func(cfg *config.Policy) {
					switch mode {
					case "Ignore":
						cfg.FailurePolicy = config.FailurePolicyIgnore
					case "Audit":
						cfg.Mode = config.ModeAudit
					}
				})
				w := withGates(fakePlugin(p))
				st := w.PreEnqueue(context.Background(), fakePod())
				want := c.fail
				if mode == "Audit" || mode == "Ignore" && c.pass {
					want = ""
				}
				switch {
				case want == "" && st != nil:
					t.Fatalf("got %v, want the pod let in", st)
				case want != "" && (st == nil || st.Code() != fwk.UnschedulableAndUnresolvable || st.Message() != want):
					t.Fatalf("got %v, want UnschedulableAndUnresolvable %q", st, want)
				}
				if m.withNode.Load() != 0 {
					t.Errorf("preenqueue was given a node")
				}
				if _, gated := w.gates.lookup("p"); gated != (want != "") {
					t.Errorf("tracker: gated=%v, want %v", gated, want != "")
				}
			})
		}
	}
}

// A policy without preenqueue, or still without a module, costs nothing
// and gates nothing; the first gate in order decides.
func TestPreEnqueueOrder(t *testing.T) {
	none := &fakeModule{}
	none.fns[host.CallFilter] = succeed
	first, second := &fakeModule{}, &fakeModule{}
	first.fns[host.CallPreEnqueue], second.fns[host.CallPreEnqueue] = gate("first"), gate("second")
	w := withGates(fakePlugin(fakePolicy("filter-only", none, nil), fakePolicy("loading", nil, nil), fakePolicy("a", first, nil), fakePolicy("b", second, nil)))
	st := w.PreEnqueue(context.Background(), fakePod())
	if st == nil || st.Message() != "gated by WasmPolicy/a: first" {
		t.Fatalf("got %v, want the first gate's", st)
	}
	if none.singleCalls.Load() != 0 || second.singleCalls.Load() != 0 {
		t.Errorf("calls: filter-only %d, b %d; want none", none.singleCalls.Load(), second.singleCalls.Load())
	}
}

// The queueing hints: a gated pod is rechecked only on the events its gate
// asked for; a pod WasmPolicy rejected in a cycle (not gated) on every
// event it registers, as before gates; a pod's own update counts only when
// its labels or annotations changed.
func TestGateHints(t *testing.T) {
	w := withGates(fakePlugin())
	logger := klog.Background()
	gated, other := fakePod(), st.MakePod().Name("q").UID("q").Obj()
	w.gates.gate(gated, fakePolicy("p", nil, nil), host.Recheck{Events: abi.RecheckPodUpdate})
	hint := func(fn fwk.QueueingHintFn, pod *v1.Pod, oldObj, newObj interface{}) fwk.QueueingHint {
		h, err := fn(logger, pod, oldObj, newObj)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	for _, c := range []struct {
		name string
		got  fwk.QueueingHint
		want fwk.QueueingHint
	}{
		{"node change, gated on pod updates", hint(w.gateHint(abi.RecheckNodesChange), gated, nil, nil), fwk.QueueSkip},
		{"node change, rejected in a cycle", hint(w.gateHint(abi.RecheckNodesChange), other, nil, nil), fwk.Queue},
		{"pod annotated", hint(w.selfUpdateHint, gated, gated, withAnnotation(gated, "ok", "true")), fwk.Queue},
		{"pod status only", hint(w.selfUpdateHint, gated, gated, gated.DeepCopy()), fwk.QueueSkip},
		{"another pod annotated", hint(w.selfUpdateHint, gated, other, withAnnotation(other, "ok", "true")), fwk.QueueSkip},
		{"a pod bound, gate not asking", hint(w.boundPodHint, gated, nil, other), fwk.QueueSkip},
		{"a pod bound, rejected in a cycle", hint(w.boundPodHint, other, nil, gated), fwk.QueueSkip},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	w.gates.gate(gated, fakePolicy("p", nil, nil), host.Recheck{Events: abi.RecheckPodsChange})
	if h := hint(w.boundPodHint, gated, nil, other); h != fwk.Queue {
		t.Errorf("a pod bound, gate asking for pods changes: %v", h)
	}
	if h := hint(w.selfUpdateHint, gated, gated, withAnnotation(gated, "ok", "true")); h != fwk.QueueSkip {
		t.Errorf("pod annotated, gate not asking for pod updates: %v", h)
	}
	w.gates.release(gated.UID)
	if h := hint(w.gateHint(abi.RecheckNodesChange), gated, nil, nil); h != fwk.Queue {
		t.Errorf("released pod: %v", h)
	}
}

func withAnnotation(p *v1.Pod, k, v string) *v1.Pod {
	c := p.DeepCopy()
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[k] = v
	return c
}

// A gate that asked for a delay has its pod sent back to the queue then,
// once; pods without a delay are not.
func TestGateRecheckTimer(t *testing.T) {
	var a activations
	g := newGateTracker(a.activate)
	defer g.close()
	p := fakePolicy("p", nil, nil)
	soon, later, never := fakePod(), fakePod(), fakePod()
	soon.Name, soon.UID = "soon", "soon"
	later.Name, later.UID = "later", "later"
	never.Name, never.UID = "never", "never"
	g.gate(later, p, host.Recheck{After: 400 * time.Millisecond})
	g.gate(soon, p, host.Recheck{After: 100 * time.Millisecond})
	g.gate(never, p, host.Recheck{Events: abi.RecheckPodUpdate})
	if got := a.after(2, 500*time.Millisecond); got != "default/soon,default/later" {
		t.Errorf("activated %v, want soon then later, once each", got)
	}
}

// PreBind collects every enforced policy's patch (a later policy wins a
// key both set), leaves audited ones out, and under Fail refuses the
// binding when a policy's call fails; under Ignore it goes on without
// that policy's patch.
func TestPreBindCollects(t *testing.T) {
	a, b, audited, failing := &fakeModule{}, &fakeModule{}, &fakeModule{}, &fakeModule{}
	a.fns[host.CallPreBind], b.fns[host.CallPreBind], audited.fns[host.CallPreBind], failing.fns[host.CallPreBind] = succeed, succeed, succeed, timeout
	a.patch = map[string]string{"label:t.example.com/zone": "z1", "annotation:t.example.com/by": "a"}
	b.patch = map[string]string{"annotation:t.example.com/by": "b"}
	audited.patch = map[string]string{"label:t.example.com/audit": "yes"}
	for _, fp := range []config.FailurePolicy{config.FailurePolicyFail, config.FailurePolicyIgnore} {
		pa, pb := fakePolicy("a", a, nil), fakePolicy("b", b, nil)
		pau := fakePolicy("audited", audited, func(c *config.Policy) { c.Mode = config.ModeAudit })
		pf := fakePolicy("failing", failing, func(c *config.Policy) { c.FailurePolicy = fp })
		w := fakePlugin(pa, pb, pau, pf)
		c := w.newCycle(fakePod(), true)
		ni := fakeNodes(1)[0]
		var pp podPatch
		var st *fwk.Status
		for i, p := range c.policies {
			if st = w.preBindPolicy(context.Background(), p, c.runs[i].module, c.pod, ni, &host.PolicyCycle{}, &pp); st != nil {
				break
			}
		}
		if fp == config.FailurePolicyFail {
			if st == nil || st.Code() != fwk.Error || !strings.Contains(st.Message(), "WasmPolicy/failing: policy call exceeded its timeout of 100ms") || !strings.Contains(st.Message(), "not bound and will be retried") {
				t.Errorf("Fail: status %v", st)
			}
			continue
		}
		if st != nil {
			t.Fatalf("Ignore: status %v", st)
		}
		body, err := pp.body()
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"metadata":{"annotations":{"t.example.com/by":"b"},"labels":{"t.example.com/zone":"z1"}}}`; string(body) != want {
			t.Errorf("patch %s, want %s", body, want)
		}
		if strings.Join(pp.fail, ",") != "a,b" {
			t.Errorf("policies whose Fail refuses a failed patch: %v", pp.fail)
		}
	}
}

// PreBindPreFlight skips pods whose cycle has no policy with a prebind.
func TestPreBindPreFlight(t *testing.T) {
	filter, bind := &fakeModule{}, &fakeModule{}
	filter.fns[host.CallFilter], bind.fns[host.CallPreBind] = succeed, succeed
	for _, c := range []struct {
		policies []*policy
		skip     bool
	}{
		{[]*policy{fakePolicy("f", filter, nil)}, true},
		{[]*policy{fakePolicy("f", filter, nil), fakePolicy("b", bind, nil)}, false},
	} {
		w := fakePlugin(c.policies...)
		state := intree.NewCycleState()
		w.cycleFor(state, fakePod())
		if st := w.preBindPreFlight(state); st.IsSkip() != c.skip {
			t.Errorf("%d policies: %v, want skip=%v", len(c.policies), st, c.skip)
		}
	}
}

// With a real guest of each toolchain (extension-points): PreEnqueue gates
// by the pod's label, and prebind reads the cycle state its prefilter
// stored, in the scheduling cycle that chose the node.
func TestGatesAndPatchesOfARealGuest(t *testing.T) {
	ctx := context.Background()
	for _, tc := range testguests.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			path, err := testguests.Build(tc, "plugins-wasm/testdata/extension-points")
			if err != nil {
				t.Fatal(err)
			}
			pc := configv1.DefaultPolicy("ep", config.Source{File: path})
			pc.PatchPrefixes = []string{"ep.example.com/"}
			args := configv1.DefaultArgs(pc)
			args.CompilationCacheDir = sharedCacheDir
			w, err := NewWithArgs(ctx, args, nil, WithInitialLoadTimeout(3*time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if st := w.PreEnqueue(ctx, pod("closed", map[string]string{"gate": "closed"}, 10)); st == nil || st.Message() != "gated by WasmPolicy/ep: gate closed" {
				t.Errorf("gate: %v", st)
			}
			p := pod("open", map[string]string{"zone": "a"}, 10)
			if st := w.PreEnqueue(ctx, p); st != nil {
				t.Errorf("open: %v", st)
			}
			n := intree.NewNodeInfo()
			n.SetNode(node("a1", map[string]string{"zone": "a"}, 4000))
			state := intree.NewCycleState()
			if _, st := w.PreFilter(ctx, state, p, []fwk.NodeInfo{n}); st != nil {
				t.Fatal(st)
			}
			w.Reserve(ctx, state, p, "a1")
			body, st := w.PreBindPatch(ctx, state, "a1")
			if st != nil || string(body) != `{"metadata":{"annotations":{"ep.example.com/zone":"a"}}}` {
				t.Errorf("patch %s, %v", body, st)
			}
		})
	}
}

// A prebind's refusal is a verdict, not a failure: under either
// failurePolicy the pod is not bound, with a rejection (not an Error)
// naming the policy, and the pod is remembered for the policy's next module.
func TestPreBindRefusal(t *testing.T) {
	for _, fp := range []config.FailurePolicy{config.FailurePolicyFail, config.FailurePolicyIgnore} {
		m := &fakeModule{}
		m.fns[host.CallPreBind] = gate("not this node")
		p := fakePolicy("p", m, func(c *config.Policy) { c.FailurePolicy = fp })
		w := fakePlugin(p)
		c := w.newCycle(fakePod(), true)
		var pp podPatch
		st := w.preBindPolicy(context.Background(), p, c.runs[0].module, c.pod, fakeNodes(1)[0], &host.PolicyCycle{}, &pp)
		if st == nil || st.Code() != fwk.UnschedulableAndUnresolvable || st.Message() != "WasmPolicy/p refused the binding to this node: not this node" {
			t.Errorf("%s: %v", fp, st)
		}
		if got := p.takeRejected(); len(got) != 1 {
			t.Errorf("%s: remembered %v", fp, got)
		}
	}
}

// A pod whose preenqueue failed is quarantined like a pod whose cycle
// failed: its next PreEnqueue, and a replica's, are answered without a
// call, with the quarantine in the reason; its scheduling cycle stops the
// policy at PreFilter; another pod is still called; and a PreEnqueue that
// never started (no CPU before its context ended) is neither a failure nor
// quarantined.
func TestPreEnqueueQuarantine(t *testing.T) {
	m := &fakeModule{}
	m.fns[host.CallPreEnqueue], m.fns[host.CallFilter] = succeed, succeed
	m.loops = func(p *v1.Pod) bool { return p.Labels["attack"] == "loop" }
	p := fakePolicy("p", m, nil)
	w := withGates(fakePlugin(p))
	looping := func(name string) *v1.Pod {
		return st.MakePod().Name(name).Namespace("default").UID(name).Labels(map[string]string{"attack": "loop"}).Obj()
	}
	if st := w.PreEnqueue(context.Background(), looping("a")); st == nil || !strings.Contains(st.Message(), "quarantined for 30s") {
		t.Fatalf("first PreEnqueue: %v, want the pod gated and quarantined", st)
	}
	calls := m.singleCalls.Load()
	for _, name := range []string{"a", "a-replica"} {
		st := w.PreEnqueue(context.Background(), looping(name))
		if st == nil || !strings.Contains(st.Message(), "quarantined: the policy failed on this pod or one like it") || !strings.Contains(st.Message(), "preEnqueueTimeout") {
			t.Fatalf("%s: %v, want it answered from the quarantine", name, st)
		}
	}
	if r := runCycleFor(w, looping("a"), fakeNodes(3)); r.point != "PreFilter" || !strings.Contains(r.status.Message(), "quarantined") {
		t.Fatalf("cycle of the quarantined pod: %s %v, want it stopped at PreFilter", r.point, r.status)
	}
	if got := m.singleCalls.Load(); got != calls {
		t.Fatalf("%d guest calls for quarantined pods, want 0", got-calls)
	}
	if st := w.PreEnqueue(context.Background(), fakePod()); st != nil || m.singleCalls.Load() != calls+1 {
		t.Fatalf("another pod: %v; want it called and let in", st)
	}
	// Not started: counted as NotCalled, no quarantine, a recheck soon.
	busy := &fakeModule{}
	busy.fns[host.CallPreEnqueue] = func(string) (int64, host.Result, *host.CallError) {
		return 0, host.Result{}, &host.CallError{Outcome: host.OutcomeUnavailable, Err: fmt.Errorf("%w: no CPU free to run it (context deadline exceeded)", host.ErrNotStarted)}
	}
	q := fakePolicy("busy", busy, nil)
	wb := withGates(fakePlugin(q))
	st := wb.PreEnqueue(context.Background(), fakePod())
	if st == nil || !strings.Contains(st.Message(), "not evaluated") || q.quarantine.size() != 0 {
		t.Fatalf("not started: %v, %d quarantined; want the pod held for a recheck and nothing quarantined", st, q.quarantine.size())
	}
	// An audited gate never holds a pod, started or not.
	a := fakePolicy("busy-audit", busy, func(c *config.Policy) { c.Mode = config.ModeAudit })
	if st := withGates(fakePlugin(a)).PreEnqueue(context.Background(), fakePod()); st != nil {
		t.Fatalf("audited, not started: %v, want the pod let in", st)
	}
}

// A cycle in which a policy's Filter could not start on some node (no CPU
// free in time) and no node fit has its pod sent back to the queue soon,
// once, since no cluster event may come to retry it; a cycle that fits,
// or whose rejections are the policy's own, does not; a deleted pod's
// retry is dropped.
func TestNotEvaluatedPodIsRetried(t *testing.T) {
	var a activations
	busy := &fakeModule{}
	busy.fns[host.CallFilter] = func(node string) (int64, host.Result, *host.CallError) {
		if node == "n0" {
			return 0, host.Result{Code: abi.CodeUnschedulable, Reason: "no"}, nil
		}
		return 0, host.Result{}, &host.CallError{Outcome: host.OutcomeUnavailable, Err: fmt.Errorf("%w: no CPU free to run it (context deadline exceeded)", host.ErrNotStarted)}
	}
	w := fakePlugin(fakePolicy("busy", busy, nil))
	w.gates = newGateTracker(a.activate)
	defer w.gates.close()
	ctx := context.Background()
	cycle := func(name string, nodes int) {
		pod := fakePod()
		pod.Name, pod.UID = name, types.UID(name)
		state := intree.NewCycleState()
		if _, st := w.PreFilter(ctx, state, pod, fakeNodes(nodes)); st != nil && !st.IsSkip() {
			t.Fatalf("%s: PreFilter %v", name, st)
		}
		fits := false
		for _, ni := range fakeNodes(nodes) {
			st := w.Filter(ctx, state, pod, ni)
			fits = fits || st.IsSuccess()
			if ni.Node().Name != "n0" && (st.IsSuccess() || !strings.Contains(st.Message(), "not evaluated")) {
				t.Fatalf("%s on %s: %v, want not evaluated", name, ni.Node().Name, st)
			}
		}
		if !fits {
			w.PostFilter(ctx, state, pod, nil)
		}
	}
	cycle("busy", 3)    // no node fits, two not evaluated: retried
	cycle("own", 1)     // the policy's own rejection: waits for an event
	cycle("deleted", 3) // retried, but deleted first
	w.podDeleted(st.MakePod().UID("deleted").Obj())
	if got := a.after(1, 1500*time.Millisecond); got != "default/busy" {
		t.Errorf("activated %v, want default/busy once", got)
	}
}

// activations records the pods a gate tracker sends back to the queue.
type activations struct {
	mu  sync.Mutex
	got []string
}

func (a *activations) activate(pods map[string]*v1.Pod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k := range pods {
		a.got = append(a.got, k)
	}
}

// after waits (up to 10 s) until n pods were activated, then quiet more,
// and returns every pod activated, in order.
func (a *activations) after(n int, quiet time.Duration) string {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		a.mu.Lock()
		done := len(a.got) >= n
		a.mu.Unlock()
		if done {
			break
		}
	}
	time.Sleep(quiet) // nothing more comes
	a.mu.Lock()
	defer a.mu.Unlock()
	return strings.Join(a.got, ",")
}

// One namespace fills only its part of the gate tracker: past
// maxGatedPerNamespace of its pods, its next one is not tracked, while
// another namespace's still is; a pod released makes room again.
func TestGateTrackerBoundsEachNamespace(t *testing.T) {
	g := newGateTracker(nil)
	podOf := func(ns string, i int) *v1.Pod {
		p := pod(fmt.Sprintf("%s-%d", ns, i), nil, 10)
		p.Namespace, p.UID = ns, types.UID(fmt.Sprintf("%s-%d", ns, i))
		return p
	}
	for i := 0; i < maxGatedPerNamespace; i++ {
		g.gateBy(podOf("team-x", i), shareGate, host.Recheck{After: time.Hour})
	}
	over := podOf("team-x", maxGatedPerNamespace)
	g.gateBy(over, shareGate, host.Recheck{After: time.Hour})
	if g.gatedBy(over.UID, shareGate) {
		t.Errorf("team-x's pod %d was tracked past its part of the tracker", maxGatedPerNamespace)
	}
	other := podOf("team-y", 0)
	g.gateBy(other, shareGate, host.Recheck{After: time.Hour})
	g.retry(podOf("team-y", 1), time.Hour)
	if !g.gatedBy(other.UID, shareGate) {
		t.Error("team-y's pod was not tracked beside team-x's")
	}
	g.release(podOf("team-x", 0).UID)
	g.gateBy(over, shareGate, host.Recheck{After: time.Hour})
	if !g.gatedBy(over.UID, shareGate) {
		t.Error("team-x's pod was not tracked after one of its pods left")
	}
	g.forget(other.UID)
	if n := g.perNamespace["team-y"]; n != 1 {
		t.Errorf("team-y counts %d pods after one of its two left, want 1", n)
	}
}
