package host

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

// A batch call gives every node the full timeout, stops a loop on one node
// within timeout + 10ms of that node's start (median of deadlineRuns runs),
// and keeps the verdicts of the nodes evaluated before it.
func TestBatchDeadlinePerNode(t *testing.T) {
	const timeout = 50 * time.Millisecond
	p := newPolicy(t, newEngine(t), PolicySpec{Timeout: timeout, MaxInstances: 1})
	v := load(t, p, testguests.Fixture(t, "loop"))
	if !v.Exports().Has(abi.FilterNodes) {
		t.Fatal("filter_nodes not detected")
	}
	nodes := []fwk.NodeInfo{nodeInfo("a", nil, false), nodeInfo("b", nil, false), nodeInfo("c", nil, true), nodeInfo("d", nil, false)}
	results := make([]Result, len(nodes))
	var o overruns
	for run := 0; run < deadlineRuns; run++ {
		start := time.Now()
		done, err := v.CallNodes(context.Background(), CallFilter, testPod(), nodes, new(PolicyCycle), results, nil)
		o.add(time.Since(start), timeout)
		if err == nil || err.Outcome != OutcomeTimeout || done != 2 {
			t.Fatalf("done=%d err=%v; want a timeout at node 2", done, err)
		}
		if results[0].Code != 0 || results[1].Code != 0 {
			t.Fatalf("results before the failing node = %+v", results[:2])
		}
		// The instance was replaced; a batch without the looping node succeeds.
		if done, err := v.CallNodes(context.Background(), CallFilter, testPod(), nodes[:2], new(PolicyCycle), results[:2], nil); err != nil || done != 2 {
			t.Fatalf("next batch: done=%d err=%v", done, err)
		}
	}
	o.check(t, "batch stopped")
}

// Batch and single calls of the real TinyGo and Go team-isolation guests agree.
func TestBatchMatchesSingleCalls(t *testing.T) {
	for _, tc := range testguests.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			p := newPolicy(t, newEngine(t), PolicySpec{Config: "key=team", Timeout: time.Second})
			v := load(t, p, testguests.PolicyBytes(t, tc, "team-isolation"))
			if !v.Exports().Has(abi.FilterNodes) || v.Exports().Has(abi.ScoreNodes) {
				t.Fatalf("exports = %s, want filter and filter_nodes only", v.Exports())
			}
			pod := NewPodState(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p", Labels: map[string]string{"team": "a"}}})
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
