package host

import (
	"context"
	"os"
	"strings"
	"testing"

	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

func teamPod(team string) *PodState {
	return NewPodState(st.MakePod().Name("p").Namespace("default").UID("uid-t").Labels(map[string]string{"team": team}).Obj())
}

func filterNodes(t *testing.T, v *Version, pod *PodState, nodes ...fwk.NodeInfo) []Result {
	t.Helper()
	results := make([]Result, len(nodes))
	if _, err := v.CallNodes(context.Background(), CallFilter, pod, nodes, new(PolicyCycle), results, nil); err != nil {
		t.Fatal(err)
	}
	return results
}

// The WAT example of docs/abi.md §3.2 is this fixture, and it does what the
// page says: a v2 guest reads the team label's id from its table, compares
// it with the pod's, and writes verdicts and a registered reason into the
// rows, with no host call per node. Rows follow the node's generation.
func TestNodeTableDocExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/abi.md")
	if err != nil {
		t.Fatal(err)
	}
	fixture, err := os.ReadFile("testdata/tablev2.wat")
	if err != nil {
		t.Fatal(err)
	}
	_, example, _ := strings.Cut(string(doc), "Minimal WAT, the team-isolation check")
	_, example, _ = strings.Cut(example, "```wat\n")
	example, _, _ = strings.Cut(example, "```\n")
	if !strings.HasSuffix(string(fixture), example) || len(example) < 200 {
		t.Fatal("testdata/tablev2.wat is not docs/abi.md §3.2's example: keep them the same")
	}

	v := load(t, newPolicy(t, newEngine(t), PolicySpec{MaxInstances: 1}), testguests.Fixture(t, "tablev2"))
	if v.ABIVersion() != 2 {
		t.Fatalf("ABI version %d, want 2", v.ABIVersion())
	}
	a, b, none := nodeInfo("a", map[string]string{"team": "a"}, false), nodeInfo("b", map[string]string{"team": "b"}, false), nodeInfo("c", nil, false)
	for round := 0; round < 2; round++ { // the second round copies cached rows
		got := filterNodes(t, v, teamPod("a"), a, b, none)
		want := []Result{{}, {Code: abi.CodeUnschedulable, Reason: "team label mismatch"}, {Code: abi.CodeUnschedulable, Reason: "team label mismatch"}}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("round %d, node %d: %+v, want %+v", round, i, got[i], want[i])
			}
		}
	}
	if n := v.TableBatches(); n != 2 {
		t.Errorf("%d batches from the table, want 2", n)
	}
	// Node b joins team a: a new NodeInfo generation, a new row.
	b2 := nodeInfo("b", map[string]string{"team": "a"}, false)
	if got := filterNodes(t, v, teamPod("a"), b2); got[0] != (Result{}) {
		t.Errorf("node b relabelled team=a: %+v, want Success", got[0])
	}
	// A pod of no team matches only the node without the label.
	if got := filterNodes(t, v, NewPodState(st.MakePod().Name("q").UID("q").Obj()), a, none); got[0].Code != abi.CodeUnschedulable || got[1].Code != abi.CodeSuccess {
		t.Errorf("pod without a team: %+v", got)
	}
}

// A version 1 guest runs as it always did, even one that calls node_table:
// the host never fills its table (the fixture traps if it does), and the
// verdicts come from select_node and set_status.
func TestABIv1GuestsUnchanged(t *testing.T) {
	v := load(t, newPolicy(t, newEngine(t), PolicySpec{MaxInstances: 1}), testguests.Fixture(t, "tablev1"))
	if v.ABIVersion() != 1 {
		t.Fatalf("ABI version %d, want 1", v.ABIVersion())
	}
	got := filterNodes(t, v, teamPod("a"), nodeInfo("a", nil, false), nodeInfo("b", nil, false), nodeInfo("c", nil, false))
	if got[0] != (Result{}) || got[1] != (Result{Code: abi.CodeUnschedulable, Reason: "v1 rejects node 1"}) || got[2].Code != abi.CodeError || !strings.Contains(got[2].Reason, "without selecting node 2") {
		t.Errorf("verdicts %+v", got)
	}
	if n := v.TableBatches(); n != 0 {
		t.Errorf("%d batches of a version 1 guest from a table", n)
	}
}
