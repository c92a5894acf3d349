package wasmpolicy

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

// A policy that floods its stdout is rate-limited, and /metrics counts
// what was dropped under the policy's name.
func TestSuppressedOutputMetric(t *testing.T) {
	flood := writeModule(t, t.TempDir(), "flood.wasm", fixture(t, "logflood"))
	c := newCluster(t, &config.WasmPolicyArgs{Policies: []config.Policy{
		{Name: "flood", Source: config.Source{File: flood}},
	}}, []*v1.Node{node("a", nil, 1000), node("b", nil, 1000)})
	if _, _, st := c.schedule(t, pod("p", nil, 10)); st != nil {
		t.Fatal(st)
	}
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "wasmsched_policy_output_lines_suppressed_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				// Each Filter call writes 65,536 lines; at most the burst pass.
				if l.GetName() == "policy" && l.GetValue() == "flood" && m.GetCounter().GetValue() >= 65536 {
					return
				}
			}
		}
		t.Fatalf("no suppressed count for policy flood in %v", f)
	}
	t.Fatal("wasmsched_policy_output_lines_suppressed_total is not exposed")
}
