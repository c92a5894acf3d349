package perf

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/native"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

// Cluster shapes for the per-node rows (docs/performance.md, "Cluster
// shapes"). What a policy costs per node depends on how many distinct
// inputs its nodes give it, so every per-node figure is taken on three
// clusters of shapeNodes nodes:
//   - realistic: realisticNode, cloud nodes of three teams and zones with
//     0-3 pods each (the cluster the other benchmarks use);
//   - pools: nodes drawn round-robin from poolTemplates templates (labels,
//     taints, allocatable of one node pool), each with its own name and
//     hostname and 0-3 pods, as managed node groups make them;
//   - distinct: every node differs in what both policies read (its team
//     label and its allocatable), the worst case for reusing verdicts.
const (
	shapeNodes    = 1000
	poolTemplates = 20
)

// clusterShapes builds the three clusters, by name.
func clusterShapes() []struct {
	name  string
	nodes []fwk.NodeInfo
} {
	realistic := make([]fwk.NodeInfo, shapeNodes)
	pools := make([]fwk.NodeInfo, shapeNodes)
	distinct := make([]fwk.NodeInfo, shapeNodes)
	for i := range shapeNodes {
		realistic[i] = realisticNode(i)
		pools[i] = poolNode(i)
		distinct[i] = distinctNode(i)
	}
	return []struct {
		name  string
		nodes []fwk.NodeInfo
	}{{"realistic", realistic}, {"pools", pools}, {"distinct", distinct}}
}

// poolNode is node i of the pools cluster: template i%poolTemplates.
func poolNode(i int) fwk.NodeInfo {
	t := i % poolTemplates
	name := fmt.Sprintf("pool-%02d-node-%04d", t, i)
	teams := []string{"payments", "search", "ml", "web", ""}
	cpu := []string{"4", "8", "16", "32"}[t%4]
	mem := []string{"15Gi", "31Gi", "62Gi", "124Gi"}[t%4]
	n := st.MakeNode().Name(name).UID(name).
		Label("kubernetes.io/hostname", name).
		Label("kubernetes.io/os", "linux").
		Label("kubernetes.io/arch", []string{"amd64", "arm64"}[t%2]).
		Label("node.kubernetes.io/instance-type", fmt.Sprintf("m6i.%dxlarge", 1<<(t%4))).
		Label("topology.kubernetes.io/region", "eu-west-1").
		Label("topology.kubernetes.io/zone", fmt.Sprintf("eu-west-1%c", 'a'+t%3)).
		Label("karpenter.sh/capacity-type", []string{"on-demand", "spot"}[t/10]).
		Label("node-pool", fmt.Sprintf("pool-%02d", t)).
		Capacity(map[v1.ResourceName]string{v1.ResourceCPU: cpu, v1.ResourceMemory: mem, v1.ResourcePods: "110", v1.ResourceEphemeralStorage: "100Gi"})
	if team := teams[t%len(teams)]; team != "" {
		n.Label("team", team)
	}
	if t%7 == 6 {
		n.Taints([]v1.Taint{{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule}})
	}
	return withPods(n.Obj(), i%4)
}

// distinctNode is node i of the distinct cluster: a team and an
// allocatable of its own.
func distinctNode(i int) fwk.NodeInfo {
	name := fmt.Sprintf("node-%04d", i)
	n := st.MakeNode().Name(name).UID(name).
		Label("kubernetes.io/hostname", name).
		Label("team", fmt.Sprintf("team-%04d", i)).
		Capacity(map[v1.ResourceName]string{
			v1.ResourceCPU:    resource.NewMilliQuantity(int64(4000+i), resource.DecimalSI).String(),
			v1.ResourceMemory: resource.NewQuantity(int64(16<<30+i<<20), resource.BinarySI).String(),
			v1.ResourcePods:   "110",
		})
	return withPods(n.Obj(), i%4)
}

// withPods is node with k running pods of 1 CPU and 2Gi each.
func withPods(node *v1.Node, k int) fwk.NodeInfo {
	var pods []*v1.Pod
	for j := range k {
		name := fmt.Sprintf("%s-%d", node.Name, j)
		pods = append(pods, st.MakePod().Namespace("default").Name(name).UID(name).Node(node.Name).
			Req(map[v1.ResourceName]string{v1.ResourceCPU: "1", v1.ResourceMemory: "2Gi"}).Obj())
	}
	ni := intree.NewNodeInfo(pods...)
	ni.SetNode(node)
	return ni
}

// BenchmarkShapes is the team-isolation Filter and the bin-packing Score
// over each cluster shape: ns/op is per node, over the whole cluster in
// order. native is the Go plugin's logic; the guests run as the plugin
// runs them, 32 nodes per call (host.CallNodes), three ways:
//   - <tc>: verdict reuse on, and every pass over the cluster is a pod of
//     the same template (the pods of one ReplicaSet): after the first
//     pass, verdicts are remembered (docs/abi.md §3.4);
//   - <tc>-fresh: reuse on, and every pass a pod of a template never seen
//     (a label of its own): only nodes with equal rows in one cycle share;
//   - <tc>-off: verdictReuse Disabled, every node evaluated, the cost of a
//     policy that cannot be reused.
func BenchmarkShapes(b *testing.B) {
	pod := benchPod("p")
	ctx := context.Background()
	for _, shape := range clusterShapes() {
		nodes := shape.nodes
		for _, pt := range []struct {
			name, policy, config string
			kind                 host.CallKind
		}{{"filter", "team-isolation", "key=team", host.CallFilter}, {"score", "bin-packing", "cpu=1,memory=1", host.CallScore}} {
			b.Run(shape.name+"/"+pt.name+"/native", func(b *testing.B) {
				b.ReportAllocs()
				var sink int64
				for i := 0; i < b.N; i++ {
					ni := nodes[i%len(nodes)]
					if pt.kind == host.CallFilter {
						if native.FilterTeam(pod, ni) == nil {
							sink++
						}
					} else {
						sink += native.ScorePacking(pod, ni)
					}
				}
				_ = sink
			})
			for _, tc := range testguests.Toolchains {
				for _, mode := range []string{"", "-fresh", "-off"} {
					_, v := loadSpec(b, host.InterruptFuel, host.PolicySpec{Name: pt.policy, Config: pt.config, Timeout: time.Second, MaxInstances: 1, NoReuse: mode == "-off"},
						testguests.PolicyBytes(b, tc, pt.policy))
					b.Run(shape.name+"/"+pt.name+"/"+string(tc)+mode, func(b *testing.B) {
						shapeRun(b, ctx, v, pt.kind, pod, nodes, mode == "-fresh")
					})
				}
			}
		}
	}
}

// freshTemplates numbers the templates of shapeRun's fresh pods.
var freshTemplates atomic.Int64

// shapeRun checks the guest's verdicts against the native plugin's on
// every node, then times passes over the nodes in batches of 32; fresh
// makes every pass a pod of a new template.
func shapeRun(b *testing.B, ctx context.Context, v *host.Version, kind host.CallKind, pod *v1.Pod, nodes []fwk.NodeInfo, fresh bool) {
	ps, pc := host.NewPodState(pod), new(host.PolicyCycle)
	nextPass := func() {
		pc = new(host.PolicyCycle) // one per cycle, as the plugin has it
		if fresh {
			p := pod.DeepCopy()
			// A namespace never the same twice in the process: every
			// policy's key of the pod has it (a label the policy does not
			// read would not make a template of its own).
			p.Namespace = fmt.Sprint("fresh-", freshTemplates.Add(1))
			ps = host.NewPodState(p)
		} else {
			ps = host.NewPodState(pod) // a new cycle of a pod of the same template
		}
	}
	results := make([]host.Result, 32)
	var scores []int64
	if kind == host.CallScore {
		scores = make([]int64, 32)
	}
	call := func(start int) int {
		if start == 0 {
			nextPass()
		}
		end := min(start+32, len(nodes))
		n := end - start
		var sc []int64
		if scores != nil {
			sc = scores[:n]
		}
		if _, err := v.CallNodes(ctx, kind, ps, nodes[start:end], pc, results[:n], sc); err != nil {
			b.Fatal(err)
		}
		return n
	}
	// The guest gives the native plugin's verdicts on every node, twice
	// (the second pass from what the first remembered, if anything).
	for range 2 {
		for start := 0; start < len(nodes); start += 32 {
			n := call(start)
			for k := range n {
				ni := nodes[start+k]
				if kind == host.CallFilter {
					if got, want := results[k].Code == 0, native.FilterTeam(pod, ni) == nil; got != want {
						b.Fatalf("node %s: guest passes %v, native %v (%+v)", ni.Node().Name, got, want, results[k])
					}
				} else if got, want := scores[k], native.ScorePacking(pod, ni); got != want || results[k].Code != 0 {
					b.Fatalf("node %s: guest scores %d (%+v), native %d", ni.Node().Name, got, results[k], want)
				}
			}
		}
	}
	b.ResetTimer()
	b.ReportAllocs()
	for i := 0; i < b.N; {
		i += call(i % len(nodes))
	}
}
