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
// to their word: a valid placement passes, and each kind of broken
// constraint is reported, naming the pod or node.
func TestPlacementChecks(t *testing.T) {
	node := func(name, zone string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}},
			Status: v1.NodeStatus{Allocatable: v1.ResourceList{v1.ResourceCPU: apiresource.MustParse("1"), v1.ResourceMemory: apiresource.MustParse("1Gi"), v1.ResourcePods: apiresource.MustParse("3")}}}
	}
	pod := func(ns, name, nodeName, color string, mutate ...func(*v1.Pod)) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name), Labels: map[string]string{"color": color}},
			Spec: v1.PodSpec{NodeName: nodeName, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: apiresource.MustParse("100m")}}}}}}
		for _, m := range mutate {
			m(p)
		}
		return p
	}
	green := &metav1.LabelSelector{MatchLabels: map[string]string{"color": "green"}}
	antiAffinity := func(p *v1.Pod) {
		p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{
			{LabelSelector: green, TopologyKey: "kubernetes.io/hostname", Namespaces: []string{"a", "b"}}}}}
	}
	affinity := func(p *v1.Pod) {
		p.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{
			{LabelSelector: green, TopologyKey: "topology.kubernetes.io/zone", NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}}}}}}
	}
	spread := func(p *v1.Pod) {
		p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: v1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"color": "blue"}}}}
	}
	inZone1 := func(p *v1.Pod) {
		p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{
			{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "topology.kubernetes.io/zone", Operator: v1.NodeSelectorOpIn, Values: []string{"zone1"}}}}}}}}
	}
	base := func() *placement {
		return &placement{
			nodes:      map[string]*v1.Node{"n1": node("n1", "zone1"), "n2": node("n2", "zone1"), "n3": node("n3", "zone2")},
			namespaces: map[string]labels.Set{"a": {"team": "x"}, "b": {}},
			pods: []*v1.Pod{
				pod("a", "g1", "n1", "green", antiAffinity), pod("b", "g2", "n2", "green", antiAffinity),
				pod("a", "b1", "n1", "blue", spread, inZone1), pod("a", "b2", "n3", "blue", spread),
				pod("b", "r1", "n2", "red", affinity), // g1 (namespace a, team x) is in its zone
			},
		}
	}
	valid := base()
	if v := valid.violations(); len(v) != 0 {
		t.Fatalf("a valid placement has violations: %v", v)
	}
	skew, met := valid.preferred()
	if skew != -1 || met != -1 {
		t.Errorf("preferred() = %d, %v on a placement without preferred terms; want -1, -1", skew, met)
	}

	for _, tc := range []struct {
		name   string
		change func(p *placement)
		want   string
	}{
		{"unscheduled", func(p *placement) { p.pods[0].Spec.NodeName = "" }, `pod a/g1 is not scheduled`},
		{"cpu", func(p *placement) {
			p.pods[0].Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = apiresource.MustParse("950m")
		}, "node n1: its pods request 1050m cpu, more than its 1"},
		{"pods", func(p *placement) {
			p.pods = append(p.pods, pod("b", "x1", "n1", "none"), pod("b", "x2", "n1", "none"))
		}, "node n1 holds 4 pods, more than its 3"},
		{"node affinity", func(p *placement) { p.pods[2].Spec.NodeName = "n3" }, "pod a/b1 is on node n3, which its nodeSelector or required node affinity excludes"},
		{"anti-affinity", func(p *placement) { p.pods[1].Spec.NodeName = "n1" }, "pod a/g1 on node n1: b/g2 matches its required anti-affinity term"},
		{"affinity", func(p *placement) { p.pods[4].Spec.NodeName = "n3" }, "pod b/r1 on node n3: no pod matching its required affinity term in its topology.kubernetes.io/zone domain"},
		// b1's node affinity leaves zone2 out of its domains: only b2's
		// constraint (and b3's, b4's) sees zone1 3, zone2 1.
		{"spread", func(p *placement) {
			p.pods = append(p.pods, pod("a", "b3", "n1", "blue", spread), pod("a", "b4", "n2", "blue", spread))
		}, "pod a/b2: topology spread on topology.kubernetes.io/zone has skew 2, more than maxSkew 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := base()
			tc.change(p)
			v := p.violations()
			if !strings.Contains(strings.Join(v, "\n"), tc.want) {
				t.Errorf("violations = %q; want one containing %q", v, tc.want)
			}
		})
	}

	t.Run("preferred", func(t *testing.T) {
		p := base()
		for _, q := range p.pods[2:4] {
			q.Spec.TopologySpreadConstraints[0].WhenUnsatisfiable = v1.ScheduleAnyway
		}
		p.pods = append(p.pods, pod("a", "b3", "n2", "blue", spread), pod("a", "b4", "n2", "blue", spread), pod("a", "r2", "n1", "red", func(q *v1.Pod) {
			q.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{
				{Weight: 1, PodAffinityTerm: v1.PodAffinityTerm{LabelSelector: green, TopologyKey: "kubernetes.io/hostname"}}}}}
		}))
		// b2's constraint (ScheduleAnyway now) counts b1, b3 and b4 in
		// zone1 and b2 in zone2: skew 2 (b1's own sees zone1 alone: 0). b3's
		// DoNotSchedule constraint, the same count, is broken. r2 shares n1
		// with g1 (namespace a): met.
		if skew, met := p.preferred(); skew != 2 || met != 1 {
			t.Errorf("preferred() = %d, %v; want 2, 1", skew, met)
		}
		if v := strings.Join(p.violations(), "\n"); !strings.Contains(v, "pod a/b3: topology spread on topology.kubernetes.io/zone has skew 2") || strings.Contains(v, "pod a/b2:") {
			t.Errorf("violations = %s; want b3's DoNotSchedule constraint broken and b2's ScheduleAnyway one not reported", v)
		}
	})
}
