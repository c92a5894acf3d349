package cluster

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// TestPlacementChecks holds the workload checks of BenchmarkPerfSchedulingPorts
// to their word: a valid placement passes, each kind of broken constraint
// is reported naming the pod or node, and what upstream allows (the first
// pod of an affinity group, a tolerated taint, a port on another protocol,
// a ScheduleAnyway skew) is not.
func TestPlacementChecks(t *testing.T) {
	node := func(name, zone string) *v1.Node {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
			Status: v1.NodeStatus{Allocatable: v1.ResourceList{v1.ResourceCPU: apiresource.MustParse("1"), v1.ResourceMemory: apiresource.MustParse("1Gi"), v1.ResourcePods: apiresource.MustParse("5")}}}
		if zone != "" {
			n.Labels["topology.kubernetes.io/zone"] = zone
		}
		return n
	}
	pod := func(ns, name, nodeName, color string, mutate ...func(*v1.Pod)) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name), Labels: map[string]string{"color": color}},
			Spec: v1.PodSpec{NodeName: nodeName, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: apiresource.MustParse("100m")}}}}}}
		for _, m := range mutate {
			m(p)
		}
		return p
	}
	selector := func(color string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"color": color}}
	}
	antiAffinity := func(p *v1.Pod) {
		p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{
			{LabelSelector: selector("green"), TopologyKey: "kubernetes.io/hostname", Namespaces: []string{"a", "b"}}}}}
	}
	// Green pods in the namespaces labelled team=x (only a), same zone.
	affinity := func(p *v1.Pod) {
		p.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{
			{LabelSelector: selector("green"), TopologyKey: "topology.kubernetes.io/zone", NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}}}}}}
	}
	spread := func(when v1.UnsatisfiableConstraintAction) func(*v1.Pod) {
		return func(p *v1.Pod) {
			p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: when, LabelSelector: selector("blue")}}
		}
	}
	inZone1 := func(p *v1.Pod) {
		p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{
			{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "topology.kubernetes.io/zone", Operator: v1.NodeSelectorOpIn, Values: []string{"zone1"}}}}}}}}
	}
	hostPort := func(ip string, proto v1.Protocol) func(*v1.Pod) {
		return func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, v1.ContainerPort{ContainerPort: 8080, HostPort: 80, HostIP: ip, Protocol: proto})
		}
	}
	preferredAffinity := func(color string) func(*v1.Pod) {
		return func(p *v1.Pod) {
			p.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{
				{Weight: 1, PodAffinityTerm: v1.PodAffinityTerm{LabelSelector: selector(color), TopologyKey: "kubernetes.io/hostname"}}}}}
		}
	}
	// Pods, by index: 0 g1, 1 g2, 2 b1, 3 b2, 4 r1.
	base := func() *placement {
		return &placement{
			nodes:      map[string]*v1.Node{"n1": node("n1", "zone1"), "n2": node("n2", "zone1"), "n3": node("n3", "zone2"), "n4": node("n4", "")},
			namespaces: map[string]labels.Set{"a": {"team": "x"}, "b": {}},
			pods: []*v1.Pod{
				pod("a", "g1", "n1", "green", antiAffinity), pod("b", "g2", "n2", "green", antiAffinity),
				pod("a", "b1", "n1", "blue", spread(v1.DoNotSchedule), inZone1), pod("a", "b2", "n3", "blue", spread(v1.DoNotSchedule)),
				pod("b", "r1", "n2", "red", affinity), // g1 (namespace a, team x) is in its zone
			},
		}
	}
	if v := base().violations(); len(v) != 0 {
		t.Fatalf("a valid placement has violations: %v", v)
	}
	if skew, met := base().preferred(); skew != -1 || met != -1 {
		t.Errorf("preferred() = %d, %v on a placement without preferred constraints; want -1, -1", skew, met)
	}

	for _, tc := range []struct {
		name    string
		change  func(p *placement)
		want    string // "": no violation
		notWant string
	}{
		{"unscheduled", func(p *placement) { p.pods[0].Spec.NodeName = "" }, "pod a/g1 is not scheduled", ""},
		{"cpu", func(p *placement) {
			p.pods[0].Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = apiresource.MustParse("950m")
		}, "node n1: its pods request 1050m cpu, more than its 1", ""},
		{"pods", func(p *placement) {
			for _, n := range []string{"x1", "x2", "x3", "x4"} {
				p.pods = append(p.pods, pod("b", n, "n1", "none"))
			}
		}, "node n1 holds 6 pods, more than its 5", ""},
		{"node affinity", func(p *placement) { p.pods[2].Spec.NodeName = "n3" }, "pod a/b1 is on node n3, which its nodeSelector or required node affinity excludes", ""},
		{"unschedulable", func(p *placement) { p.nodes["n2"].Spec.Unschedulable = true }, "pod b/g2 is on unschedulable node n2", ""},
		{"taint", func(p *placement) {
			p.nodes["n3"].Spec.Taints = []v1.Taint{{Key: "k", Value: "v", Effect: v1.TaintEffectNoSchedule}}
		}, "pod a/b2 is on node n3, whose taint k=v:NoSchedule it does not tolerate", ""},
		{"tolerated taint", func(p *placement) {
			p.nodes["n3"].Spec.Taints = []v1.Taint{{Key: "k", Value: "v", Effect: v1.TaintEffectNoSchedule}, {Key: "soft", Effect: v1.TaintEffectPreferNoSchedule}}
			p.pods[3].Spec.Tolerations = []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists}}
		}, "", ""},
		{"host port", func(p *placement) { hostPort("", "")(p.pods[0]); hostPort("127.0.0.1", v1.ProtocolTCP)(p.pods[2]) }, "node n1: pods a/g1 and a/b1 both hold host port TCP/80", ""},
		{"host port on another protocol", func(p *placement) { hostPort("", "")(p.pods[0]); hostPort("", v1.ProtocolUDP)(p.pods[2]) }, "", ""},
		{"anti-affinity", func(p *placement) { p.pods[1].Spec.NodeName = "n1" }, "pod a/g1 on node n1: b/g2 matches its required anti-affinity term", ""},
		{"affinity", func(p *placement) { p.pods[4].Spec.NodeName = "n3" }, "pod b/r1 on node n3: no pod matching its required affinity term in its topology.kubernetes.io/zone domain", ""},
		// g2 stays in r1's zone, but its namespace b is not team x.
		{"affinity namespace selector", func(p *placement) { p.pods[0].Spec.NodeName = "n3" }, "pod b/r1 on node n2: no pod matching its required affinity term", ""},
		{"affinity key missing", func(p *placement) { p.pods[4].Spec.NodeName = "n4" }, "pod b/r1 is on node n4, which lacks its required affinity topology key topology.kubernetes.io/zone", ""},
		// With g1 gone, r1 (now green, in a) is the first of its group.
		{"first of an affinity group", func(p *placement) {
			p.pods = append(p.pods[1:4], pod("a", "r1", "n3", "green", affinity))
		}, "", ""},
		// With g1 gone, r1 (red) is not the first of a group: it does not
		// match its own term.
		{"no group to join", func(p *placement) { p.pods = p.pods[1:] }, "pod b/r1 on node n2: no pod matching its required affinity term", ""},
		// b1's node affinity leaves zone2 out of its domains: only b2's
		// constraint (and b3's, b4's) sees zone1 3, zone2 1.
		{"spread", func(p *placement) {
			p.pods = append(p.pods, pod("a", "b3", "n1", "blue", spread(v1.DoNotSchedule)), pod("a", "b4", "n2", "blue", spread(v1.DoNotSchedule)))
		}, "pod a/b2: topology spread on topology.kubernetes.io/zone has skew 2, more than maxSkew 1", "pod a/b1:"},
		{"spread key missing", func(p *placement) { p.pods[3].Spec.NodeName = "n4" }, "pod a/b2 is on node n4, which lacks its topology spread key topology.kubernetes.io/zone", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := base()
			tc.change(p)
			v := strings.Join(p.violations(), "\n")
			switch {
			case tc.want == "" && v != "":
				t.Errorf("violations:\n%s\nwant none", v)
			case !strings.Contains(v, tc.want):
				t.Errorf("violations:\n%s\nwant one containing %q", v, tc.want)
			case tc.notWant != "" && strings.Contains(v, tc.notWant):
				t.Errorf("violations:\n%s\nwant none containing %q", v, tc.notWant)
			}
		})
	}

	t.Run("preferred", func(t *testing.T) {
		p := base()
		for _, q := range p.pods[2:4] {
			spread(v1.ScheduleAnyway)(q)
		}
		inZone1(p.pods[2])
		p.pods = append(p.pods, pod("a", "b3", "n2", "blue", spread(v1.ScheduleAnyway)), pod("a", "b4", "n1", "blue", spread(v1.ScheduleAnyway)),
			pod("a", "r2", "n1", "red", preferredAffinity("green")), // g1 shares n1: met
			pod("a", "r3", "n3", "red", preferredAffinity("red")))   // only itself on n3: not met
		// b2's constraint counts b1, b3 and b4 in zone1 and b2 in zone2: skew
		// 2, more than maxSkew, but ScheduleAnyway; b1's own sees zone1 alone.
		if skew, met := p.preferred(); skew != 2 || met != 0.5 {
			t.Errorf("preferred() = %d, %v; want 2, 0.5", skew, met)
		}
		if v := p.violations(); len(v) != 0 {
			t.Errorf("violations %v; want none (ScheduleAnyway and preferred terms are not hard constraints)", v)
		}
	})
}
