package hostabi

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/internal/framework/intree"
)

// TestGenerationUnderAssumedPods follows a pod-group cycle's marks on one
// NodeInfo whose own generation does not move: each mark gives a
// generation never seen before, taking it off gives back the one under
// it, and a real change of the NodeInfo ends the marks' say.
func TestGenerationUnderAssumedPods(t *testing.T) {
	ni := intree.NewNodeInfo()
	ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
	real := ni.GetGeneration()
	if got := Generation(ni); got != real {
		t.Fatalf("unmarked: %d, want the NodeInfo's %d", got, real)
	}
	Assumed(ni, "a")
	ga := Generation(ni)
	Assumed(ni, "b")
	gb := Generation(ni)
	if ga == real || gb == real || ga == gb || ga >= 0 || gb >= 0 {
		t.Fatalf("generations %d (a), %d (a, b): want two new negative ones besides %d", ga, gb, real)
	}
	// A copy of the NodeInfo (the framework filters one when the node has
	// nominated pods) holds b too: it gets b's generation.
	if cp := ni.Snapshot(); Generation(cp) != gb {
		t.Fatalf("a copy of the marked NodeInfo: %d, want b's %d", Generation(cp), gb)
	}
	if !Forgotten(ni, "b") || Generation(ni) != ga {
		t.Fatalf("after b is forgotten: %d, want a's %d", Generation(ni), ga)
	}
	if Forgotten(ni, "b") {
		t.Fatal("b forgotten twice")
	}
	Assumed(ni, "c")
	gc := Generation(ni)
	if gc == gb || gc == ga {
		t.Fatalf("c's generation %d reuses an earlier one", gc)
	}
	// a out of turn: c's mark stays, with a generation issued without a.
	Assumed(ni, "a2")
	ga2 := Generation(ni)
	if !Forgotten(ni, "c") || Generation(ni) == ga2 || Generation(ni) == gc || Generation(ni) == ga {
		t.Fatalf("after c is forgotten out of turn: %d, want a new one (a2's was %d)", Generation(ni), ga2)
	}
	Forgotten(ni, "a2")
	Assumed(ni, "c")
	// The node changes for real (a new snapshot): its own generation is
	// new and the marks, made at the old one, no longer apply.
	ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"x": "y"}}})
	if got := Generation(ni); got != ni.GetGeneration() || got == real {
		t.Fatalf("after a real change: %d, want the NodeInfo's new %d", got, ni.GetGeneration())
	}
	Forgotten(ni, "c")
	Forgotten(ni, "a")
	if n, _ := AssumedMarks(); n != 0 {
		t.Fatalf("%d marks left", n)
	}
}

// A large gang's cycle marks more nodes than Generation scans; it then
// finds a mark by generation. Either way, a node unmarked or at another
// generation keeps its own, and only the marked node's NodeInfo (or a
// copy of it) gets the mark's.
func TestGenerationWithManyMarkedNodes(t *testing.T) {
	for _, n := range []int{1, scanTops, scanTops + 1, 4 * scanTops} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			nodes := make([]fwk.NodeInfo, n+1)
			for i := range nodes {
				ni := intree.NewNodeInfo()
				ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i)}})
				nodes[i] = ni
			}
			marked := map[int64]bool{}
			for i, ni := range nodes[:n] {
				Assumed(ni, types.UID(fmt.Sprintf("p%d", i)))
				marked[Generation(ni)] = true
			}
			for i, ni := range nodes[:n] {
				g := Generation(ni)
				if g >= 0 || !marked[g] || Generation(ni.Snapshot()) != g {
					t.Fatalf("node %d: generation %d (copy %d), want its mark's", i, g, Generation(ni.Snapshot()))
				}
			}
			if last := nodes[n]; Generation(last) != last.GetGeneration() {
				t.Fatalf("the unmarked node: %d, want its own %d", Generation(last), last.GetGeneration())
			}
			// Another node given a marked node's name is not that node.
			other := intree.NewNodeInfo()
			other.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n0"}})
			if Generation(other) != other.GetGeneration() {
				t.Fatalf("a NodeInfo at another generation with a marked name: %d, want its own %d", Generation(other), other.GetGeneration())
			}
			// A NodeInfo of another node at a marked node's generation (a
			// tool's own counter) keeps its own, and its mark is its own.
			same := intree.NewNodeInfo()
			same.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "same-gen"}})
			same.Generation = nodes[0].GetGeneration()
			if Generation(same) != same.GetGeneration() {
				t.Fatalf("another node at n0's generation: %d, want its own %d", Generation(same), same.GetGeneration())
			}
			Assumed(same, "s")
			if g := Generation(same); g >= 0 || g == Generation(nodes[0]) {
				t.Fatalf("another node at n0's generation, marked: %d (n0's %d), want a mark of its own", g, Generation(nodes[0]))
			}
			Forgotten(same, "s")
			for i, ni := range nodes[:n] {
				if !Forgotten(ni, types.UID(fmt.Sprintf("p%d", i))) || Generation(ni) != ni.GetGeneration() {
					t.Fatalf("node %d after its mark is taken off: %d, want %d", i, Generation(ni), ni.GetGeneration())
				}
			}
			if held, _ := AssumedMarks(); held != 0 || assumedTops.Load() != nil {
				t.Fatalf("%d marks held after all were taken off", held)
			}
		})
	}
}
