package wasmpolicy

import (
	"context"
	"strings"
	"testing"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

// TestPostFilterMessages: what a policy's postfilter adds to the message
// of a pod no node fits, by its result and its failurePolicy and mode. The
// status is Unschedulable whatever the guest says, so the PostFilter
// plugins after WasmPolicy still run.
func TestPostFilterMessages(t *testing.T) {
	says := func(code int32, reason string) guestFunc {
		return func(string) (int64, host.Result, *host.CallError) {
			return 0, host.Result{Code: code, Reason: reason}, nil
		}
	}
	for _, c := range []struct {
		name   string
		fn     guestFunc
		mode   string // "", Ignore or Audit
		reason string // the reason added; "" for none
	}{
		{"success", succeed, "", ""},
		{"skip", says(abi.CodeSkip, "nothing"), "", ""},
		{"unschedulable", says(abi.CodeUnschedulable, "gang g: 3 of 4 fit"), "", "WasmPolicy/p: gang g: 3 of 4 fit"},
		{"unresolvable reads as a message too", says(abi.CodeUnschedulableAndUnresolvable, "no licence left"), "", "WasmPolicy/p: no licence left"},
		{"error under Fail", errorOut, "", "WasmPolicy/p: policy error: no data"},
		{"error under Ignore", errorOut, "Ignore", ""},
		{"timeout under Fail", timeout, "", "WasmPolicy/p: policy call exceeded its timeout of 100ms"},
		{"message in Audit mode", says(abi.CodeUnschedulable, "gang g: 3 of 4 fit"), "Audit", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &fakeModule{}
			m.fns[host.CallFilter] = says(abi.CodeUnschedulable, "no")
			m.fns[host.CallPostFilter] = c.fn
			p := fakePolicy("p", m, func(cfg *config.Policy) {
				switch c.mode {
				case "Ignore":
					cfg.FailurePolicy = config.FailurePolicyIgnore
				case "Audit":
					cfg.Mode = config.ModeAudit
				}
			})
			w := fakePlugin(p)
			ctx, state, nodes := context.Background(), intree.NewCycleState(), fakeNodes(2)
			if _, st := w.PreFilter(ctx, state, fakePod(), nodes); st != nil {
				t.Fatal(st)
			}
			for _, ni := range nodes {
				w.Filter(ctx, state, fakePod(), ni)
			}
			_, st := w.PostFilter(ctx, state, fakePod(), nil)
			if st.Code() != fwk.Unschedulable {
				t.Fatalf("status %v, want Unschedulable", st)
			}
			got := strings.Join(st.Reasons(), "; ")
			if (c.reason == "") != (got == "") || !strings.HasPrefix(got, c.reason) {
				t.Errorf("reasons %q, want %q", got, c.reason)
			}
		})
	}
}

// Explain shows what each postfilter would add when no node fits, and
// nothing when a node does.
func TestExplainPostFilter(t *testing.T) {
	m := &fakeModule{}
	m.fns[host.CallFilter] = func(node string) (int64, host.Result, *host.CallError) {
		if node == "n1" {
			return 0, host.Result{}, nil
		}
		return 0, host.Result{Code: abi.CodeUnschedulable, Reason: "no"}, nil
	}
	m.fns[host.CallPostFilter] = func(string) (int64, host.Result, *host.CallError) {
		return 0, host.Result{Code: abi.CodeUnschedulable, Reason: "gang g: 3 of 4 fit"}, nil
	}
	w := fakePlugin(fakePolicy("p", m, nil))
	ex := w.Explain(context.Background(), fakePod(), fakeNodes(1))
	want := []MessageVerdict{{Policy: "p", Mode: "Enforce", Verdict: "Message", Reason: "gang g: 3 of 4 fit"}}
	if len(ex.PostFilter) != 1 || ex.PostFilter[0] != want[0] {
		t.Errorf("no node fits: postFilter %+v, want %+v", ex.PostFilter, want)
	}
	if ex := w.Explain(context.Background(), fakePod(), fakeNodes(2)); len(ex.PostFilter) != 0 || len(ex.Best) != 1 {
		t.Errorf("n1 fits: postFilter %+v, best %v; want none and n1", ex.PostFilter, ex.Best)
	}
}

// A team's namespaced policy adds its postfilter message to its own
// namespace's pods only, and its postbind sees only them: another team's
// pod that fits nowhere gets no word from it.
func TestPostFilterStaysInItsNamespace(t *testing.T) {
	called := map[host.CallKind]int{}
	m := &fakeModule{}
	m.fns[host.CallFilter] = func(string) (int64, host.Result, *host.CallError) {
		return 0, host.Result{Code: abi.CodeUnschedulable, Reason: "no"}, nil
	}
	m.fns[host.CallPostFilter] = func(string) (int64, host.Result, *host.CallError) {
		called[host.CallPostFilter]++
		return 0, host.Result{Code: abi.CodeUnschedulable, Reason: "team-a says no"}, nil
	}
	w := fakePlugin(fakePolicy("team-a-policy", m, func(c *config.Policy) { c.Scope.Namespace = "team-a" }))
	for _, tc := range []struct {
		ns   string
		want string
	}{{"team-b", ""}, {"team-a", "WasmPolicy/team-a-policy: team-a says no"}} {
		pod := fakePod()
		pod.Namespace = tc.ns
		ctx, state, nodes := context.Background(), intree.NewCycleState(), fakeNodes(1)
		w.PreFilter(ctx, state, pod, nodes)
		w.Filter(ctx, state, pod, nodes[0])
		_, st := w.PostFilter(ctx, state, pod, nil)
		if got := strings.Join(st.Reasons(), "; "); got != tc.want {
			t.Errorf("pod in %s: reasons %q, want %q", tc.ns, got, tc.want)
		}
	}
	if called[host.CallPostFilter] != 1 {
		t.Errorf("postfilter called %d times, want once (for team-a's pod)", called[host.CallPostFilter])
	}
}
