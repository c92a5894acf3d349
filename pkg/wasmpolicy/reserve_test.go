package wasmpolicy

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

// reserveFixture is the host's counters fixture (host/testdata/reserve.wat).
func reserveFixture(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "host", "testdata", "reserve.wasm"))
	if err != nil {
		t.Fatalf("%v (run `make fixtures` after editing a .wat file)", err)
	}
	return b
}

// licencePod is a pod of product matlab taking one seat.
func licencePod(name string, labels map[string]string) *v1.Pod {
	l := map[string]string{"licence.wasmsched.io/product": "matlab"}
	maps.Copy(l, labels)
	return pod(name, l, 100)
}

// TestReserveCountsAndGivesBack runs licence-count (matlab=2) through the
// framework's PreFilter, Reserve and Unreserve, beside a policy whose
// unreserve traps (host/testdata/reserve.wat, which takes a "seats" count
// for every pod and refuses pods labelled then=refuse). Seats are taken at
// Reserve and given back when the placement is undone, whatever the other
// policy's unreserve does, and when the pod is deleted or finishes.
func TestReserveCountsAndGivesBack(t *testing.T) {
	for _, tc := range testguests.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			dir := t.TempDir()
			trappy := writeModule(t, dir, "reserve.wasm", reserveFixture(t))
			c := newCluster(t, &config.WasmPolicyArgs{Policies: []config.Policy{
				{Name: "licence", Source: config.Source{File: testguests.Policy(t, tc, "licence-count")}, PolicySettings: config.PolicySettings{Config: "matlab=2"}},
				{Name: "trappy", Source: config.Source{File: trappy}},
			}}, []*v1.Node{node("n1", nil, 4000)})
			ctx := context.Background()
			counts := func(step, policy string, want map[string]int64) {
				t.Helper()
				if got := c.plugin.Counters(policy).Counts(); !maps.Equal(got, want) {
					t.Fatalf("after %s: %s's counts %v, want %v", step, policy, got, want)
				}
			}
			place := func(p *v1.Pod) (fwk.CycleState, *fwk.Status) {
				t.Helper()
				s := intree.NewCycleState()
				if _, st, _ := c.fw.RunPreFilterPlugins(ctx, s, p); !st.IsSuccess() {
					return s, st
				}
				return s, c.fw.RunReservePluginsReserve(ctx, s, p, "n1")
			}
			m1, m2, m3 := licencePod("m1", nil), licencePod("m2", nil), licencePod("m3", nil)
			if _, st := place(m1); !st.IsSuccess() {
				t.Fatal(st)
			}
			s2, st := place(m2)
			if !st.IsSuccess() {
				t.Fatal(st)
			}
			counts("m1 and m2 reserved", "licence", map[string]int64{"matlab": 2})
			counts("m1 and m2 reserved", "trappy", map[string]int64{"seats": 2})
			if _, st := place(m3); st.IsSuccess() || !strings.Contains(st.Message(), "licence matlab: 1 seat(s) wanted, 2 of 2 in use") {
				t.Fatalf("m3 with both seats taken: %v, want licence-count's rejection", st)
			}

			// Undo m2's placement: trappy's unreserve traps, and both
			// policies' counts for m2 are given back all the same.
			c.fw.RunReservePluginsUnreserve(ctx, s2, m2, "n1")
			counts("m2 undone", "licence", map[string]int64{"matlab": 1})
			counts("m2 undone", "trappy", map[string]int64{"seats": 1})
			if _, st := place(m3); !st.IsSuccess() {
				t.Fatalf("m3 once m2's seat is back: %v", st)
			}

			// A refusal by a later policy: the framework undoes the
			// placement, and the seat licence-count took comes back.
			c.plugin.podDeleted(m1)
			counts("m1 deleted", "licence", map[string]int64{"matlab": 1})
			m4 := licencePod("m4", map[string]string{"then": "refuse"})
			s4, st := place(m4)
			if st.IsSuccess() || !strings.Contains(st.Message(), "WasmPolicy/trappy") {
				t.Fatalf("m4: %v, want trappy's refusal", st)
			}
			counts("m4 refused by trappy", "licence", map[string]int64{"matlab": 2})
			c.fw.RunReservePluginsUnreserve(ctx, s4, m4, "n1")
			counts("m4 undone", "licence", map[string]int64{"matlab": 1})
			counts("m4 undone", "trappy", map[string]int64{"seats": 1})

			done := m3.DeepCopy()
			done.Status.Phase = v1.PodSucceeded
			c.plugin.podFinished(m3, done)
			counts("m3 finished", "licence", map[string]int64{})
			counts("m3 finished", "trappy", map[string]int64{})
		})
	}
}

// A team's namespaced policy with a reserve refuses and counts only its
// own namespace's pods: another team's pod labelled the same is placed,
// and its counts are the team's alone.
func TestReserveStaysInItsNamespace(t *testing.T) {
	trappy := writeModule(t, t.TempDir(), "reserve.wasm", reserveFixture(t))
	c := newCluster(t, &config.WasmPolicyArgs{Policies: []config.Policy{
		{Name: "team-a-policy", Source: config.Source{File: trappy}, Scope: config.Scope{Namespace: "team-a"}},
	}}, []*v1.Node{node("n1", nil, 4000)})
	ctx := context.Background()
	for _, tc := range []struct {
		ns     string
		refuse bool
	}{{"team-b", false}, {"team-a", true}} {
		p := pod("p-"+tc.ns, map[string]string{"then": "refuse"}, 100)
		p.Namespace = tc.ns
		s := intree.NewCycleState()
		if _, st, _ := c.fw.RunPreFilterPlugins(ctx, s, p); !st.IsSuccess() {
			t.Fatal(st)
		}
		st := c.fw.RunReservePluginsReserve(ctx, s, p, "n1")
		if refused := !st.IsSuccess(); refused != tc.refuse {
			t.Errorf("pod in %s: reserve %v, want refused %v", tc.ns, st, tc.refuse)
		}
	}
	if got := c.plugin.Counters("team-a-policy").Counts(); len(got) != 0 {
		t.Errorf("team-a's counts %v: its refused reserve keeps nothing, and team-b's pod is not its to count", got)
	}
}
