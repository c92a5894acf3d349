package host

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
	"github.com/wasmsched/wasmsched/host/internal/hostabi"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

// The tests in this file pin the answers docs/abi.md gives to the questions
// a guest author asks (§3, §3.1, §4): each fails if the host changes one.
// The fixture semantics.wat does what its config's first byte says.

func semantics(t *testing.T, mode string) *Version {
	t.Helper()
	p := newPolicy(t, newEngine(t), PolicySpec{Config: mode})
	return load(t, p, testguests.Fixture(t, "semantics"))
}

func someNodes(n int) []fwk.NodeInfo {
	nodes := make([]fwk.NodeInfo, n)
	for i := range nodes {
		nodes[i] = nodeInfo(fmt.Sprintf("n%d", i), nil, false)
	}
	return nodes
}

func callNodes(t *testing.T, v *Version, kind CallKind, pod *PodState, n int) ([]Result, []int64) {
	t.Helper()
	results, scores := make([]Result, n), make([]int64, n)
	if kind != CallScore {
		scores = nil
	}
	for i := range scores {
		scores[i] = 99 // whatever the caller left there must not leak out
	}
	done, err := v.CallNodes(context.Background(), kind, pod, someNodes(n), new(PolicyCycle), results, scores)
	if err != nil || done != n {
		t.Fatalf("CallNodes: done=%d err=%v", done, err)
	}
	return results, scores
}

// §3.1: a node the guest selects and does not reject passes; a node it
// never selects gets an Error verdict naming it, so failurePolicy decides.
func TestBatchUnselectedNodesAreErrors(t *testing.T) {
	results, _ := callNodes(t, semantics(t, "u"), CallFilter, testPod(), 3)
	if results[0] != (Result{}) {
		t.Errorf("selected node 0 = %+v, want Success", results[0])
	}
	for i := 1; i < 3; i++ {
		want := fmt.Sprintf("filter_nodes returned without selecting node %d (n%d)", i, i)
		if results[i].Code != abi.CodeError || results[i].Reason != want {
			t.Errorf("unselected node %d = %+v, want Error %q", i, results[i], want)
		}
	}
}

// §3.1: set_status before the first select_node is every node's status; after
// select_node it is the current node's.
func TestBatchStatusBeforeSelectAppliesToEveryNode(t *testing.T) {
	results, _ := callNodes(t, semantics(t, "w"), CallFilter, testPod(), 3)
	want := []Result{{Code: 2, Reason: "whole batch"}, {Code: 3, Reason: "node one"}, {Code: 2, Reason: "whole batch"}}
	for i := range want {
		if results[i] != want[i] {
			t.Errorf("node %d = %+v, want %+v", i, results[i], want[i])
		}
	}
}

// §3: the reason is copied when set_status is called, so a guest may reuse
// its buffer right after (single and batch forms).
func TestReasonIsCopiedAtSetStatus(t *testing.T) {
	v := semantics(t, "r")
	if r, err := filter(v, nodeInfo("n", nil, false)); err != nil || r != (Result{Code: 2, Reason: "first"}) {
		t.Errorf("filter = %+v, %v; want Unschedulable \"first\"", r, err)
	}
	results, _ := callNodes(t, v, CallFilter, testPod(), 2)
	for i, r := range results {
		if r != (Result{Code: 2, Reason: "first"}) {
			t.Errorf("filter_nodes node %d = %+v, want Unschedulable \"first\"", i, r)
		}
	}
}

// §3.1 and §4.5, score_nodes: select_node(n) and scores_set with a count
// other than n answer -2 (the fixture traps otherwise); scores_get counts
// n; set_status applies to the current node; scores_set reports all n.
func TestScoreNodesContract(t *testing.T) {
	results, scores := callNodes(t, semantics(t, "s"), CallScore, testPod(), 4)
	for i := range results {
		want := Result{}
		if i == 1 {
			want = Result{Code: 2, Reason: "n1"}
		}
		if results[i] != want {
			t.Errorf("node %d = %+v, want %+v", i, results[i], want)
		}
		if scores[i] != int64(10*i) {
			t.Errorf("node %d score = %d, want %d", i, scores[i], 10*i)
		}
	}
}

// §3.1: score_nodes that returns without scores_set gives every node an
// Error (never a silent score of 0).
func TestScoreNodesWithoutScoresSetIsAnError(t *testing.T) {
	results, scores := callNodes(t, semantics(t, "n"), CallScore, testPod(), 3)
	for i, r := range results {
		if r.Code != abi.CodeError || !strings.Contains(r.Reason, "without reporting its scores with scores_set") || scores[i] != 0 {
			t.Errorf("node %d = %+v score %d, want Error about scores_set and score 0", i, r, scores[i])
		}
	}
}

// §3: cycle is never 0, is the same for every call (single or batch) about
// one pod's cycle, and differs between cycles.
func TestCycleArgument(t *testing.T) {
	v := semantics(t, "c")
	seen := map[uint64]bool{}
	for range 3 {
		pod := testPod()
		s, _, err := v.Call(context.Background(), CallScore, pod, nodeInfo("n", nil, false), new(PolicyCycle), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, scores := callNodes(t, v, CallScore, pod, 2)
		if s == 0 || uint64(s) != pod.Cycle || scores[0] != s || scores[1] != s {
			t.Fatalf("cycle: score %d, score_nodes %v, pod cycle %d: want one non-zero value", s, scores, pod.Cycle)
		}
		if seen[pod.Cycle] {
			t.Fatalf("cycle %d repeated", pod.Cycle)
		}
		seen[pod.Cycle] = true
	}
}

// §4: keys and values have no host limit below Kubernetes' own: a 200 KiB
// annotation (Kubernetes allows 256 KiB for all of a pod's annotations) is
// returned whole, and a 70000-byte key is an ordinary miss (-1), not BadArgs.
func TestKeyAndValueLimits(t *testing.T) {
	big := strings.Repeat("v", 200<<10)
	pod := NewPodState(st.MakePod().Name("p").UID("u").Annotations(map[string]string{"big": big}).Obj())
	score := func(mode string) int64 {
		s, _, err := semantics(t, mode).Call(context.Background(), CallScore, pod, nodeInfo("n", nil, false), new(PolicyCycle), nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if got := score("k"); got != int64(len(big)) {
		t.Errorf("pod_annotation of a 200 KiB value = %d, want %d", got, len(big))
	}
	// cap 0 is a size probe: the buffer is not touched (here it is not
	// even inside memory), the length is returned.
	if got := score("p"); got != int64(len(big)) {
		t.Errorf("pod_annotation with cap 0 and a buffer outside memory = %d, want the length %d", got, len(big))
	}
	if got := score("l"); got != int64(abi.NotFound) {
		t.Errorf("pod_label with a 70000-byte key = %d, want %d (NotFound)", got, abi.NotFound)
	}
	// Cycle state: 1 MiB is kept; more is ignored and the state stays.
	if got := score("y"); got != MaxCycleStateSize {
		t.Errorf("cycle state of 1 MiB: get reports %d bytes, want %d", got, MaxCycleStateSize)
	}
	if got := score("x"); got != 16 {
		t.Errorf("cycle state of 1 MiB + 1 after 16 bytes: get reports %d bytes, want 16 (unchanged)", got)
	}
}

// §1: exports outside the ABI (what clang and Rust add, or the author's own
// functions) are allowed and ignored.
func TestExtraExportsAreAllowed(t *testing.T) {
	v := semantics(t, "")
	want := abi.PreFilter.Cap() | abi.Filter.Cap() | abi.FilterNodes.Cap() | abi.Score.Cap() | abi.ScoreNodes.Cap() | abi.NormalizeScore.Cap()
	if v.Exports().Points != want {
		t.Fatalf("exports = %s, want prefilter, filter, score, their batch forms and normalize_score", v.Exports())
	}
}

// §2: a module's initial memory above memoryLimit is refused at load, naming
// the limit; a declared maximum below memoryLimit holds (memory.grow past
// it returns -1).
func TestMemoryDeclarations(t *testing.T) {
	p := newPolicy(t, newEngine(t), PolicySpec{})
	_, err := p.Load(context.Background(), testguests.Fixture(t, "bigmem"), "")
	if err == nil || !strings.Contains(err.Error(), "min 2000 pages (125 Mi) over limit of 1024 pages (64 Mi)") || !strings.Contains(err.Error(), "memoryLimit") {
		t.Fatalf("initial memory over the limit: %v", err)
	}
	v := load(t, newPolicy(t, newEngine(t), PolicySpec{}), testguests.Fixture(t, "maxmem"))
	s, _, cerr := v.Call(context.Background(), CallScore, testPod(), nodeInfo("n", nil, false), new(PolicyCycle), nil)
	if cerr != nil || s != -1000+1 {
		t.Fatalf("score = %d, %v; want -1 (grow past the declared maximum) * 1000 + 1 (the size before growing to it)", s, cerr)
	}
}

// §4.3: a resource the node does not report in status.allocatable is
// missing (i64 min; the SDK's -1), not 0, also for cpu, memory,
// ephemeral-storage and pods, which NodeInfo keeps as plain numbers; one
// reported as 0 is 0. node_list(allocatable) lists only what is reported.
func TestAllocatableMissingIsNotZero(t *testing.T) {
	node := func(alloc v1.ResourceList) fwk.NodeInfo {
		ni := nodeInfo("n", nil, false)
		n := ni.Node().DeepCopy()
		n.Status.Allocatable = alloc
		ni.SetNode(n)
		return ni
	}
	call := func(mode string, ni fwk.NodeInfo) (int64, *Version) {
		v := semantics(t, mode)
		s, _, err := v.Call(context.Background(), CallScore, testPod(), ni, new(PolicyCycle), nil)
		if err != nil {
			t.Fatal(err)
		}
		return s, v
	}
	memOnly := node(v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")})
	if got, _ := call("a", memOnly); got != abi.MissingQuantity {
		t.Errorf("allocatable cpu of a node that reports none = %d, want i64 min (missing)", got)
	}
	if got, _ := call("a", node(v1.ResourceList{v1.ResourceCPU: resource.MustParse("0")})); got != 0 {
		t.Errorf("allocatable cpu of a node that reports 0 = %d, want 0", got)
	}
	if got, _ := call("a", node(v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m")})); got != 1500 {
		t.Errorf("allocatable cpu of 1500m = %d, want 1500", got)
	}
	n, v := call("m", memOnly)
	in := <-v.idle
	defer func() { v.idle <- in }()
	b, _ := in.mod.Memory().Read(8192, uint32(n))
	if want := model.EncodeInts(map[string]int64{"memory": 1 << 30}); string(b) != string(want) {
		t.Errorf("node_list(allocatable) = %q, want only memory: %q", b, want)
	}
}

// §4 and docs/security.md: reads beyond the pod and the node being
// evaluated need a declaration in the policy's args. Undeclared, they
// answer NotDeclared (-4) and the first of each scope is logged with the
// fix; declared, they answer.
func TestUndeclaredReadsAreRefused(t *testing.T) {
	logs := testguests.CaptureKlog(t)
	score := func(mode string, reads ...string) int64 {
		p := newPolicy(t, newEngine(t), PolicySpec{Name: "nosy", Config: mode, Reads: reads})
		v := load(t, p, testguests.Fixture(t, "semantics"))
		s, _, err := v.Call(context.Background(), CallScore, testPod(), nodeInfo("n", nil, false), new(PolicyCycle), nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if got := score("d"); got != int64(abi.NotDeclared) {
		t.Errorf("pod_object undeclared = %d, want -4", got)
	}
	if got := score("e"); got != 2*int64(abi.NotDeclared) {
		t.Errorf("node_list(NodePods) undeclared, twice = %d, want -8", got)
	}
	if got := score("d", "WholeObjects"); got <= 0 {
		t.Errorf("pod_object declared = %d, want its length", got)
	}
	if got := score("e", "NodePods"); got != 8 { // two empty lists: a 4-byte count each
		t.Errorf("node_list(NodePods) declared, twice = %d, want 8", got)
	}
	out := logs.String()
	for _, want := range []string{`policy="nosy" read="pod_object(0)" fix="declare WholeObjects in policies[].reads to use Pod.Object"`, `policy="nosy" read="node_list(9)" fix="declare NodePods in policies[].reads to use Node.Pods"`} {
		if strings.Count(out, want) != 1 {
			t.Errorf("want one log line with %s, log:\n%s", want, out)
		}
	}
}

// §3: in normalize_score, select_node(i) makes the node of score i current
// (PolicyCycle.Scored); without scored nodes it answers -2 as before.
func TestNormalizeScoreSelectsScoredNodes(t *testing.T) {
	v := semantics(t, "z")
	nodes := []fwk.NodeInfo{nodeInfo("a", nil, false), nodeInfo("bbb", nil, false), nodeInfo("cc", nil, false)}
	scores := []int64{7, 7, 7}
	if _, _, err := v.Call(context.Background(), CallNormalizeScore, testPod(), nil, &PolicyCycle{Cycle: hostabi.Cycle{Scored: nodes}}, scores); err != nil {
		t.Fatal(err)
	}
	if scores[0] != 1 || scores[1] != 3 || scores[2] != 2 {
		t.Fatalf("scores = %v, want each node's name length [1 3 2]", scores)
	}
	// Without the nodes select_node answers -2: the fixture traps.
	if _, _, err := v.Call(context.Background(), CallNormalizeScore, testPod(), nil, new(PolicyCycle), []int64{1, 2, 3}); err == nil || err.Outcome != OutcomeTrap {
		t.Fatalf("without scored nodes: %v, want the fixture's trap", err)
	}
}

// §4.1: prefilter_nodes, in prefilter, records the nodes the pod may run on
// in the policy's cycle; a malformed list answers -2 and outside prefilter
// it answers -3 (the fixture traps otherwise).
func TestPreFilterNodes(t *testing.T) {
	v := semantics(t, "f")
	pod, pc := testPod(), new(PolicyCycle)
	if _, _, err := v.Call(context.Background(), CallPreFilter, pod, nil, pc, nil); err != nil {
		t.Fatal(err)
	}
	if !pc.NodeNamesSet || strings.Join(pc.NodeNames, ",") != "a,c" {
		t.Fatalf("node names %q (set %v), want a,c", pc.NodeNames, pc.NodeNamesSet)
	}
	if _, _, err := v.Call(context.Background(), CallFilter, pod, nodeInfo("n", nil, false), pc, nil); err != nil {
		t.Fatalf("filter: %v", err)
	}
}
