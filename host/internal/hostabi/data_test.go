package hostabi

import (
	"encoding/json"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
)

func nodeInfo(name string, labels map[string]string) fwk.NodeInfo {
	ni := intree.NewNodeInfo()
	ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
	return ni
}

// §4.2, §4.3: pod_object and node_object are the whole objects as JSON,
// apiVersion and kind set and managedFields left out; the pod's is encoded
// once per cycle, the node's once per NodeInfo generation.
func TestWholeObjectsEncodeOnce(t *testing.T) {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: v1.PodSpec{RuntimeClassName: ptrTo("gvisor")}}
	ps := NewPodState(p)
	b, ok := ps.object(abi.ObjectJSON)
	if !ok {
		t.Fatal("no JSON format")
	}
	var got v1.Pod
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Kind != "Pod" || got.APIVersion != "v1" || got.ManagedFields != nil || *got.Spec.RuntimeClassName != "gvisor" || got.Name != "p" {
		t.Fatalf("pod JSON %s", b)
	}
	if p.ManagedFields == nil || p.Kind != "" {
		t.Fatal("encoding changed the scheduler's pod")
	}
	if again, _ := ps.object(abi.ObjectJSON); &again[0] != &b[0] {
		t.Error("pod encoded twice in one cycle")
	}
	if _, ok := ps.object(1); ok {
		t.Error("format 1 accepted")
	}

	ni := nodeInfo("objects-node", map[string]string{"a": "b"})
	nodes := newNodeCache()
	n1, _ := nodes.object(ni, abi.ObjectJSON)
	if n2, _ := nodes.object(ni, abi.ObjectJSON); &n2[0] != &n1[0] {
		t.Error("node encoded twice in one generation")
	}
	changed := ni.Node().DeepCopy()
	changed.Labels["a"] = "c"
	ni.SetNode(changed) // a new generation
	n3, _ := nodes.object(ni, abi.ObjectJSON)
	var node v1.Node
	if err := json.Unmarshal(n3, &node); err != nil || node.Kind != "Node" || node.Labels["a"] != "c" {
		t.Fatalf("node JSON after a change: %s (%v)", n3, err)
	}
}

// node_table refuses what it cannot serve, with -2, and the interner gives
// equal strings equal ids.
func TestNodeTableDeclarations(t *testing.T) {
	list := func(cols ...string) []byte {
		b := abi.AppendListHeader(nil, len(cols))
		for _, c := range cols {
			b = abi.AppendString(b, c)
		}
		return b
	}
	layouts, interned := &layoutSet{m: map[string]*tableLayout{}}, newInterner()
	for _, bad := range [][]byte{list(), list("bogus"), list("label"), list("label:"), list("name:x"), list("taint_effects:NoSchedule"), list(strings.Split(strings.Repeat("pod_count,", abi.MaxColumns+1), ",")[:abi.MaxColumns+1]...), []byte{9, 0, 0, 0}} {
		if l := layouts.parse(bad); l != nil {
			t.Errorf("layout %q accepted", bad)
		}
	}
	l := layouts.parse(list("name", "label:team", "allocatable:cpu", "taint:gpu", "taint_effects"))
	if l == nil || l.rowSize != abi.RowSize(5) || layouts.parse(list("name", "label:team", "allocatable:cpu", "taint:gpu", "taint_effects")) != l {
		t.Fatalf("layout %+v: want 5 columns, shared", l)
	}
	e1, id1 := interned.id("payments")
	e2, id2 := interned.id(strings.Clone("payments"))
	if e1 != e2 || id1 != id2 || id1 == 0 {
		t.Errorf("ids %d/%d %d/%d for equal strings", e1, id1, e2, id2)
	}
	if s, ok := interned.str(e1, id1, false); !ok || s != "payments" {
		t.Errorf("str(%d) = %q, %v", id1, s, ok)
	}
}
func ptrTo[T any](v T) *T { return &v }

// The node cache finds a node's entry by its generation first (recent),
// and that shortcut holds only what the map holds: an entry replaced by a
// new generation leaves it, a name with another node's generation slot is
// not taken for it, and a reset of the map empties it.
func TestNodeCacheRecentFollowsTheMap(t *testing.T) {
	c := newNodeCache()
	ni := nodeInfo("recent-node", map[string]string{"a": "b"})
	first := c.entry(ni)
	if c.entry(ni) != first || c.recent[uint64(ni.GetGeneration())%recentSlots].Load() != first {
		t.Fatal("a node's entry is not kept by its generation")
	}
	oldGen := ni.GetGeneration()
	changed := ni.Node().DeepCopy()
	changed.Labels["a"] = "c"
	ni.SetNode(changed) // a new generation
	second := c.entry(ni)
	if second == first || second.gen != ni.GetGeneration() {
		t.Fatal("a new generation got the old entry")
	}
	if e := c.recent[uint64(oldGen)%recentSlots].Load(); e == first {
		t.Error("the replaced entry is still kept by its generation")
	}
	// Another node whose generation maps to the same slot is not taken for it.
	other := nodeInfo("other-node", nil)
	slot := &c.recent[uint64(other.GetGeneration())%recentSlots]
	slot.Store(&nodeEntry{name: "recent-node", gen: other.GetGeneration()})
	if e := c.entry(other); e.name != "other-node" {
		t.Errorf("entry of other-node is %s's", e.name)
	}
	c.n.Store(maxNodeCacheEntries)
	last := nodeInfo("one-too-many", nil)
	c.entry(last) // resets the map, then keeps its own entry
	for i := range c.recent {
		if e := c.recent[i].Load(); e != nil && e.name != "one-too-many" {
			t.Fatalf("slot %d still holds %s's entry after the map was reset", i, e.name)
		}
	}
}

// A string only a pod's label put in the interner (pod_label_id) is not
// read back by a namespaced policy's intern_string: the pod may be of
// another namespace. Once a node table holds it too, it is node data.
func TestPodOnlyStringsAreNotReadBack(t *testing.T) {
	interned := newInterner()
	e, id := interned.podID("acquisition-target")
	if s, ok := interned.str(e, id, true); ok {
		t.Errorf("a namespaced read of a pod label's string = %q", s)
	}
	if s, ok := interned.str(e, id, false); !ok || s != "acquisition-target" {
		t.Errorf("the operator's read = %q, %v", s, ok)
	}
	if e2, id2 := interned.id("acquisition-target"); e2 != e || id2 != id {
		t.Fatalf("the node table's id %d/%d, pod's %d/%d", e2, id2, e, id)
	}
	if s, ok := interned.str(e, id, true); !ok || s != "acquisition-target" {
		t.Errorf("after a node table holds it, a namespaced read = %q, %v", s, ok)
	}
	if _, id3 := interned.podID("acquisition-target"); id3 != id {
		t.Errorf("the pod's id changed")
	}
	if _, ok := interned.str(e, id, true); !ok {
		t.Errorf("a pod's lookup made a node's string pod-only again")
	}
}

// TakeKeys: a later cycle of the same pod object answers Key and the base
// key without converting any part of the pod again; a cycle of another
// object (even an equal copy) takes nothing and computes its own.
func TestTakeKeysSameObjectOnly(t *testing.T) {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u", Labels: map[string]string{"team": "a"}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
	first := NewPodState(p)
	want := first.Key()

	next := NewPodState(p)
	next.TakeKeys(first)
	if got := next.Key(); got != want {
		t.Fatalf("Key after TakeKeys = %x, want %x", got, want)
	}
	if got := next.baseKey(); got != first.baseKey() {
		t.Fatalf("base key after TakeKeys = %x, want %x", got, first.baseKey())
	}
	if f := next.filled.Load(); f != 0 {
		t.Errorf("the cycle that took the keys converted pod parts %b; want none", f)
	}

	// Nothing computed yet: nothing to take, and the next cycle computes.
	fresh, later := NewPodState(p), NewPodState(p)
	later.TakeKeys(fresh)
	if later.Key() != want || later.filled.Load() == 0 {
		t.Errorf("a cycle that took nothing must compute its key (filled %b)", later.filled.Load())
	}

	other := NewPodState(p.DeepCopy())
	other.TakeKeys(first)
	if other.Key() != want {
		t.Errorf("an equal copy's key differs")
	}
	if other.filled.Load() == 0 {
		t.Errorf("another pod object took the keys of %p", p)
	}
}
