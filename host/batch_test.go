package host

import (
	"context"
	"fmt"
	"testing"
	"time"

	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

// Batch and single calls of the real TinyGo and Go team-isolation guests agree.
func TestBatchMatchesSingleCalls(t *testing.T) {
	for _, tc := range testguests.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			p := newPolicy(t, newEngine(t), PolicySpec{Config: "key=team", Timeout: time.Second})
			v := load(t, p, testguests.PolicyBytes(t, tc, "team-isolation"))
			if !v.Exports().Has(abi.FilterNodes) || v.Exports().Has(abi.ScoreNodes) {
				t.Fatalf("exports = %s, want filter and filter_nodes only", v.Exports())
			}
			pod := NewPodState(st.MakePod().Name("p").UID("p").Labels(map[string]string{"team": "a"}).Obj())
			var nodes []fwk.NodeInfo
			for i := 0; i < 70; i++ {
				labels := map[string]string{}
				switch i % 3 {
				case 0:
					labels["team"] = "a"
				case 1:
					labels["team"] = "b"
				}
				nodes = append(nodes, nodeInfo(fmt.Sprintf("n%d", i), labels, false))
			}
			results := make([]Result, len(nodes))
			if done, err := v.CallNodes(context.Background(), CallFilter, pod, nodes, new(PolicyCycle), results, nil); err != nil || done != len(nodes) {
				t.Fatalf("done=%d err=%v", done, err)
			}
			for i, ni := range nodes {
				_, single, err := v.Call(context.Background(), CallFilter, pod, ni, new(PolicyCycle), nil)
				if err != nil {
					t.Fatal(err)
				}
				if single != results[i] {
					t.Fatalf("node %d: batch %+v, single %+v", i, results[i], single)
				}
			}
			if results[0].Code != 0 || results[1].Reason != "team label mismatch" || results[2].Code != abi.CodeUnschedulable {
				t.Fatalf("results = %+v", results[:3])
			}
		})
	}
}
