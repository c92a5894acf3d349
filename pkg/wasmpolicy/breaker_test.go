package wasmpolicy

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics/testutil"
	fwk "k8s.io/kube-scheduler/framework"

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

// The breaker through the plugin, with a fake guest that times out while
// broken is set: it opens after three failed cycles, keeps the policy from
// being called while open, lets one probe through when the backoff ends,
// doubles the backoff when the probe fails, closes when a probe succeeds,
// and closes at once when a new module is loaded.
func TestCircuitBreaker(t *testing.T) {
	for _, fp := range []config.FailurePolicy{config.FailurePolicyFail, config.FailurePolicyIgnore} {
		t.Run(string(fp), func(t *testing.T) {
			var broken atomic.Bool
			var calls atomic.Int64
			m := &fakeModule{batch: true}
			m.fns[host.CallFilter] = func(string) (int64, host.Result, *host.CallError) {
				calls.Add(1)
				if broken.Load() {
					return timeout("")
				}
				return succeed("")
			}
			name := "cb-" + strings.ToLower(string(fp))
			w := &WasmPolicy{}
			registerMetrics()
			clock := &fakeClock{now: time.Unix(1_000_000, 0)}
			var tr transitions
			cfg := fakePolicy(name, nil, func(c *config.Policy) { c.FailurePolicy = fp }).cfg
			p := w.newPolicy(cfg, &fakeRuntime{m: m}, breakerConfig{threshold: 3, backoff: time.Second, maxBackoff: 3 * time.Second})
			p.source = &source.File{Path: cfg.Source.File}
			p.breaker.now = clock.Now
			changed := p.breaker.changed
			p.breaker.changed = func(from, to breakerState, why string, pod *v1.Pod) {
				tr.mu.Lock()
				tr.seen = append(tr.seen, from.String()+">"+to.String())
				tr.mu.Unlock()
				changed(from, to, why, pod)
			}
			w.static = []*policy{p}
			w.publish(nil)
			nodes := fakeNodes(40)

			// cycle runs one pod's cycle and returns the status of node n0
			// (Filter) or the PreFilter status, and the guest calls it made.
			cycle := func() (*fwk.Status, int64) {
				before := calls.Load()
				r := runCycle(w, nodes)
				st := r.filters["n0"]
				if r.point == "PreFilter" {
					st = r.status
				}
				return st, calls.Load() - before
			}
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
			for i, want := range []string{"circuit breaker closed, 1 of 3", "circuit breaker closed, 2 of 3", "circuit breaker opened after 3 consecutive failures, policy not called for 1s"} {
				st, n := cycle()
				wantRejected(st, want)
				// Filter stops after the first failed call of the cycle.
				if n != 1 {
					t.Fatalf("failing cycle %d made %d guest calls, want 1", i+1, n)
				}
			}
			if got := tr.take(); got != "closed>open" || gauge("open") != 1 || gauge("closed") != 0 {
				t.Fatalf("transitions %q, open gauge %v; want closed>open", got, gauge("open"))
			}

			// Open: the policy is not called; the failurePolicy applies at
			// PreFilter, for the whole pod, with the reason and the fix.
			clock.Step(500 * time.Millisecond)
			st, n := cycle()
			if n != 0 {
				t.Fatalf("open breaker: %d guest calls, want 0", n)
			}
			wantRejected(st, "circuit breaker open after 3 consecutive failures (last: policy call exceeded its timeout of 100ms); not called for 1s more; fix the policy and push a new module")
			if fp == config.FailurePolicyFail && !strings.HasPrefix(st.Message(), "rejected by WasmPolicy/"+name+": ") {
				t.Fatalf("open breaker rejects at %q, want PreFilter", st.Message())
			}

			// Backoff over: one probe call, which fails; open for twice as long.
			clock.Step(600 * time.Millisecond)
			st, n = cycle()
			if n != 1 {
				t.Fatalf("probe cycle: %d guest calls, want 1", n)
			}
			wantRejected(st, "circuit breaker opened after 4 consecutive failures, policy not called for 2s")
			if got := tr.take(); got != "open>half-open half-open>open" {
				t.Fatalf("transitions %q, want open>half-open half-open>open", got)
			}
			clock.Step(time.Second)
			if _, n := cycle(); n != 0 {
				t.Fatalf("reopened breaker: %d guest calls, want 0", n)
			}
			// The backoff doubles up to maxBackoff (3s).
			clock.Step(time.Second)
			cycle()
			if s := p.breaker.period; s != 3*time.Second {
				t.Fatalf("third open period %s, want the 3s cap", s)
			}
			tr.take()

			// Fixed: the probe succeeds, the breaker closes, nodes pass.
			clock.Step(3 * time.Second)
			broken.Store(false)
			if st, n := cycle(); !st.IsSuccess() || n != int64(len(nodes)) {
				t.Fatalf("after a good probe: %v with %d calls, want success on all %d nodes", st, n, len(nodes))
			}
			if got := tr.take(); got != "open>half-open half-open>closed" || gauge("closed") != 1 {
				t.Fatalf("transitions %q, want open>half-open half-open>closed", got)
			}

			// A new module closes an open breaker at once.
			broken.Store(true)
			for range 3 {
				cycle()
			}
			if s, _ := p.breaker.snapshot(); s != breakerOpen {
				t.Fatalf("breaker %s after 3 failures, want open", s)
			}
			w.apply(context.Background(), p, source.Update{Data: []byte("v2")})
			if s, f := p.breaker.snapshot(); s != breakerClosed || f != 0 {
				t.Fatalf("breaker %s with %d failures after a reload, want closed", s, f)
			}
			broken.Store(false)
			if st, n := cycle(); !st.IsSuccess() || n == 0 {
				t.Fatalf("after a reload: %v with %d calls", st, n)
			}
			if got := tr.take(); got != "closed>open open>closed" {
				t.Fatalf("transitions %q, want closed>open open>closed", got)
			}
		})
	}
}

// A success resets the count: failures must be consecutive.
func TestBreakerCountsConsecutiveFailures(t *testing.T) {
	b := newBreaker(breakerConfig{threshold: 3, backoff: time.Second, maxBackoff: time.Minute}, func(breakerState, breakerState, string, *v1.Pod) {})
	b.failed("x", nil)
	b.failed("x", nil)
	b.succeeded(nil)
	b.failed("x", nil)
	b.failed("x", nil)
	if s, f := b.snapshot(); s != breakerClosed || f != 2 {
		t.Fatalf("%s with %d failures, want closed with 2", s, f)
	}
	b.failed("x", nil)
	if s, _ := b.snapshot(); s != breakerOpen {
		t.Fatalf("%s, want open", s)
	}
}
