// The main line only: it follows the main line's kube-scheduler (its
// request options and NodeInfo interface); see docs/kubernetes.md.

//go:build !k8s_1_34

// Package nodeinfo_test holds pkg/nodeinfo to kube-scheduler's own NodeInfo:
// the upstream implementation is the oracle for what a policy reads.
package nodeinfo_test

import (
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/pkg/nodeinfo"
)

var names = []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage, "example.com/gpu", "hugepages-2Mi", "kubernetes.io/batch-cpu", "attachable-volumes-csi-x", "requests.cpu"}

// list is a random resource list; missing and explicit zero both occur.
func list(r *rand.Rand) v1.ResourceList {
	rl := v1.ResourceList{}
	for _, n := range names {
		switch r.Intn(4) {
		case 0: // missing
		case 1:
			rl[n] = resource.MustParse("0")
		default:
			if n == v1.ResourceCPU {
				rl[n] = *resource.NewMilliQuantity(int64(r.Intn(4000)), resource.DecimalSI)
			} else {
				rl[n] = *resource.NewQuantity(int64(r.Intn(1<<20)), resource.BinarySI)
			}
		}
	}
	return rl
}

func container(r *rand.Rand, name string) v1.Container {
	return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: list(r)}}
}

// pod is a random pod: containers, init containers (some restartable
// sidecars), overhead, pod-level requests and resized status resources.
func pod(r *rand.Rand, i int) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("p%d", i))}}
	for c := 0; c <= r.Intn(3); c++ {
		p.Spec.Containers = append(p.Spec.Containers, container(r, fmt.Sprintf("c%d", c)))
	}
	for c := 0; c < r.Intn(3); c++ {
		ic := container(r, fmt.Sprintf("i%d", c))
		if r.Intn(2) == 0 {
			always := v1.ContainerRestartPolicyAlways
			ic.RestartPolicy = &always
		}
		p.Spec.InitContainers = append(p.Spec.InitContainers, ic)
	}
	if r.Intn(3) == 0 {
		p.Spec.Overhead = list(r)
	}
	if r.Intn(4) == 0 {
		p.Spec.Resources = &v1.ResourceRequirements{Requests: list(r)}
	}
	if r.Intn(4) == 0 {
		for _, c := range p.Spec.Containers {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, v1.ContainerStatus{Name: c.Name, Resources: &v1.ResourceRequirements{Requests: list(r)}})
		}
	}
	return p
}

type view struct {
	MilliCPU, Memory, Ephemeral int64
	Pods                        int
	Scalar                      map[v1.ResourceName]int64
}

func viewOf(r fwk.Resource) view {
	s := r.GetScalarResources()
	if len(s) == 0 {
		s = nil
	}
	return view{r.GetMilliCPU(), r.GetMemory(), r.GetEphemeralStorage(), r.GetAllowedPodNumber(), s}
}

func TestMatchesScheduler(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 500; i++ {
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: v1.NodeStatus{Allocatable: list(r)}}
		node.Status.Allocatable[v1.ResourcePods] = resource.MustParse("110")
		var pods []*v1.Pod
		for j := 0; j < r.Intn(4); j++ {
			pods = append(pods, pod(r, j))
		}
		want := intree.NewNodeInfo(pods...)
		want.SetNode(node)
		got := nodeinfo.New(node, pods...)
		if w, g := viewOf(want.GetRequested()), viewOf(got.GetRequested()); !reflect.DeepEqual(w, g) {
			t.Fatalf("case %d: requested %+v, the scheduler's %+v\npods: %+v", i, g, w, pods)
		}
		if w, g := viewOf(want.GetAllocatable()), viewOf(got.GetAllocatable()); !reflect.DeepEqual(w, g) {
			t.Fatalf("case %d: allocatable %+v, the scheduler's %+v", i, g, w)
		}
		if len(got.GetPods()) != len(want.GetPods()) || got.Node() != want.Node() {
			t.Fatalf("case %d: %d pods, the scheduler's %d", i, len(got.GetPods()), len(want.GetPods()))
		}
		if len(pods) > 0 {
			gen := got.GetGeneration()
			if err := got.RemovePod(klog.Background(), pods[0]); err != nil {
				t.Fatal(err)
			}
			if err := want.RemovePod(klog.Background(), pods[0]); err != nil {
				t.Fatal(err)
			}
			if got.GetGeneration() == gen || !reflect.DeepEqual(viewOf(want.GetRequested()), viewOf(got.GetRequested())) {
				t.Fatalf("case %d: after RemovePod: requested %+v, the scheduler's %+v (generation %d → %d)", i, viewOf(got.GetRequested()), viewOf(want.GetRequested()), gen, got.GetGeneration())
			}
		}
	}
}
