package wasmpolicy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

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
		{"reserve error status", func() *fakeModule {
			m := &fakeModule{}
			m.fns[host.CallFilter], m.fns[host.CallReserve] = succeed, errorOut
			return m
		}, want{"Reserve", fwk.Error, "WasmPolicy/p: policy error: no data; the placement is undone and the pod will be retried (failurePolicy Fail)"}},
		{"reserve trap", func() *fakeModule {
			m := &fakeModule{}
			m.fns[host.CallFilter], m.fns[host.CallReserve] = succeed, func(string) (int64, host.Result, *host.CallError) {
				return 0, host.Result{}, &host.CallError{Outcome: host.OutcomeTrap, Err: errors.New("unreachable")}
			}
			return m
		}, want{"Reserve", fwk.Error, "WasmPolicy/p: policy trapped: unreachable; the pod (and pods like it) is quarantined for 30s: the policy is not called for it until then or until a new module loads; fix the policy; the placement is undone and the pod will be retried (failurePolicy Fail)"}},
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

// A call of a module that a new one replaced while it ran stops the
// policy for that cycle, but quarantines nothing and tells the breaker
// nothing: the load ended every quarantine, and the old module's timeout
// must not hold the pod against the new one (a quarantined input stayed
// after the fix in TestBadPolicyIsContained when the reload landed during
// a timing-out call).
func TestFailureOfAReplacedModuleQuarantinesNothing(t *testing.T) {
	for _, replaced := range []bool{false, true} {
		t.Run(fmt.Sprint("replaced=", replaced), func(t *testing.T) {
			old, fixed := &fakeModule{sha: "old"}, &fakeModule{sha: "fixed"}
			var p *policy
			old.fns[host.CallFilter] = func(string) (int64, host.Result, *host.CallError) {
				if replaced {
					p.runtime.(*fakeRuntime).set(fixed) // the reload lands while the call runs
				}
				return 0, host.Result{}, &host.CallError{Outcome: host.OutcomeTimeout}
			}
			p = fakePolicy("p", old, nil)
			r := runCycle(fakePlugin(p), fakeNodes(3))
			st := r.filters["n0"]
			if got, want := p.quarantine.size(), map[bool]int{false: 1, true: 0}[replaced]; got != want {
				t.Fatalf("%d inputs quarantined, want %d (status %v)", got, want, st)
			}
			if got := strings.Contains(st.Message(), "quarantined"); got == replaced {
				t.Fatalf("status %q: mentions a quarantine %v, want %v", st.Message(), got, !replaced)
			}
			if replaced && !strings.Contains(st.Message(), "the module was replaced while the call ran") {
				t.Fatalf("status %q does not say the module was replaced", st.Message())
			}
		})
	}
}
