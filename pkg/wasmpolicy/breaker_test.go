package wasmpolicy

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics/testutil"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	"github.com/wasmsched/wasmsched/pkg/source"
)

// fakeClock is the breaker's clock in tests: time moves when the test says.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Step(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// transitions records a breaker's transitions as "from>to".
type transitions struct {
	mu   sync.Mutex
	seen []string
}

func (t *transitions) take() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.Join(t.seen, " ")
	t.seen = nil
	return s
}

// podN is the n-th of a stream of distinct pods (distinct inputs: each
// has its own app label), as a policy broken for everyone sees them.
func podN(prefix string, n int) *v1.Pod {
	name := fmt.Sprintf("%s-%d", prefix, n)
	return st.MakePod().Name(name).Namespace("default").UID(name).Labels(map[string]string{"app": name}).Obj()
}

// breakerHarness is a plugin with one fake policy, a fake clock for its
// breaker and quarantine, and its breaker's transitions recorded.
type breakerHarness struct {
	w     *WasmPolicy
	p     *policy
	m     *fakeModule
	clock *fakeClock
	tr    transitions
	nodes []fwk.NodeInfo
	calls atomic.Int64
}

func newBreakerHarness(t *testing.T, name string, fp config.FailurePolicy, guest guestFunc) *breakerHarness {
	h := &breakerHarness{m: &fakeModule{batch: true}, clock: &fakeClock{now: time.Unix(1_000_000, 0)}, nodes: fakeNodes(40)}
	h.m.fns[host.CallFilter] = func(n string) (int64, host.Result, *host.CallError) {
		h.calls.Add(1)
		return guest(n)
	}
	h.w = &WasmPolicy{}
	registerMetrics()
	cfg := fakePolicy(name, nil, func(c *config.Policy) { c.FailurePolicy = fp }).cfg
	h.p = h.w.newPolicy(cfg, &fakeRuntime{m: h.m}, breakerConfig{threshold: 3, backoff: time.Second, maxBackoff: 3 * time.Second})
	h.p.source = &source.File{Path: cfg.Source.File}
	h.p.breaker.now = h.clock.Now
	h.p.quarantine.now = h.clock.Now
	h.p.quarantine.wake = nil
	changed := h.p.breaker.changed
	h.p.breaker.changed = func(from, to breakerState, why string, pod *v1.Pod) {
		h.tr.mu.Lock()
		h.tr.seen = append(h.tr.seen, from.String()+">"+to.String())
		h.tr.mu.Unlock()
		changed(from, to, why, pod)
	}
	h.w.static = []*policy{h.p}
	h.w.publish(nil)
	return h
}

// cycle runs one cycle of pod and returns the status of node n0 (Filter)
// or the PreFilter status, and the guest calls it made (loops included).
func (h *breakerHarness) cycle(pod *v1.Pod) (*fwk.Status, int64) {
	before := h.calls.Load() + h.m.loopCalls.Load()
	r := runCycleFor(h.w, pod, h.nodes)
	st := r.filters["n0"]
	if r.point == "PreFilter" {
		st = r.status
	}
	return st, h.calls.Load() + h.m.loopCalls.Load() - before
}

// The breaker through the plugin, for a policy broken for everyone (a fake
// guest that times out while broken is set, on every pod): it opens once
// three distinct pods failed and none was answered, keeps the policy from
// being called while open, lets one probe through when the backoff ends,
// doubles the backoff when the probe fails, closes when a probe succeeds,
// and closes at once when a new module is loaded.
func TestCircuitBreaker(t *testing.T) {
	for _, fp := range []config.FailurePolicy{config.FailurePolicyFail, config.FailurePolicyIgnore} {
		t.Run(string(fp), func(t *testing.T) {
			var broken atomic.Bool
			name := "cb-" + strings.ToLower(string(fp))
			h := newBreakerHarness(t, name, fp, func(string) (int64, host.Result, *host.CallError) {
				if broken.Load() {
					return timeout("")
				}
				return succeed("")
			})
			n := 0
			next := func() *v1.Pod { n++; return podN("pod", n) }
			gauge := func(state string) float64 {
				v, err := testutil.GetGaugeMetricValue(breakerStates.WithLabelValues(name, state))
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
			wantRejected := func(st *fwk.Status, msg string) {
				t.Helper()
				if fp == config.FailurePolicyIgnore {
					if !st.IsSuccess() {
						t.Fatalf("Ignore: %v, want the node to pass", st)
					}
					return
				}
				if st.IsSuccess() || !strings.Contains(st.Message(), msg) {
					t.Fatalf("status %v, want a rejection saying %q", st, msg)
				}
			}

			broken.Store(true)
			// It judges once it has seen breakerMinPods pods.
			var wants []string
			for range breakerMinPods - 1 {
				wants = append(wants, "quarantined for 30s")
			}
			wants = append(wants, "circuit breaker opened: 12 distinct pods failed within 1m0s, more than twice the 0 answered; policy not called for 1s")
			for i, want := range wants {
				st, calls := h.cycle(next())
				wantRejected(st, want)
				wantRejected(st, "quarantined for 30s")
				// Filter stops after the first failed call of the cycle.
				if calls != 1 {
					t.Fatalf("failing cycle %d made %d guest calls, want 1", i+1, calls)
				}
			}
			if got := h.tr.take(); got != "closed>open" || gauge("open") != 1 || gauge("closed") != 0 {
				t.Fatalf("transitions %q, open gauge %v; want closed>open", got, gauge("open"))
			}

			// Open: the policy is not called; the failurePolicy applies at
			// PreFilter, for the whole pod, with the reason and the fix.
			h.clock.Step(500 * time.Millisecond)
			st, calls := h.cycle(next())
			if calls != 0 {
				t.Fatalf("open breaker: %d guest calls, want 0", calls)
			}
			wantRejected(st, "circuit breaker open after 12 failed cycles of 12 distinct pods (last: policy call exceeded its timeout of 100ms); not called for 1s more; fix the policy and push a new module")
			if fp == config.FailurePolicyFail && !strings.HasPrefix(st.Message(), "rejected by WasmPolicy/"+name+": ") {
				t.Fatalf("open breaker rejects at %q, want PreFilter", st.Message())
			}

			// Backoff over: a quarantined pod does not take the probe (it is
			// answered from its quarantine, without a call)...
			h.clock.Step(600 * time.Millisecond)
			st, calls = h.cycle(podN("pod", 1))
			if calls != 0 {
				t.Fatalf("a quarantined pod made %d guest calls", calls)
			}
			wantRejected(st, "quarantined: the policy failed on this pod")
			if h.tr.take() != "" {
				t.Fatalf("a quarantined pod moved the breaker")
			}
			// ...a new pod does: one probe call, which fails; open for twice as long.
			st, calls = h.cycle(next())
			if calls != 1 {
				t.Fatalf("probe cycle: %d guest calls, want 1", calls)
			}
			wantRejected(st, "policy not called for 2s")
			if got := h.tr.take(); got != "open>half-open half-open>open" {
				t.Fatalf("transitions %q, want open>half-open half-open>open", got)
			}
			h.clock.Step(time.Second)
			if _, calls := h.cycle(next()); calls != 0 {
				t.Fatalf("reopened breaker: %d guest calls, want 0", calls)
			}
			// The backoff doubles up to maxBackoff (3s).
			h.clock.Step(time.Second)
			h.cycle(next())
			if s := h.p.breaker.period; s != 3*time.Second {
				t.Fatalf("third open period %s, want the 3s cap", s)
			}
			h.tr.take()

			// Fixed: the probe succeeds, the breaker closes, nodes pass.
			h.clock.Step(3 * time.Second)
			broken.Store(false)
			if st, calls := h.cycle(next()); !st.IsSuccess() || calls != int64(len(h.nodes)) {
				t.Fatalf("after a good probe: %v with %d calls, want success on all %d nodes", st, calls, len(h.nodes))
			}
			if got := h.tr.take(); got != "open>half-open half-open>closed" || gauge("closed") != 1 {
				t.Fatalf("transitions %q, want open>half-open half-open>closed", got)
			}

			// A new module closes an open breaker, and ends the quarantines, at once.
			h.clock.Step(2 * time.Minute) // the answered pods of the last window age out
			broken.Store(true)
			for range breakerMinPods {
				h.cycle(next())
			}
			if s, _ := h.p.breaker.snapshot(); s != breakerOpen {
				t.Fatalf("breaker %s after %d failures, want open", s, breakerMinPods)
			}
			h.w.apply(context.Background(), h.p, source.Update{Data: []byte("v2")})
			if s, f := h.p.breaker.snapshot(); s != breakerClosed || f != 0 || h.p.quarantine.size() != 0 {
				t.Fatalf("breaker %s with %d failures and %d quarantined after a reload, want closed and none", s, f, h.p.quarantine.size())
			}
			broken.Store(false)
			if st, calls := h.cycle(podN("pod", n)); !st.IsSuccess() || calls == 0 {
				t.Fatalf("after a reload, the last failing pod: %v with %d calls", st, calls)
			}
			if got := h.tr.take(); got != "closed>open open>closed" {
				t.Fatalf("transitions %q, want closed>open open>closed", got)
			}
		})
	}
}

// One tenant's looping pods are contained at the pods: five replicas of
// one looping template cost one timed-out call together, ordinary pods
// keep passing, and the breaker stays closed; five looping pods of five
// different templates cost one call each and still do not open it while
// the policy answers more pods. When the quarantine ends, the pod is
// called once more, and its next quarantine is twice as long.
func TestQuarantineContainsLoopingPods(t *testing.T) {
	h := newBreakerHarness(t, "quarantine", config.FailurePolicyFail, succeed)
	h.m.loops = func(pod *v1.Pod) bool { return pod.Labels["attack"] == "loop" }
	looping := func(name, template string) *v1.Pod {
		return st.MakePod().Name(name).Namespace("tenant-b").UID(name).Labels(map[string]string{"attack": "loop", "app": template}).Obj()
	}
	ordinary := 0
	runOrdinary := func(k int) {
		t.Helper()
		for range k {
			ordinary++
			if st, calls := h.cycle(podN("ordinary", ordinary)); !st.IsSuccess() || calls == 0 {
				t.Fatalf("ordinary pod %d: %v with %d calls, want success", ordinary, st, calls)
			}
		}
	}
	runOrdinary(10)

	// Five replicas of one template: the first times out, the others are
	// recognised by their input and answered without a call.
	for i := range 5 {
		st, calls := h.cycle(looping(fmt.Sprintf("replica-%d", i), "same"))
		want := int64(0)
		if i == 0 {
			want = 1
		}
		if calls != want {
			t.Fatalf("replica %d: %d guest calls, want %d", i, calls, want)
		}
		if st.IsSuccess() || !strings.Contains(st.Message(), "WasmPolicy/quarantine") || !strings.Contains(st.Message(), "timeout of 100ms") || !strings.Contains(st.Message(), "quarantined") || !strings.Contains(st.Message(), "fix the policy") {
			t.Fatalf("replica %d: %v, want a rejection naming the policy, the timeout, the quarantine and the fix", i, st)
		}
		runOrdinary(2)
	}
	// Five different templates: one call each; 20 ordinary pods answered
	// meanwhile keep the breaker closed.
	for i := range 5 {
		if _, calls := h.cycle(looping(fmt.Sprintf("other-%d", i), fmt.Sprintf("t%d", i))); calls != 1 {
			t.Fatalf("template %d: %d calls, want 1", i, calls)
		}
		runOrdinary(2)
	}
	if s, _ := h.p.breaker.snapshot(); s != breakerClosed {
		t.Fatalf("breaker %s with 6 looping inputs among %d answered pods, want closed", s, ordinary)
	}
	if got := h.p.quarantine.size(); got != 6 {
		t.Fatalf("%d inputs quarantined, want 6", got)
	}
	// The quarantine's period ends: one more call, then twice as long.
	h.clock.Step(31 * time.Second)
	st, calls := h.cycle(looping("replica-9", "same"))
	if calls != 1 || !strings.Contains(st.Message(), "quarantined for 1m0s") {
		t.Fatalf("after the period: %v with %d calls, want one call and a 1m quarantine", st, calls)
	}
	// Meanwhile the budget never let a looping pod near other pods' cycles.
	runOrdinary(5)
}

// The breaker's rule, alone: it opens once threshold distinct inputs
// failed within the window, they outnumber twice the pods answered, and it
// has seen breakerMinPods pods; the same input failing again counts once;
// failures and answers age out of the window.
func TestBreakerOpensWhenMostPodsFail(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	b := newBreaker(breakerConfig{threshold: 3, backoff: time.Second, maxBackoff: time.Minute}, func(breakerState, breakerState, string, *v1.Pod) {})
	b.now = clock.Now
	fail := func(i int) {
		p := podN("f", i)
		b.failed("x", p, inputOf(p))
	}
	for i := range 2 {
		b.succeeded(podN("ok", i))
	}
	fail(1)
	fail(1)
	fail(2)
	fail(3)
	fail(4)
	fail(5)
	if s, _ := b.snapshot(); s != breakerClosed {
		t.Fatalf("%s with 5 failed and 2 answered, want closed: too few pods seen to judge", s)
	}
	for i := 6; i < breakerMinPods-2; i++ {
		fail(i)
	}
	if s, _ := b.snapshot(); s != breakerClosed {
		t.Fatalf("%s with %d failed and 2 answered, want closed", s, breakerMinPods-3)
	}
	fail(breakerMinPods - 2)
	if s, _ := b.snapshot(); s != breakerOpen {
		t.Fatalf("%s with %d failed and 2 answered, want open", s, breakerMinPods-2)
	}
	b.reset("test")
	clock.Step(2 * breakerWindow)
	for i := 10; i < 12; i++ {
		fail(i)
	}
	clock.Step(2 * breakerWindow)
	fail(12)
	if s, _ := b.snapshot(); s != breakerClosed {
		t.Fatalf("%s: failures older than the window counted", s)
	}
}

// An open breaker holds back the pods of the namespaces whose pods failed:
// team-a's burst of failing pods stops the policy for team-a's pods, and
// team-b's pods are still called; a team-b pod that fails joins them; a
// probe that succeeds closes it for all.
func TestBreakerHoldsBackTheFailingNamespaces(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	b := newBreaker(breakerConfig{threshold: 3, backoff: time.Second, maxBackoff: time.Minute}, func(breakerState, breakerState, string, *v1.Pod) {})
	b.now = clock.Now
	in := func(ns string, i int) *v1.Pod {
		name := fmt.Sprintf("%s-%d", ns, i)
		return st.MakePod().Name(name).Namespace(ns).UID(name).Labels(map[string]string{"app": name}).Obj()
	}
	for i := range breakerMinPods {
		p := in("team-a", i)
		b.failed("loops", p, inputOf(p))
	}
	if s, _ := b.snapshot(); s != breakerOpen {
		t.Fatalf("%s after %d of team-a's pods failed, want open", s, breakerMinPods)
	}
	if why := b.admit(in("team-a", 100)); !strings.Contains(why, "circuit breaker open") {
		t.Errorf("team-a's next pod: %q, want held back", why)
	}
	if why := b.admit(in("team-b", 1)); why != "" {
		t.Errorf("team-b's pod: %q, want called", why)
	}
	// team-b's pod answered: not the probe, the breaker stays open.
	b.succeeded(in("team-b", 1))
	if s, _ := b.snapshot(); s != breakerOpen {
		t.Fatalf("%s after team-b's pod was answered, want still open for team-a", s)
	}
	p := in("team-b", 2)
	b.failed("loops", p, inputOf(p))
	if why := b.admit(in("team-b", 3)); !strings.Contains(why, "circuit breaker open") {
		t.Errorf("team-b's pod after one of team-b's failed: %q, want held back", why)
	}
	clock.Step(2 * time.Second)
	if why := b.admit(in("team-a", 101)); why != "" {
		t.Fatalf("after the backoff: %q, want team-a's pod to probe", why)
	}
	b.succeeded(in("team-a", 101))
	if s, _ := b.snapshot(); s != breakerClosed {
		t.Fatalf("%s after a good probe, want closed", s)
	}
	if why := b.admit(in("team-b", 4)); why != "" {
		t.Errorf("team-b after the breaker closed: %q", why)
	}
}
