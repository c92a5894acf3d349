package policies

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/casetest"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
	"github.com/wasmsched/wasmsched/pkg/casetable"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

// ManyPolicies is how many policies of each toolchain TestManyPoliciesInOnePlugin
// hosts: the acceptance mix of issue 22 (200 TinyGo and 40 Go policies).
var ManyPolicies = map[testguests.Toolchain]int{testguests.TinyGo: 200, testguests.Go: 40}

// manyPolicy is one generated policy: a copy of an example with a distinct
// config (the example's config plus a key the example ignores).
type manyPolicy struct {
	name    string
	example string
	cfg     config.Policy
}

// generateManyPolicies spreads counts[tc] policies of each toolchain over
// the examples, round robin.
func generateManyPolicies(t *testing.T, root string, counts map[testguests.Toolchain]int) ([]manyPolicy, map[string]*casetest.File) {
	tables := map[string]*casetest.File{}
	for _, name := range testguests.Policies {
		f, err := casetest.Load(filepath.Join(root, "plugins-wasm", name, "testdata.json"))
		if err != nil {
			t.Fatal(err)
		}
		tables[name] = f
	}
	var out []manyPolicy
	for _, tc := range testguests.Toolchains {
		for i := 0; i < counts[tc]; i++ {
			ex := testguests.Policies[i%len(testguests.Policies)]
			name := fmt.Sprintf("%s-%s-%d", strings.ToLower(string(tc)), ex, i)
			pc := configv1.DefaultPolicy(name, config.Source{File: testguests.Policy(t, tc, ex)})
			pc.Config = tables[ex].Config + ",copy=" + strconv.Itoa(i)
			pc.Reads = tables[ex].Reads
			pc.PatchPrefixes = tables[ex].PatchPrefixes
			pc.Timeout = 5 * time.Second // a loaded CI machine must not time out a healthy call
			pc.CycleBudget = 2 * pc.Timeout
			out = append(out, manyPolicy{name: name, example: ex, cfg: pc})
		}
	}
	return out, tables
}

// One plugin hosts 200 TinyGo and 40 Go policies (distinct configs of the
// examples) under the default memory budget, and every one of them
// evaluates its example's case table as the example's own test expects:
// sharing compiled modules, creating instances on demand and closing idle
// ones under the budget change no verdict and no score.
func TestManyPoliciesInOnePlugin(t *testing.T) {
	root, err := testguests.Root()
	if err != nil {
		t.Fatal(err)
	}
	gen, tables := generateManyPolicies(t, root, ManyPolicies)
	var policies []config.Policy
	for _, g := range gen {
		policies = append(policies, g.cfg)
	}
	args := configv1.DefaultArgs(policies...)
	args.CompilationCacheDir = t.TempDir()
	start := time.Now()
	w, err := wasmpolicy.NewWithArgs(context.Background(), args, nil, wasmpolicy.WithInitialLoadTimeout(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if missing := w.Unloaded(); len(missing) > 0 {
		t.Fatalf("%d policies did not load: %s", len(missing), strings.Join(missing, "; "))
	}
	t.Logf("%d policies loaded cold in %s; memory budget %+v; peak RSS %s", len(gen), time.Since(start).Round(time.Millisecond), w.MemoryUse(), peakRSS())

	byExample := map[string][]string{}
	for _, g := range gen {
		byExample[g.example] = append(byExample[g.example], g.name)
	}
	checked, scored := 0, 0
	for _, ex := range testguests.Policies {
		if slices.Contains(tables[ex].Reads, "Cluster") || slices.Contains(tables[ex].Reads, "Devices") {
			// Its cases each bring a cluster (counts over nodes other than
			// the case's, or the pod's DRA claims and the nodes' devices),
			// which one Explain per case node cannot give it;
			// TestExamplePoliciesAsWasm runs its table with the clusters.
			continue
		}
		for _, c := range tables[ex].Cases {
			if len(c.Reserved) > 0 {
				// Counts other pods hold, which Explain alone cannot
				// place; TestExamplePoliciesAsWasm reserves them.
				continue
			}
			ni, err := casetable.NodeInfo(c.Node)
			if err != nil {
				t.Fatal(err)
			}
			pod, err := casetable.Pod(c.Pod)
			if err != nil {
				t.Fatal(err)
			}
			x := w.Explain(context.Background(), pod, []fwk.NodeInfo{ni})
			verdicts := map[string]wasmpolicy.PolicyVerdict{}
			for _, v := range x.Nodes[0].Policies {
				verdicts[v.Policy] = v
			}
			for _, name := range byExample[ex] {
				v, ok := verdicts[name]
				if !ok {
					t.Fatalf("%s: no verdict from %s", c.Name, name)
				}
				if c.Filter != nil {
					if got := verdictCode(v.Verdict); got != c.Filter.Code || (c.Filter.Reason != "" && v.Reason != c.Filter.Reason) {
						t.Errorf("%s, case %q: filter %s %q, want code %d %q", name, c.Name, v.Verdict, v.Reason, c.Filter.Code, c.Filter.Reason)
					}
				}
				// A scheduling cycle never scores a node the policy's own
				// filter rejects (the case's filter verdict is checked
				// above); every other scored case must be scored.
				rejects := c.Filter != nil && c.Filter.Code != abi.CodeSuccess
				if c.Score != nil && !rejects {
					if !x.Nodes[0].Feasible {
						t.Fatalf("%s, case %q: the node is infeasible (%s), so its score cannot be checked", name, c.Name, x.Nodes[0].Reason)
					}
					if v.RawScore == nil || *v.RawScore != *c.Score {
						t.Errorf("%s, case %q: score %v, want %d", name, c.Name, v.RawScore, *c.Score)
					}
					scored++
				}
				checked++
			}
		}
	}
	t.Logf("%d policy × case verdicts checked (%d scores); memory budget after: %+v; peak RSS %s", checked, scored, w.MemoryUse(), peakRSS())
}

// verdictCode maps an explained verdict back to the ABI code a direct
// filter call returns (a policy that skips the pod admits every node).
func verdictCode(v string) int32 {
	switch v {
	case "Unschedulable":
		return abi.CodeUnschedulable
	case "UnschedulableAndUnresolvable":
		return abi.CodeUnschedulableAndUnresolvable
	}
	return abi.CodeSuccess
}

// peakRSS is the process's peak resident set (VmHWM), for the log.
func peakRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			return strings.Join(strings.Fields(strings.TrimPrefix(l, "VmHWM:")), " ")
		}
	}
	return "unknown"
}
