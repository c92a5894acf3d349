package host

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/abi/fields"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
	"github.com/wasmsched/wasmsched/host/internal/hostabi"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/kubemodel"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

// The contexts of the matrix, in the fixture's order.
var contextNames = []string{"_initialize", "prefilter", "filter", "prescore", "score", "normalize_score", "filter_nodes", "score_nodes", "filter_nodes before select_node", "postfilter", "postbind", "reserve", "unreserve", "permit"}

const (
	ctxInit = iota
	ctxPreFilter
	ctxFilter
	ctxPreScore
	ctxScore
	ctxNormalize
	ctxFilterNodes
	ctxScoreNodes
	// ctxBeforeSelect is filter_nodes before its first select_node: no
	// node yet for the good row; the probe's select_node(0) comes before
	// the bad row, which so sees node 0.
	ctxBeforeSelect
	ctxPostFilter
	ctxPostBind
	ctxReserve
	ctxUnreserve
	ctxPermit
)

// contextFns are the value-returning host functions in the order of
// context.wat's imports, with what each returns in context c for the
// fixture's good and bad arguments, as docs/abi.md §4 states it. The pod
// is "web" labelled team=payments requesting 100m cpu; the node "n1" is
// labelled team=payments with 4 cpus allocatable, no taints, no pods.
var contextFns = []struct {
	name      string
	good, bad func(c int) int64 // bad nil: the function takes no arguments
}{
	{"config", func(int) int64 { return 3 }, func(int) int64 { return badArgs }},
	{"pod_string", pod(3), pod(badArgs)},
	{"pod_label", pod(8), pod(badArgs)},
	{"pod_annotation", pod(notFound), pod(badArgs)},
	{"pod_list", pod(24), pod(badArgs)},
	{"pod_request", podQuantity(100), podQuantity(abi.MissingQuantity)},
	{"pod_priority", podQuantity(0), nil},
	{"node_string", node(2), node(badArgs)},
	{"node_label", node(8), node(badArgs)},
	{"node_annotation", node(notFound), node(badArgs)},
	{"node_taint", node(notFound), node(badArgs)},
	{"node_list", node(24), node(badArgs)},
	{"node_resource", nodeQuantity(4000), nodeQuantity(abi.MissingQuantity)},
	{"node_pod_count", node(0), nil},
	{"node_unschedulable", node(0), nil},
	{"select_node", func(c int) int64 {
		if c == ctxFilterNodes || c == ctxScoreNodes || c == ctxBeforeSelect || c == ctxNormalize {
			return 0
		}
		return badArgs
	}, func(int) int64 { return badArgs }},
	{"cycle_state_get", func(int) int64 { return notFound }, func(int) int64 { return notFound }},
	{"scores_get", scores(map[int]int64{ctxNormalize: 2, ctxScoreNodes: 1}), scores(map[int]int64{ctxNormalize: badArgs, ctxScoreNodes: badArgs})},
	// The objects' JSON is longer than the probe's 64-byte buffer: the
	// length comes back, nothing is written. Bad: format 99.
	{"pod_object", func(c int) int64 { return pod(int64(len(contextPodJSON)))(c) }, pod(badArgs)},
	{"node_object", func(c int) int64 {
		if c == ctxBeforeSelect || c == ctxNormalize { // probed after the good row's select_node(0)
			return int64(len(contextNodeJSON))
		}
		return node(int64(len(contextNodeJSON)))(c)
	}, node(badArgs)},
	// Good: an empty list (0 bytes, no node); bad: a list outside memory.
	{"prefilter_nodes", prefilterOnly(0), prefilterOnly(badArgs)},
	// The cluster view: one node (n1), no pods; namespace "default" has
	// one label. Good: node 0's name; a count per node name (("n1", "0"):
	// 15 bytes); the namespace's labels (46 bytes); no placed pod's terms
	// (an empty list: 4 bytes). Bad: node 99, terms and names outside
	// memory, existing_terms kind 99.
	{"cluster_nodes", cluster(1), nil},
	{"cluster_node", cluster(2), cluster(badArgs)},
	{"count_pods", cluster(15), cluster(badArgs)},
	{"namespace_labels", cluster(46), cluster(badArgs)},
	{"existing_terms", cluster(4), cluster(badArgs)},
	// ABI v2 (§3.2). node_table: the row size of one column (24) anywhere;
	// bad: an unknown column. reason_register: "team" is id 1 on every
	// instance; bad: a reason outside memory. intern_string: the pod's
	// team label ("payments", 8 bytes) from its id where there is a pod,
	// else the id is -3 and unknown (-1); bad: a buffer outside memory.
	// pod_label_id: an id (stored as 1) where there is a pod; bad: a key
	// outside memory.
	{"node_table", func(int) int64 { return 24 }, func(int) int64 { return badArgs }},
	{"reason_register", func(int) int64 { return 1 }, func(int) int64 { return badArgs }},
	{"intern_string", podOr(8, notFound), podOr(badArgs, notFound)},
	{"pod_label_id", pod(1), pod(badArgs)},
	// volume_claims: the pod has no claims, an empty list (4 bytes) of
	// kind 0 wherever there is a pod; bad: kind 99.
	{"volume_claims", cluster(4), cluster(badArgs)},
	// ABI v4 counters (the fixture declares KeepsState): counter_add
	// takes 1 of "team" in reserve only (bad: a key outside memory);
	// counter_get reads it wherever there is a pod, 0 before reserve ran
	// (the test calls reserve after every point but unreserve).
	{"counter_add", only(ctxReserve, 1), only(ctxReserve, badArgs)},
	{"counter_get", func(c int) int64 {
		switch c {
		case ctxReserve, ctxUnreserve, ctxPermit:
			return 1
		}
		return pod(0)(c)
	}, pod(badArgs)},
	// ABI v4 waiting pods, in permit, postfilter and unreserve (the test
	// gives those calls an empty set of waiting pods): an empty list (4
	// bytes); "uid-none" is not waiting (-1). Bad: a selector that does
	// not parse, a UID outside memory.
	{"permit_waiting", waitingOnly(4), waitingOnly(badArgs)},
	{"permit_allow", waitingOnly(notFound), waitingOnly(badArgs)},
	{"permit_reject", waitingOnly(notFound), waitingOnly(badArgs)},
	// ABI v3 gates and patches: only in preenqueue and prebind, which the
	// matrix does not call (TestGateFunctionEdges covers them there).
	{"recheck_on", never, never},
	{"patch_label", never, never},
	{"patch_annotation", never, never},
	{"cycle_policies", never, never},
	// Granted objects (§4.10), wherever there is a pod: read 0 holds one
	// object, default/n1 with one declared field "a". object_get: the
	// list ["a"] (9 bytes); object_list: the field count "1", then one
	// record (default, n1, a), 31 bytes. Bad: a name outside memory, a
	// selector that does not parse.
	{"object_get", pod(9), pod(badArgs)},
	{"object_list", pod(31), pod(badArgs)},
	// resource_claims: the pod names no ResourceClaim, an empty list (4
	// bytes) of kind 0 wherever there is a pod; bad: kind 99.
	{"resource_claims", cluster(4), cluster(badArgs)},
}

// oneObject is a declared read holding one object, default/n1, whose one
// declared field is "a".
type oneObject struct{}

func (oneObject) Get(ns, name string) ([]string, bool) {
	return []string{"a"}, ns == "default" && name == "n1"
}

func (oneObject) Gen() uint64 { return 1 }

func (oneObject) List(ns string, sel labels.Selector) ([]model.Object, error) {
	if ns != "" && ns != "default" || !sel.Matches(labels.Set{}) {
		return nil, nil
	}
	return []model.Object{{Namespace: "default", Name: "n1", Values: []string{"a"}}}, nil
}

// never answers NotAvailable in every context of the matrix.
func never(int) int64 { return notAvailable }

// waitingOnly answers v where waiting pods are reached, NotAvailable
// elsewhere.
func waitingOnly(v int64) func(int) int64 {
	return func(c int) int64 {
		switch c {
		case ctxPermit, ctxPostFilter, ctxUnreserve:
			return v
		}
		return notAvailable
	}
}

// noneWaiting is a set of waiting pods with none in it.
type noneWaiting struct{}

func (noneWaiting) List(labels.Selector) [][4]string { return nil }
func (noneWaiting) Allow(string) bool                { return false }
func (noneWaiting) Reject(string, string) bool       { return false }

// only answers v in context at and NotAvailable everywhere else.
func only(at int, v int64) func(int) int64 {
	return func(c int) int64 {
		if c == at {
			return v
		}
		return notAvailable
	}
}

// podOr answers v where there is a pod and none in _initialize.
func podOr(v, none int64) func(int) int64 {
	return func(c int) int64 {
		if c == ctxInit {
			return none
		}
		return v
	}
}

// prefilterOnly answers v in prefilter and NotAvailable everywhere else.
func prefilterOnly(v int64) func(int) int64 {
	return func(c int) int64 {
		if c == ctxPreFilter {
			return v
		}
		return notAvailable
	}
}

// contextPodJSON and contextNodeJSON are the objects' JSON in the matrix,
// set by the test before it checks.
var contextPodJSON, contextNodeJSON []byte

const (
	notFound     = int64(abi.NotFound)
	badArgs      = int64(abi.BadArgs)
	notAvailable = int64(abi.NotAvailable)
)

// pod answers v in every context but _initialize, which has no pod.
func pod(v int64) func(int) int64 {
	return func(c int) int64 {
		if c == ctxInit {
			return notAvailable
		}
		return v
	}
}

// cluster answers v wherever the pod is but in postbind and unreserve
// (and prebind), which may run after the cycle, outside its snapshot.
func cluster(v int64) func(int) int64 {
	return func(c int) int64 {
		if c == ctxPostBind || c == ctxUnreserve {
			return notAvailable
		}
		return pod(v)(c)
	}
}

// podQuantity is pod for the i64 functions: the missing quantity without a pod.
func podQuantity(v int64) func(int) int64 {
	return func(c int) int64 {
		if c == ctxInit {
			return abi.MissingQuantity
		}
		return v
	}
}

// node answers v where there is a node: filter, score and their batches
// after select_node, postbind (in ctxBeforeSelect, only v == badArgs: the bad row).
func node(v int64) func(int) int64 {
	return func(c int) int64 {
		switch c {
		case ctxFilter, ctxScore, ctxFilterNodes, ctxScoreNodes, ctxPostBind, ctxReserve, ctxUnreserve, ctxPermit:
			return v
		case ctxBeforeSelect, ctxNormalize:
			if v == badArgs {
				return v
			}
		}
		return notAvailable
	}
}

func nodeQuantity(v int64) func(int) int64 {
	return func(c int) int64 {
		switch c {
		case ctxFilter, ctxScore, ctxFilterNodes, ctxScoreNodes, ctxPostBind, ctxReserve, ctxUnreserve, ctxPermit:
			return v
		case ctxBeforeSelect, ctxNormalize:
			if v == abi.MissingQuantity {
				return v
			}
		}
		return abi.MissingQuantity
	}
}

// scores answers in the contexts with scores, NotAvailable elsewhere.
func scores(in map[int]int64) func(int) int64 {
	return func(c int) int64 {
		if v, ok := in[c]; ok {
			return v
		}
		return notAvailable
	}
}

// Every value-returning host function, called from every entry point and
// from _initialize with good and with bad arguments, returns what
// docs/abi.md says, and none traps.
func TestHostFunctionContexts(t *testing.T) {
	p := newPolicy(t, newEngine(t), PolicySpec{Config: "k=v", MaxInstances: 1, Reads: allScopes()})
	v := load(t, p, testguests.Fixture(t, "context"))
	p.SetObjects([]ObjectReader{oneObject{}})
	ps := NewPodState(&v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web", Labels: map[string]string{"team": "payments"}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}}}}},
	})
	ni := intree.NewNodeInfo()
	ni.SetNode(&v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"team": "payments"}},
		Status:     v1.NodeStatus{Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4")}},
	})
	ps.Cluster = &ClusterView{Nodes: []fwk.NodeInfo{ni}, NamespaceLabels: func(name string) (map[string]string, bool) {
		return map[string]string{"kubernetes.io/metadata.name": name}, name == "default"
	}}
	contextPodJSON = kubemodel.PodObject(ps.Pod)
	contextNodeJSON = kubemodel.NodeObject(ni.Node())
	ctx, pc := context.Background(), new(PolicyCycle)
	pc.Waiting = noneWaiting{}
	call := func(kind CallKind, node fwk.NodeInfo, sc []int64) {
		t.Helper()
		if _, _, err := v.Call(ctx, kind, ps, node, pc, sc); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
	}
	call(CallPreFilter, nil, nil)
	call(CallFilter, ni, nil)
	call(CallPostFilter, nil, nil)
	call(CallPostBind, ni, nil)
	call(CallPreScore, nil, nil)
	call(CallScore, ni, nil)
	// normalize_score with its scored nodes: the probe's select_node(0)
	// selects the first (docs/abi.md §3).
	if _, _, err := v.Call(ctx, CallNormalizeScore, ps, nil, &PolicyCycle{Cycle: hostabi.Cycle{State: pc.State, Scored: []fwk.NodeInfo{ni, ni}}}, []int64{10, 20}); err != nil {
		t.Fatalf("normalize_score: %v", err)
	}
	if _, err := v.CallNodes(ctx, CallFilter, ps, []fwk.NodeInfo{ni}, pc, make([]Result, 1), nil); err != nil {
		t.Fatalf("filter_nodes: %v", err)
	}
	if _, err := v.CallNodes(ctx, CallScore, ps, []fwk.NodeInfo{ni}, pc, make([]Result, 1), make([]int64, 1)); err != nil {
		t.Fatalf("score_nodes: %v", err)
	}
	call(CallReserve, ni, nil)
	call(CallUnreserve, ni, nil)
	call(CallPermit, ni, nil)
	in := <-v.idle // the one instance served every call
	defer func() { v.idle <- in }()
	var wrong []string
	for c, cname := range contextNames {
		for f, fn := range contextFns {
			for bad, want := range []func(int) int64{fn.good, fn.bad} {
				if want == nil {
					continue
				}
				got, ok := in.mod.Memory().ReadUint64Le(uint32(4096 + c*1024 + bad*512 + f*8))
				if !ok || int64(got) != want(c) {
					args := "good"
					if bad == 1 {
						args = "bad"
					}
					wrong = append(wrong, fmt.Sprintf("%s in %s with %s arguments = %s, want %s", fn.name, cname, args, show(int64(got)), show(want(c))))
				}
			}
		}
	}
	if len(wrong) > 0 {
		t.Fatalf("%d of the matrix differ from docs/abi.md:\n%s", len(wrong), strings.Join(wrong, "\n"))
	}
}

func show(v int64) string {
	switch v {
	case notFound:
		return "-1 (NotFound)"
	case badArgs:
		return "-2 (BadArgs)"
	case notAvailable:
		return "-3 (NotAvailable)"
	case math.MinInt64:
		return "i64 min (missing quantity)"
	}
	return fmt.Sprint(v)
}

func allScopes() []string {
	var out []string
	for _, sc := range fields.Scopes {
		out = append(out, string(sc))
	}
	return out
}
