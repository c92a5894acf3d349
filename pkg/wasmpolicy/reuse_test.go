package wasmpolicy

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

// Through the plugin, nodes of one pool share a row and a later pod of the
// same template takes the remembered verdicts (the metric counts both),
// unless the policy's args say verdictReuse: Disabled; the scheduling
// outcome is the same either way.
func TestVerdictReuseSetting(t *testing.T) {
	var nodes []*v1.Node
	for i := 0; i < 64; i++ {
		nodes = append(nodes, node(fmt.Sprintf("n%02d", i), map[string]string{"team": []string{"a", "b"}[i%2]}, 4000))
	}
	team := testguests.Policy(t, testguests.TinyGo, "team-isolation")
	for _, reuse := range []config.VerdictReuse{config.VerdictReuseEnabled, config.VerdictReuseDisabled} {
		name := "team-reuse-" + strings.ToLower(string(reuse))
		c := newCluster(t, &config.WasmPolicyArgs{Policies: []config.Policy{
			{Name: name, Source: config.Source{File: team}, PolicySettings: config.PolicySettings{Config: "key=team", VerdictReuse: reuse}},
		}}, nodes)
		for cycle := 0; cycle < 3; cycle++ { // the second and third run from the node table
			filters, _, st := c.schedule(t, pod(fmt.Sprintf("p%d", cycle), map[string]string{"team": "a"}, 100))
			if st != nil {
				t.Fatal(st)
			}
			for i, n := range nodes {
				if ok := filters[n.Name].IsSuccess(); ok != (i%2 == 0) {
					t.Fatalf("%s, cycle %d: %s (team %s): %v", reuse, cycle, n.Name, n.Labels["team"], filters[n.Name])
				}
			}
		}
		evaluated := counterValue(t, "wasmsched_policy_rows_total", map[string]string{"policy": name, "result": "evaluated"})
		shared := counterValue(t, "wasmsched_policy_rows_total", map[string]string{"policy": name, "result": "shared"})
		remembered := counterValue(t, "wasmsched_policy_rows_total", map[string]string{"policy": name, "result": "remembered"})
		t.Logf("%s: rows evaluated %v, shared %v, remembered %v", reuse, evaluated, shared, remembered)
		// Enabled: the first cycle's first batch shows the SDK the column
		// (32 evaluated), its second batch has 2 distinct rows (2
		// evaluated, 30 shared). The second cycle's pod is of the same
		// template, met for the second time: the memo takes its first
		// batch (2 evaluated, 30 shared) and answers its second (32
		// remembered); the third cycle's 64 nodes are all remembered.
		if reuse == config.VerdictReuseEnabled && (evaluated != 36 || shared != 60 || remembered != 96) {
			t.Errorf("Enabled: %v evaluated, %v shared, %v remembered; want 36, 60, 96", evaluated, shared, remembered)
		}
		if reuse == config.VerdictReuseDisabled && (shared != 0 || remembered != 0 || evaluated != 192) {
			t.Errorf("Disabled: %v evaluated, %v shared, %v remembered; want every node evaluated", evaluated, shared, remembered)
		}
	}
}
