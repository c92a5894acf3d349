package wasmpolicy

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

// A score outside 0..100 (and no normalize_score) fails the attempt under
// Fail, as an erroring Score plugin does, and counts as 0 under Ignore.
func TestOutOfRangeScore(t *testing.T) {
	path := writeModule(t, t.TempDir(), "big.wasm", fixture(t, "bigreason"))
	nodes := []*v1.Node{node("a", nil, 1000), node("b", nil, 1000)}
	for _, fp := range []config.FailurePolicy{config.FailurePolicyFail, config.FailurePolicyIgnore} {
		t.Run(string(fp), func(t *testing.T) {
			c := newCluster(t, &config.WasmPolicyArgs{Policies: []config.Policy{{Name: "big", Source: config.Source{File: path}, PolicySettings: config.PolicySettings{FailurePolicy: fp}}}}, nodes)
			ctx := context.Background()
			state := intree.NewCycleState()
			infos, _ := c.snapshot.NodeInfos().List()
			p := pod("p", nil, 10)
			if st := c.fw.RunPreScorePlugins(ctx, state, p, infos); !st.IsSuccess() {
				t.Fatal(st)
			}
			scores, st := c.fw.RunScorePlugins(ctx, state, p, infos)
			switch fp {
			case config.FailurePolicyFail:
				if st.IsSuccess() || !strings.Contains(st.Message(), "score out of range 0..100") || !strings.Contains(st.Message(), "WasmPolicy/big") {
					t.Fatalf("status = %v", st)
				}
			case config.FailurePolicyIgnore:
				if !st.IsSuccess() || scores[0].TotalScore != 0 || scores[1].TotalScore != 0 {
					t.Fatalf("status %v, scores %+v; want success with 0", st, scores)
				}
			}
		})
	}
}

// A policy whose module does not fit the memory budget next to the loaded
// ones is refused: a PolicyLoadFailed event on its ConfigMap and the load
// metric name the reason, pods it evaluates are told why (with the arg that
// raises the budget), and the policy that fits keeps serving. The Go
// adversary guest needs about 18 MiB on 2 CPUs (8 MiB of machine code, its
// host heap, and two running instances of 3.7 MiB): more than the smallest
// budget the args allow (16Mi); a TinyGo policy needs under 1 MiB.
func TestMemoryBudgetRefusal(t *testing.T) {
	cm := func(name string, b []byte) *v1.ConfigMap {
		return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "wasmsched"}, BinaryData: map[string][]byte{"policy.wasm": b}}
	}
	src := func(name string) config.Source {
		return config.Source{ConfigMap: &config.ConfigMapSource{Namespace: "wasmsched", Name: name, Key: "policy.wasm"}}
	}
	loads := func(policy, result string) float64 {
		return counterValue(t, "wasmsched_policy_module_loads_total", map[string]string{"policy": policy, "result": result})
	}
	refusedBefore, servedBefore := loads("big", "MemoryBudget"), loads("team", "Success")
	nodes := []*v1.Node{node("a", map[string]string{"team": "payments"}, 1000), node("b", map[string]string{"team": "search"}, 1000)}
	c := newCluster(t, &config.WasmPolicyArgs{MemoryBudget: 16 << 20, Policies: []config.Policy{
		{Name: "team", Source: src("team"), PolicySettings: config.PolicySettings{Config: "key=team"}},
		{Name: "big", Source: src("big"), PolicySettings: config.PolicySettings{FailurePolicy: config.FailurePolicyIgnore}},
	}}, nodes, cm("team", testguests.PolicyBytes(t, testguests.TinyGo, "team-isolation")), cm("big", testguests.PolicyBytes(t, testguests.Go, "testdata/adversary")))

	var refusal string
	for deadline := time.After(60 * time.Second); refusal == ""; {
		select {
		case ev := <-c.recorder.Events:
			if strings.Contains(ev, "PolicyLoadFailed") {
				refusal = ev
			}
		case <-deadline:
			t.Fatal("no PolicyLoadFailed event within 60s")
		}
	}
	for _, want := range []string{"Warning PolicyLoadFailed", "WasmPolicy/big: MemoryBudget", "memory budget of 16.0 MiB", "raise memoryBudget in the WasmPolicy args"} {
		if !strings.Contains(refusal, want) {
			t.Fatalf("event %q does not say %q", refusal, want)
		}
	}
	if got := loads("big", "MemoryBudget"); got != refusedBefore+1 {
		t.Fatalf("MemoryBudget refusals counted %v, want %v", got, refusedBefore+1)
	}
	if got := loads("team", "Success"); got != servedBefore+1 {
		t.Fatalf("team loaded %v times, want %v", got, servedBefore+1)
	}
	// The policy that fits decides (team isolation); the refused one, under
	// failurePolicy Ignore, is skipped.
	f, _, _ := c.schedule(t, pod("p", map[string]string{"team": "payments"}, 100))
	if !f["a"].IsSuccess() || f["b"].IsSuccess() || !strings.Contains(f["b"].Message(), "WasmPolicy/team") {
		t.Fatalf("filter a=%v b=%v, want team isolation by the policy that fits", f["a"], f["b"])
	}
	// Under failurePolicy Fail, the pod is told why the policy has no module.
	c2 := newCluster(t, &config.WasmPolicyArgs{MemoryBudget: 16 << 20, Policies: []config.Policy{
		{Name: "big", Source: src("big")},
	}}, nodes, cm("big", testguests.PolicyBytes(t, testguests.Go, "testdata/adversary")))
	_, _, st := c2.schedule(t, pod("p", map[string]string{"team": "payments"}, 100))
	if st == nil || !strings.Contains(st.Message(), "WasmPolicy/big: policy has no module loaded") || !strings.Contains(st.Message(), "raise memoryBudget") {
		t.Fatalf("status %v, want the refusal and how to raise the budget", st)
	}
}
