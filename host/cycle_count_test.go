package host

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

// The SDK keeps the cluster's node count for the cycle that read it, not
// longer: ImageLocality's port, which divides by it on every node, scores
// the same pod over clusters of 4, 8, 2 and 8 nodes in turn in one
// long-lived instance exactly as a new instance scores each (built with
// both toolchains), and the scores differ from cluster to cluster.
func TestNodeCountFollowsTheCycle(t *testing.T) {
	e := newEngine(t)
	cluster := func(n int) []fwk.NodeInfo {
		var nodes []*v1.Node
		for i := range n {
			node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("node-", i)},
				Status: v1.NodeStatus{Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourcePods: resource.MustParse("110")}}}
			if i%2 == 0 || i == 1 {
				node.Status.Images = []v1.ContainerImage{{Names: []string{"registry.example/web:1"}, SizeBytes: 800 << 20}}
			}
			nodes = append(nodes, node)
		}
		infos := make([]fwk.NodeInfo, n)
		for i, node := range nodes {
			infos[i] = intree.NewNodeInfo()
			infos[i].SetNode(node)
		}
		intree.SetImageStates(infos, nodes)
		return infos
	}
	pod := st.MakePod().Namespace("default").Name("web").Containers([]v1.Container{{Name: "web", Image: "registry.example/web:1"}}).Obj()
	score := func(v *Version, nodes []fwk.NodeInfo) []int64 {
		ps, pc := NewPodState(pod), &PolicyCycle{}
		ps.Cluster = &ClusterView{Nodes: nodes}
		results, scores := make([]Result, len(nodes)), make([]int64, len(nodes))
		if _, cerr := v.CallNodes(context.Background(), CallScore, ps, nodes, pc, results, scores); cerr != nil {
			t.Fatal(cerr)
		}
		for i, r := range results {
			if r.Code != abi.CodeSuccess {
				t.Fatalf("node %d: %+v", i, r)
			}
		}
		return scores
	}
	for _, tc := range testguests.Toolchains {
		wasm := testguests.PolicyBytes(t, tc, "ports/imagelocality")
		spec := PolicySpec{Name: "imagelocality", MaxInstances: 1, Reads: []string{"Cluster"}, NoReuse: true}
		kept := load(t, newPolicy(t, e, spec), wasm)
		seen := map[string]bool{}
		for _, n := range []int{4, 8, 2, 8} {
			nodes := cluster(n)
			got := score(kept, nodes)
			want := score(load(t, newPolicy(t, e, spec), wasm), nodes)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s, %d nodes: the kept instance scores %v, a new one %v", tc, n, got, want)
			}
			seen[fmt.Sprint(got[0])] = true
		}
		if len(seen) < 3 {
			t.Fatalf("%s: node-0 scored %v over the clusters; the test needs the count to matter", tc, seen)
		}
	}
}
