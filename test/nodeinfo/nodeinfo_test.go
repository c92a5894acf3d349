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
	"sort"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"k8s.io/kubernetes/pkg/scheduler/backend/cache"

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
	p := st.MakePod().Name(fmt.Sprintf("p%d", i)).Namespace("default").UID(fmt.Sprintf("p%d", i)).Obj()
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
	// Host ports on containers and init containers (only sidecars hold
	// theirs), with and without IP and protocol.
	for _, cs := range [][]v1.Container{p.Spec.Containers, p.Spec.InitContainers} {
		for i := range cs {
			for k := 0; k < r.Intn(3); k++ {
				cs[i].Ports = append(cs[i].Ports, v1.ContainerPort{ContainerPort: 80, HostPort: int32(r.Intn(3) * 8080),
					HostIP: []string{"", "127.0.0.1", "0.0.0.0"}[r.Intn(3)], Protocol: []v1.Protocol{"", v1.ProtocolTCP, v1.ProtocolUDP}[r.Intn(3)]})
			}
		}
	}
	if r.Intn(2) == 0 {
		p.Labels = map[string]string{"app": []string{"a", "b"}[r.Intn(2)]}
		a := &v1.Affinity{}
		if r.Intn(2) == 0 {
			a.PodAffinity = &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms(r), PreferredDuringSchedulingIgnoredDuringExecution: weighted(r)}
		}
		if r.Intn(2) == 0 {
			a.PodAntiAffinity = &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms(r), PreferredDuringSchedulingIgnoredDuringExecution: weighted(r)}
		}
		p.Spec.Affinity = a
	}
	return p
}

// terms are random pod affinity terms: namespaces, namespace selectors,
// and now and then a selector that does not parse.
func terms(r *rand.Rand) []v1.PodAffinityTerm {
	var out []v1.PodAffinityTerm
	for i := 0; i < r.Intn(3); i++ {
		t := v1.PodAffinityTerm{TopologyKey: []string{"kubernetes.io/hostname", "topology.kubernetes.io/zone"}[r.Intn(2)],
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}}
		switch r.Intn(5) {
		case 0:
			t.Namespaces = []string{"default", "other"}
		case 1:
			t.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}}
		case 2:
			t.NamespaceSelector = &metav1.LabelSelector{}
		case 3:
			t.LabelSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn}}} // In without values
		}
		out = append(out, t)
	}
	return out
}

func weighted(r *rand.Rand) []v1.WeightedPodAffinityTerm {
	var out []v1.WeightedPodAffinityTerm
	for _, t := range terms(r) {
		out = append(out, v1.WeightedPodAffinityTerm{Weight: int32(1 + r.Intn(100)), PodAffinityTerm: t})
	}
	return out
}

// termsView is what the host reads of affinity terms: each term's
// namespaces, selectors and topology key, and its weight.
func termsView(ts []fwk.AffinityTerm, ws []fwk.WeightedAffinityTerm) []string {
	var out []string
	show := func(t fwk.AffinityTerm, w int32) {
		ns, sel := "<nil>", "<nil>"
		if t.NamespaceSelector != nil {
			ns = t.NamespaceSelector.String()
		}
		if t.Selector != nil {
			sel = t.Selector.String()
		}
		out = append(out, fmt.Sprintf("%v|%s|%s|%s|%d", sets.List(t.Namespaces), ns, sel, t.TopologyKey, w))
	}
	for _, t := range ts {
		show(t, 0)
	}
	for _, w := range ws {
		show(w.AffinityTerm, w.Weight)
	}
	return out
}

// podsView is the pods of a list, in order (a guest sees the pods of a
// node in this order), with their affinity terms.
func podsView(pis []fwk.PodInfo) []string {
	var out []string
	for _, pi := range pis {
		out = append(out, fmt.Sprintf("%s %v %v %v %v", pi.GetPod().Name, termsView(pi.GetRequiredAffinityTerms(), nil), termsView(pi.GetRequiredAntiAffinityTerms(), nil),
			termsView(nil, pi.GetPreferredAffinityTerms()), termsView(nil, pi.GetPreferredAntiAffinityTerms())))
	}
	return out
}

// others is what else the host reads of a NodeInfo: the non-zero
// requests, the used host ports and the pods with their terms.
func others(ni fwk.NodeInfo) string {
	nz := ni.GetNonZeroRequested()
	var ports []string
	for ip, m := range ni.GetUsedPorts() {
		for pp := range m {
			ports = append(ports, fmt.Sprintf("%s/%s/%d", ip, pp.Protocol, pp.Port))
		}
	}
	sort.Strings(ports)
	return fmt.Sprintf("nonzero cpu %d memory %d\nports %v\npods %v\nwith affinity %v\nwith required anti-affinity %v\nnon-host-scoped %v",
		nz.GetMilliCPU(), nz.GetMemory(), ports, podsView(ni.GetPods()), podsView(ni.GetPodsWithAffinity()),
		podsView(ni.GetPodsWithRequiredAntiAffinity()), podsView(ni.GetPodsWithRequiredNonHostScopedAntiAffinity()))
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
		if w, g := others(want), others(got); w != g {
			t.Fatalf("case %d:\n%s\nthe scheduler's:\n%s", i, g, w)
		}
		if len(pods) > 0 {
			// A snapshot keeps what it saw when the NodeInfo changes.
			snap := got.Snapshot()
			before := fmt.Sprintf("%+v %+v %s", viewOf(got.GetRequested()), viewOf(got.GetAllocatable()), others(got))
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
			if w, g := others(want), others(got); w != g {
				t.Fatalf("case %d: after RemovePod:\n%s\nthe scheduler's:\n%s", i, g, w)
			}
			if after := fmt.Sprintf("%+v %+v %s", viewOf(snap.GetRequested()), viewOf(snap.GetAllocatable()), others(snap)); after != before {
				t.Fatalf("case %d: a snapshot changed with its NodeInfo:\n%s\nwas\n%s", i, after, before)
			}
			noUID := pods[len(pods)-1].DeepCopy()
			noUID.UID = ""
			if got.RemovePod(klog.Background(), noUID) == nil || want.RemovePod(klog.Background(), noUID) == nil {
				t.Fatalf("case %d: RemovePod of a pod without UID succeeded", i)
			}
		}
	}
}

// TestListImageStates holds List's image states (policytest), and those the
// CLI and the case tables give a policy (intree.NodeInfos), to a scheduler
// snapshot of the same nodes (the scheduler's NewSnapshot): per image name
// of the node, the size and the number of nodes listing the name.
func TestListImageStates(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	images := []string{"reg/a:1", "reg/b:1", "reg/c:2", "reg/d@sha256:00", "e"}
	for i := 0; i < 200; i++ {
		var nodes []*v1.Node
		for j := 0; j <= r.Intn(6); j++ {
			n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", j)}}
			for k := 0; k < r.Intn(4); k++ {
				im := v1.ContainerImage{SizeBytes: int64(r.Intn(1 << 30))}
				for l := 0; l <= r.Intn(2); l++ {
					im.Names = append(im.Names, images[r.Intn(len(images))])
				}
				n.Status.Images = append(n.Status.Images, im)
			}
			nodes = append(nodes, n)
		}
		snapshot := cache.NewSnapshot(nil, nodes)
		got, cli := nodeinfo.List(nodes, nil), intree.NodeInfos(nodes, nil)
		for j, n := range nodes {
			ni, err := snapshot.Get(n.Name)
			if err != nil {
				t.Fatal(err)
			}
			w := ni.GetImageStates()
			for name, g := range map[string]map[string]*fwk.ImageStateSummary{"nodeinfo.List": got[j].GetImageStates(), "intree.NodeInfos": cli[j].GetImageStates()} {
				if (len(w) > 0 || len(g) > 0) && !reflect.DeepEqual(g, w) {
					t.Fatalf("case %d, node %d: %s's image states %v, the scheduler's %v\nnodes: %+v", i, j, name, g, w, nodes)
				}
			}
		}
	}
}
