package wasmpolicy

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

// Through the plugin, nodes of one pool share a row (the metric counts
// them) unless the policy's args say verdictReuse: Disabled, and the
// scheduling outcome is the same either way.
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
		for cycle := 0; cycle < 2; cycle++ { // the second runs from the node table
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
		t.Logf("%s: rows evaluated %v, shared %v", reuse, evaluated, shared)
		if reuse == config.VerdictReuseEnabled && (shared < 60 || evaluated+shared != 128) {
			t.Errorf("Enabled: %v evaluated, %v shared; want the second cycle's 64 nodes in 2 rows per batch", evaluated, shared)
		}
		if reuse == config.VerdictReuseDisabled && (shared != 0 || evaluated != 128) {
			t.Errorf("Disabled: %v evaluated, %v shared; want every node evaluated", evaluated, shared)
		}
	}
}
