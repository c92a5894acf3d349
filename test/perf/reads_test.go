package perf

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/wasmsched/wasmsched/guest-sdk/abi/fields"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/kubemodel"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

// readCostReads are the reads BenchmarkReadCost measures, one accessor per
// kind of read (a scalar, a lookup by key, a list per cycle, a list per
// node generation, a per-call list, a whole object, a cluster read), the
// names plugins-wasm/testdata/readcost switches on.
var readCostReads = []string{
	"none",
	"Pod.Name", "Pod.Label", "Pod.Labels", "Pod.Request", "Pod.Requests", "Pod.Tolerations", "Pod.Containers", "Pod.NodeAffinityRequired", "Pod.Object",
	"Node.Name", "Node.Label", "Node.Labels", "Node.Annotations", "Node.Taints", "Node.Allocatable", "Node.Requested", "Node.AllocatableAll",
	"Node.Conditions", "Node.Images", "Node.KubeletVersion", "Node.PodCount", "Node.Pods", "Node.CountPodsWithLabel", "Node.UsedPorts", "Node.Object",
	"Cluster.NodeCount", "Cluster.NodeLabels", "Cluster.CountPods", "Cluster.NamespaceLabels", "Cluster.VolumeClaims",
	"Cluster.DeviceRequests", "Cluster.NodeDevices",
}

// readCostNode is realisticNode with five running pods, each with labels,
// an owner and a host port: the node a Node.Pods read decodes.
func readCostNode(i int) fwk.NodeInfo {
	base := realisticNode(i)
	node := base.Node()
	var pods []*v1.Pod
	for k := range 5 {
		name := fmt.Sprintf("%s-%d", node.Name, k)
		ctrl := true
		pods = append(pods, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: []string{"payments", "search"}[k%2], UID: types.UID(name),
				Labels:          map[string]string{"team": []string{"payments", "search"}[k%2], "app": fmt.Sprint("app-", k)},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs", Controller: &ctrl}}},
			Spec: v1.PodSpec{NodeName: node.Name, Containers: []v1.Container{{Name: "app",
				Ports:     []v1.ContainerPort{{ContainerPort: int32(8000 + k), HostPort: int32(9000 + k)}},
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("1Gi")}}}}},
		})
	}
	ni := intree.NewNodeInfo(pods...)
	ni.SetNode(node)
	return ni
}

// BenchmarkReadCost measures what one read costs a TinyGo Filter per node:
// the readcost policy makes the named read on each of 32 distinct nodes
// (five pods each) per batch, in a new cycle every batch (a new pod state
// and cluster view, as each scheduling cycle has), with every read
// declared and verdict reuse off. ns/node is per node; the read's own
// cost is its row minus none's, which benchreport puts in
// docs/performance.md with each read's declaration. Per-cycle reads are
// paid once per batch of 32, per-node-generation ones once per node and
// then kept across cycles, as in a scheduler.
func BenchmarkReadCost(b *testing.B) {
	nodes := make([]fwk.NodeInfo, 32)
	for i := range nodes {
		nodes[i] = readCostNode(i)
	}
	pod := benchPod("p")
	pod.Spec.Tolerations = []v1.Toleration{{Key: "spot", Operator: v1.TolerationOpExists}}
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("train-gpu")}}
	dra := readCostDRA(pod.Namespace, nodes)
	wasm, err := testguests.Build(testguests.TinyGo, filepath.Join("plugins-wasm", "testdata", "readcost"))
	if err != nil {
		b.Fatal(err)
	}
	module, err := os.ReadFile(wasm)
	if err != nil {
		b.Fatal(err)
	}
	scopes := make([]string, 0, len(fields.Scopes))
	for _, s := range fields.Scopes {
		scopes = append(scopes, string(s))
	}
	ctx := context.Background()
	for _, read := range readCostReads {
		_, v := loadSpec(b, host.InterruptFuel, host.PolicySpec{Name: "readcost", Config: "read=" + read, Timeout: time.Second,
			MaxInstances: 1, NoReuse: true, Reads: scopes}, module)
		results := make([]host.Result, len(nodes))
		b.Run(read, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i += len(nodes) {
				ps := host.NewPodState(pod)
				ps.Cluster = &host.ClusterView{Nodes: nodes, NamespaceLabels: func(string) (map[string]string, bool) { return map[string]string{"team": "payments"}, true },
					Devices: func(p *v1.Pod, nodes bool) model.Devices { return kubemodel.Devices(p, dra, nodes) }}
				if _, err := v.CallNodes(ctx, host.CallFilter, ps, nodes, new(host.PolicyCycle), results, nil); err != nil || results[len(nodes)-1].Code != 0 {
					b.Fatal(err, results[len(nodes)-1])
				}
			}
		})
	}
}
