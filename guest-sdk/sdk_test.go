//go:build !wasip1

package sdk

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/abi/fields"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

func TestParseConfig(t *testing.T) {
	got := ParseConfig(" key = team ,\n# comment\nflag\ncpu=1,memory=2")
	want := map[string]string{"key": "team", "flag": "", "cpu": "1", "memory": "2"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseConfig = %v, want %v", got, want)
	}
}

func TestTolerates(t *testing.T) {
	taint := Taint{Key: "k", Value: "v", Effect: "NoSchedule"}
	for _, c := range []struct {
		tol  Toleration
		want bool
	}{
		{Toleration{Key: "k", Operator: "Equal", Value: "v", Effect: "NoSchedule"}, true},
		{Toleration{Key: "k", Value: "v"}, true},
		{Toleration{Key: "k", Operator: "Exists"}, true},
		{Toleration{Operator: "Exists"}, true},
		{Toleration{Key: "k", Operator: "Equal", Value: "w"}, false},
		{Toleration{Key: "other", Operator: "Exists"}, false},
		{Toleration{Key: "k", Operator: "Exists", Effect: "NoExecute"}, false},
	} {
		if got := c.tol.Tolerates(taint); got != c.want {
			t.Errorf("%+v tolerates %+v = %v, want %v", c.tol, taint, got, c.want)
		}
	}
}

func TestStringListRoundTrip(t *testing.T) {
	b := abi.AppendListHeader(nil, 4)
	for _, s := range []string{"team", "a", "", "zone"} {
		b = abi.AppendString(b, s)
	}
	if got := decodeMap(b); !reflect.DeepEqual(got, map[string]string{"team": "a", "": "zone"}) {
		t.Fatalf("decodeMap = %v", got)
	}
	// Truncated lists stop cleanly instead of reading past the end.
	r := abi.NewListReader(b[:len(b)-2])
	n := 0
	for {
		if _, ok := r.Next(); !ok {
			break
		}
		n++
	}
	if n != 3 || !r.Err() {
		t.Fatalf("truncated list: read %d strings, err=%v; want 3 and an error", n, r.Err())
	}
}

func TestNativeRun(t *testing.T) {
	RegisterFilter(func(pod Pod, node Node) Status {
		if v, _ := node.Label("zone"); v != Config() {
			return Unschedulable("zone " + v)
		}
		if pod.Request("cpu") > node.Allocatable("cpu")-node.Requested("cpu") {
			return Unschedulable("cpu")
		}
		return Success()
	})
	defer RegisterFilter(nil)
	SetConfig("a")
	pod := &PodData{Requests: map[string]int64{"cpu": 500}}
	if st := RunFilter(pod, &NodeData{Labels: map[string]string{"zone": "b"}}); st.Reason != "zone b" {
		t.Fatalf("status = %+v", st)
	}
	if st := RunFilter(pod, &NodeData{Labels: map[string]string{"zone": "a"}, Allocatable: map[string]int64{"cpu": 1000}, Requested: map[string]int64{"cpu": 600}}); st.Reason != "cpu" {
		t.Fatalf("status = %+v", st)
	}
	if st := RunFilter(pod, &NodeData{Labels: map[string]string{"zone": "a"}, Allocatable: map[string]int64{"cpu": 1000}}); !st.IsSuccess() {
		t.Fatalf("status = %+v", st)
	}
	if Capabilities() != abi.CapFilter|abi.CapFilterNodes {
		t.Fatalf("capabilities = %d", Capabilities())
	}
}

func TestEqual(t *testing.T) {
	words := []string{"", "a", "ab", "abc", "abcd", "abcde", "abcdefg", "abcdefgh", "abcdefghi", "abcdefghijklmno", "abcdefghijklmnop", "abcdefghijklmnopq", "abcdefghijklmnopqrstuvwxyz0123456789"}
	for _, a := range words {
		for _, b := range words {
			if Equal(a, b) != (a == b) {
				t.Fatalf("Equal(%q, %q) = %v", a, b, !(a == b))
			}
			// Same length, one byte different, at every position.
			for i := range a {
				c := []byte(a)
				c[i] ^= 1
				if Equal(a, string(c)) {
					t.Fatalf("Equal(%q, %q) = true", a, c)
				}
			}
		}
	}
}

// TestCapabilitiesCoverPoints fails when an extension point of abi.Points
// has no registration in the SDK (registered has no case for it).
func TestCapabilitiesCoverPoints(t *testing.T) {
	RegisterPreFilter(func(Pod) Status { return Success() })
	RegisterFilter(func(Pod, Node) Status { return Success() })
	RegisterPreScore(func(Pod) Status { return Success() })
	RegisterScore(func(Pod, Node) (int64, Status) { return 0, Success() })
	RegisterNormalizeScore(func(Pod, []int64) Status { return Success() })
	RegisterPreEnqueue(func(Pod) Status { return Success() })
	RegisterPreBind(func(Pod, Node) Status { return Success() })
	RegisterPostFilter(func(Pod) Status { return Success() })
	RegisterPostBind(func(Pod, Node) {})
	RegisterReserve(func(Pod, Node) Status { return Success() })
	RegisterUnreserve(func(Pod, Node) {})
	RegisterPermit(func(Pod, Node) Status { return Success() })
	defer func() {
		RegisterPermit(nil)
		RegisterReserve(nil)
		RegisterUnreserve(nil)
		RegisterPreEnqueue(nil)
		RegisterPreBind(nil)
		RegisterPostFilter(nil)
		RegisterPostBind(nil)
		RegisterPreFilter(nil)
		RegisterFilter(nil)
		RegisterPreScore(nil)
		RegisterScore(nil)
		RegisterNormalizeScore(nil)
	}()
	for p := abi.Point(0); p < abi.NumPoints; p++ {
		if Capabilities()&p.Cap() == 0 {
			t.Errorf("with every function registered, capabilities lack %s (bit %d): add it to registered in sdk.go", abi.Points[p].Export, p.Cap())
		}
	}
	RegisterFilter(nil)
	if c := Capabilities(); c&(abi.CapFilter|abi.CapFilterNodes) != 0 {
		t.Errorf("without a Filter, capabilities = %b still claim filter or filter_nodes", c)
	}
}

func TestNodeTaintNative(t *testing.T) {
	var got []Taint
	RegisterFilter(func(_ Pod, node Node) Status {
		got = node.Taint("dedicated")
		return Success()
	})
	defer RegisterFilter(nil)
	n := &NodeData{Taints: []Taint{{Key: "dedicated", Value: "gpu", Effect: "NoSchedule"}, {Key: "other", Value: "", Effect: "NoSchedule"}, {Key: "dedicated", Value: "gpu", Effect: "NoExecute"}}}
	RunFilter(&PodData{}, n)
	if len(got) != 2 || got[0] != (Taint{Key: "dedicated", Value: "gpu", Effect: "NoSchedule"}) || got[1] != (Taint{Key: "dedicated", Value: "gpu", Effect: "NoExecute"}) {
		t.Fatalf("Taint(dedicated) = %+v", got)
	}
	RunFilter(&PodData{}, &NodeData{})
	if got != nil {
		t.Fatalf("Taint on an untainted node = %+v, want nil", got)
	}
}

// TaintEffects is the bit set of the node's taints' effects, natively as in
// a table column.
func TestNodeTaintEffectsNative(t *testing.T) {
	var got int64
	RegisterFilter(func(_ Pod, node Node) Status {
		got = node.TaintEffects()
		return Success()
	})
	defer RegisterFilter(nil)
	for _, c := range []struct {
		taints []Taint
		want   int64
	}{
		{nil, 0},
		{[]Taint{{Key: "a", Effect: "PreferNoSchedule"}}, TaintPreferNoSchedule},
		{[]Taint{{Key: "a", Effect: "NoSchedule"}, {Key: "b", Value: "x", Effect: "NoExecute"}, {Key: "c", Effect: "NoSchedule"}}, TaintNoSchedule | TaintNoExecute},
		{[]Taint{{Key: "a", Effect: "Bogus"}}, 0},
	} {
		RunFilter(&PodData{}, &NodeData{Taints: c.taints})
		if got != c.want {
			t.Errorf("TaintEffects of %+v = %d, want %d", c.taints, got, c.want)
		}
	}
}

// Every row of fields.Fields names an SDK accessor that exists, so what the
// docs say a Go policy calls is there.
func TestEveryFieldHasAnAccessor(t *testing.T) {
	types := map[string]reflect.Type{"Pod": reflect.TypeOf(Pod{}), "Node": reflect.TypeOf(Node{}), "Cluster": reflect.TypeOf(Cluster{})}
	for _, f := range fields.Fields {
		typ, method, _ := strings.Cut(f.Accessor, ".")
		rt, ok := types[typ]
		if !ok {
			t.Errorf("%s %s: accessor %q is on no SDK type", f.Object, f.Path, f.Accessor)
			continue
		}
		if _, ok := rt.MethodByName(method); !ok {
			t.Errorf("%s %s: sdk.%s has no method %s", f.Object, f.Path, typ, method)
		}
	}
}

// Natively, ScoredNode gives a NormalizeScore function the node of each
// score when run with RunNormalizeScoreOn, and nothing otherwise.
func TestScoredNode(t *testing.T) {
	defer RegisterNormalizeScore(nil)
	RegisterNormalizeScore(func(_ Pod, scores []int64) Status {
		for i := range scores {
			n, ok := ScoredNode(i)
			if !ok {
				return Error("no node for score " + strconv.Itoa(i))
			}
			scores[i] = int64(len(n.Name()))
		}
		return Success()
	})
	scores := []int64{0, 0}
	if st := RunNormalizeScoreOn(&PodData{Name: "p"}, []*NodeData{{Name: "a"}, {Name: "bbb"}}, scores); !st.IsSuccess() || scores[0] != 1 || scores[1] != 3 {
		t.Fatalf("status %+v, scores %v; want [1 3]", st, scores)
	}
	if st := RunNormalizeScore(&PodData{Name: "p"}, []int64{0}); st.Code != CodeError {
		t.Fatalf("without nodes: %+v, want the Error", st)
	}
}

// Natively, PreFilterNodes records what RunPreFilter's PreFilter named.
func TestPreFilterNodesNative(t *testing.T) {
	defer RegisterPreFilter(nil)
	RegisterPreFilter(func(Pod) Status { PreFilterNodes("a", "c"); return Success() })
	if st := RunPreFilter(&PodData{Name: "p"}); !st.IsSuccess() {
		t.Fatal(st)
	}
	if names, ok := PreFilterResult(); !ok || strings.Join(names, ",") != "a,c" {
		t.Fatalf("PreFilterResult = %v, %v; want a,c", names, ok)
	}
	RegisterPreFilter(func(Pod) Status { return Success() })
	RunPreFilter(&PodData{Name: "p"})
	if _, ok := PreFilterResult(); ok {
		t.Fatal("a PreFilter that names no nodes left a result")
	}
}

// PerCycle computes once per cycle: every node of one pod's cycle shares
// the value; the next pod's cycle, or a PreFilter, computes it again.
func TestPerCycle(t *testing.T) {
	var cached PerCycle[string]
	computed := 0
	RegisterFilter(func(pod Pod, node Node) Status {
		v := cached.Get(func() string { computed++; return pod.Name() })
		return Unschedulable(v)
	})
	defer RegisterFilter(nil)
	a, b := &PodData{Name: "a"}, &PodData{Name: "b"}
	run := func(p *PodData) string { return RunFilter(p, &NodeData{}).Reason }
	first, second := run(a), run(a) // two nodes of one cycle
	if first != "a" || second != "a" || computed != 1 {
		t.Fatalf("two nodes of pod a: %q, %q, computed %d times, want 1", first, second, computed)
	}
	c := Cycle()
	if run(b) != "b" || computed != 2 || Cycle() == c || Cycle() == 0 {
		t.Fatalf("pod b: computed %d times (want 2), cycle %d after %d", computed, Cycle(), c)
	}
	RunPreFilter(b)
	if run(b) != "b" || computed != 3 {
		t.Fatalf("a new cycle of pod b after PreFilter: computed %d times, want 3", computed)
	}
}

// A reason longer than the host keeps comes back natively as the scheduler
// would report it: cut at abi.MaxReasonLength bytes, the split character
// replaced by U+FFFD (the host's rule, host.TestAdversarialModules).
func TestNativeReasonIsCutAsTheHostCutsIt(t *testing.T) {
	old := filterFn
	defer func() { filterFn = old }()
	reason := strings.Repeat("a", abi.MaxReasonLength-1) + "\u00e9" + strings.Repeat("b", 100)
	RegisterFilter(func(Pod, Node) Status { return Unschedulable(reason) })
	st := RunFilter(&PodData{Name: "p"}, &NodeData{Name: "n"})
	if want := strings.Repeat("a", abi.MaxReasonLength-1) + "\uFFFD"; st.Reason != want {
		t.Fatalf("reason of %d bytes ends %q, want %d bytes ending %q", len(st.Reason), st.Reason[len(st.Reason)-4:], len(want), want[len(want)-4:])
	}
	if st.Code != CodeUnschedulable {
		t.Fatalf("code %d", st.Code)
	}
}

// A requirement's values reach a policy as the pod spells them, a comma or
// backslash inside one included (term rows escape them), and a preferred
// term upstream cannot parse is refused by ValidatePreferredSchedulingTerms.
func TestTermValuesKeepCommas(t *testing.T) {
	want := []string{"a,ssd", `x\y`, "", "plain"}
	var got []PreferredSchedulingTerm
	RegisterFilter(func(pod Pod, node Node) Status {
		got = pod.NodeAffinityPreferred()
		return Success()
	})
	defer RegisterFilter(nil)
	pod := &PodData{Affinity: &model.Affinity{NodeAffinityPreferred: []PreferredSchedulingTerm{{Weight: 3, Preference: NodeSelectorTerm{
		MatchExpressions: []NodeSelectorRequirement{{Key: "disk", Operator: "In", Values: want}}}}}}}
	if st := RunFilter(pod, &NodeData{Name: "n"}); !st.IsSuccess() {
		t.Fatalf("status = %+v", st)
	}
	if len(got) != 1 || !slices.Equal(got[0].Preference.MatchExpressions[0].Values, want) {
		t.Fatalf("preferred terms read back as %+v, want values %q", got, want)
	}
	if got[0].Preference.Matches("n", map[string]string{"disk": "ssd"}) {
		t.Fatal(`values ["a,ssd", ...] matched a node labelled disk=ssd`)
	}
	err := ValidatePreferredSchedulingTerms(got)
	if err == nil || !strings.Contains(err.Error(), `"a,ssd" is not a valid label value`) {
		t.Fatalf("ValidatePreferredSchedulingTerms = %v, want the comma-joined value named", err)
	}
}

// Natively, SetReads makes a read the policy does not declare fail the
// call with the compiled SDK's Error, whatever the policy returns; until
// then (and after AllowAllReads) every read answers.
func TestNativeReadsAreChecked(t *testing.T) {
	RegisterFilter(func(pod Pod, node Node) Status {
		if len(node.Pods()) > 5 {
			return Unschedulable("busy")
		}
		return Success()
	})
	defer RegisterFilter(nil)
	defer AllowAllReads()
	pod, node := &PodData{Name: "p"}, &NodeData{Name: "n"}
	if st := RunFilter(pod, node); !st.IsSuccess() {
		t.Fatalf("without SetReads: %+v, want Success", st)
	}
	if err := SetReads(nil); err != nil {
		t.Fatal(err)
	}
	if st := RunFilter(pod, node); st.Code != CodeError || st.Reason != "declare NodePods in policies[].reads to use Node.Pods" {
		t.Fatalf("undeclared NodePods: %+v", st)
	}
	if err := SetReads([]string{"NodePods"}); err != nil {
		t.Fatal(err)
	}
	if st := RunFilter(pod, node); !st.IsSuccess() {
		t.Fatalf("declared NodePods: %+v, want Success", st)
	}
	if err := SetReads([]string{"Bogus"}); err == nil || !strings.Contains(err.Error(), "NodePods, WholeObjects, Cluster, Namespaces, Volumes") {
		t.Fatalf("SetReads(Bogus) = %v, want the valid names listed", err)
	}
}

// PerConfig parses once per config: natively again when a test sets
// another one, so one table's config never leaks into the next.
func TestPerConfig(t *testing.T) {
	defer SetConfig("")
	var c PerConfig[string]
	parses := 0
	parse := func(cfg string) string { parses++; return "parsed " + cfg }
	SetConfig("max=1")
	if got := c.Get(parse); got != "parsed max=1" || c.Get(parse) != got || parses != 1 {
		t.Fatalf("first config: %q after %d parses, want one parse", got, parses)
	}
	SetConfig("max=2")
	if got := c.Get(parse); got != "parsed max=2" || parses != 2 {
		t.Fatalf("second config: %q after %d parses", got, parses)
	}
}

// A vendor's kubelet at the floor's patch release is a pre-release of it;
// Release drops the suffix for floors that must admit it.
func TestVersionReleaseForFloors(t *testing.T) {
	floor, _ := ParseVersion("v1.36.10")
	eks, ok := ParseVersion("v1.36.10-eks-113cf36")
	if !ok || eks.AtLeast(floor) {
		t.Fatalf("v1.36.10-eks-113cf36 parsed %v, AtLeast(v1.36.10) = %v: want a pre-release below the floor", ok, eks.AtLeast(floor))
	}
	if !eks.Release().AtLeast(floor) {
		t.Fatal("Release() of v1.36.10-eks-113cf36 is below v1.36.10")
	}
	older, _ := ParseVersion("v1.36.9-gke.1200")
	if older.Release().AtLeast(floor) {
		t.Fatal("Release() of v1.36.9-gke.1200 reaches v1.36.10")
	}
}

// CountPodsWithLabel counts what a loop over Pods would, without
// decoding them: running pods with the label, terminating ones left out.
func TestCountPodsWithLabel(t *testing.T) {
	var got, want int
	RegisterFilter(func(pod Pod, node Node) Status {
		got = node.CountPodsWithLabel("team", "pay")
		want = 0
		for _, p := range node.Pods() {
			if p.Labels["team"] == "pay" && !p.Terminating {
				want++
			}
		}
		return Success()
	})
	defer RegisterFilter(nil)
	node := &NodeData{Name: "n", Pods: []NodePod{
		{Name: "a", Labels: map[string]string{"team": "pay"}},
		{Name: "b", Labels: map[string]string{"team": "pay"}, Terminating: true},
		{Name: "c", Labels: map[string]string{"team": "search", "app": "pay"}},
		{Name: "d", Labels: map[string]string{"app": "x", "team": "pay"}},
		{Name: "e"},
	}}
	RunFilter(&PodData{Name: "p"}, node)
	if got != 2 || want != 2 {
		t.Fatalf("CountPodsWithLabel = %d, counting Pods = %d; want 2", got, want)
	}
}
