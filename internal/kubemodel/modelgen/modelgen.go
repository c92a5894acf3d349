// Package modelgen makes random pods, nodes and clusters of the guest SDK's
// model (guest-sdk/model), over everything a case table can say. Tests
// that compare two paths on the same input draw their inputs here: the
// model's round trip (internal/kubemodel) and the tools' agreement with
// the scheduler (test/parity).
package modelgen

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"time"

	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

// Gen makes random model values over what a case table can say: every
// field of a pod, a node and a cluster, each often unset, with names,
// keys and values drawn from small sets so that selectors, taints and
// images meet each other.
type Gen struct{ r *rand.Rand }

// New returns a generator drawing from r: the same r, the same values.
func New(r *rand.Rand) *Gen { return &Gen{r} }

var (
	// Keys are the label and annotation keys the generator draws from.
	Keys       = []string{"app", "team", "zone", "example.com/tier", "kubernetes.io/hostname"}
	genValues  = []string{"a", "b", "web", "db", "", "x-1"}
	Namespaces = []string{"team-a", "team-b", "default"}
	Resources  = []string{"cpu", "memory", "ephemeral-storage", "pods", "hugepages-2Mi", "example.com/gpu", "kubernetes.io/batch", "foo", "requests.example.com/x"}
	genEffects = []string{"NoSchedule", "PreferNoSchedule", "NoExecute", ""}
	genImages  = []string{"nginx:1", "envoy:1", "db:2"}
)

func (g *Gen) maybe() bool            { return g.r.IntN(3) == 0 }
func (g *Gen) pick(s []string) string { return s[g.r.IntN(len(s))] }

func (g *Gen) strs(s []string) []string {
	var out []string
	for range g.r.IntN(3) {
		out = append(out, g.pick(s))
	}
	return out
}

func (g *Gen) labels() map[string]string {
	if g.maybe() {
		return nil
	}
	m := map[string]string{}
	for range g.r.IntN(4) {
		m[g.pick(Keys)] = g.pick(genValues)
	}
	return m
}

func (g *Gen) quantities() map[string]int64 {
	if g.maybe() {
		return nil
	}
	m := map[string]int64{}
	for range 1 + g.r.IntN(4) {
		name := g.pick(Resources)
		v := int64(g.r.IntN(4) * 250)
		if name == "memory" || name == "ephemeral-storage" {
			v <<= 20
		}
		m[name] = v
	}
	return m
}

func (g *Gen) timestamp() string {
	if g.maybe() {
		return ""
	}
	return time.Date(2026, 11, 1+g.r.IntN(28), g.r.IntN(24), g.r.IntN(60), 0, 0, time.UTC).Format(time.RFC3339)
}

func (g *Gen) selector() *model.LabelSelector {
	if g.maybe() {
		return nil
	}
	s := &model.LabelSelector{MatchLabels: g.labels()}
	for range g.r.IntN(3) {
		op := g.pick([]string{"In", "NotIn", "Exists", "DoesNotExist"})
		var vs []string
		if op == "In" || op == "NotIn" {
			vs = append(vs, g.pick(genValues))
		}
		s.MatchExpressions = append(s.MatchExpressions, model.LabelSelectorRequirement{Key: g.pick(Keys), Operator: op, Values: vs})
	}
	return s
}

func (g *Gen) podTerm() model.PodAffinityTerm {
	t := model.PodAffinityTerm{LabelSelector: g.selector(), TopologyKey: g.pick(Keys), MatchLabelKeys: g.strs(Keys), MismatchLabelKeys: g.strs(Keys)}
	if g.maybe() {
		t.Namespaces = g.strs(Namespaces)
	}
	if g.maybe() {
		t.NamespaceSelector = g.selector()
	}
	return t
}

func (g *Gen) nodeTerm() model.NodeSelectorTerm {
	var t model.NodeSelectorTerm
	for range g.r.IntN(3) {
		t.MatchExpressions = append(t.MatchExpressions, model.NodeSelectorRequirement{Key: g.pick(Keys), Operator: g.pick([]string{"In", "NotIn", "Exists", "Gt"}), Values: g.strs(genValues)})
	}
	if g.maybe() {
		t.MatchFields = append(t.MatchFields, model.NodeSelectorRequirement{Key: "metadata.name", Operator: "In", Values: []string{"n0"}})
	}
	return t
}

func (g *Gen) affinity() *model.Affinity {
	if g.maybe() {
		return nil
	}
	a := &model.Affinity{}
	for range g.r.IntN(3) {
		a.NodeAffinityRequired = append(a.NodeAffinityRequired, g.nodeTerm())
	}
	for range g.r.IntN(2) {
		a.NodeAffinityPreferred = append(a.NodeAffinityPreferred, model.PreferredSchedulingTerm{Weight: int32(1 + g.r.IntN(100)), Preference: g.nodeTerm()})
	}
	for range g.r.IntN(2) {
		a.PodAffinityRequired = append(a.PodAffinityRequired, g.podTerm())
	}
	for range g.r.IntN(2) {
		a.PodAntiAffinityRequired = append(a.PodAntiAffinityRequired, g.podTerm())
	}
	for range g.r.IntN(2) {
		a.PodAffinityPreferred = append(a.PodAffinityPreferred, model.WeightedPodAffinityTerm{Weight: int32(1 + g.r.IntN(100)), PodAffinityTerm: g.podTerm()})
	}
	for range g.r.IntN(2) {
		a.PodAntiAffinityPreferred = append(a.PodAntiAffinityPreferred, model.WeightedPodAffinityTerm{Weight: int32(1 + g.r.IntN(100)), PodAffinityTerm: g.podTerm()})
	}
	return a
}

func (g *Gen) owners() []model.OwnerReference {
	var out []model.OwnerReference
	for i := range g.r.IntN(3) {
		out = append(out, model.OwnerReference{APIVersion: "apps/v1", Kind: g.pick([]string{"ReplicaSet", "StatefulSet"}), Name: fmt.Sprint("o", i), UID: fmt.Sprint("u", g.r.IntN(9)), Controller: g.r.IntN(2) == 0})
	}
	return out
}

func (g *Gen) Pod(name string) *model.Pod {
	p := &model.Pod{Name: name, Namespace: g.pick(Namespaces), Labels: g.labels(), Annotations: g.labels(), NodeSelector: g.labels(),
		Priority: int64(g.r.IntN(3) * 1000), OwnerReferences: g.owners(), Overhead: g.quantities(), PodResources: g.quantities(),
		ClaimNames: g.strs([]string{"data", "logs"}), ImageVolumes: g.strs(genImages), SchedulingGates: g.strs([]string{"quota", "team"}),
		CreationTimestamp: g.timestamp(), DeletionTimestamp: g.timestamp(), Affinity: g.affinity()}
	if g.maybe() {
		p.UID = "uid-" + name
	}
	if g.maybe() {
		p.SchedulerName, p.PriorityClassName, p.ServiceAccountName, p.NodeName = "wasm", "high", "sa", "n0"
	}
	for range g.r.IntN(3) {
		t := model.Toleration{Key: g.pick(Keys), Operator: g.pick([]string{"", "Equal", "Exists"}), Value: g.pick(genValues), Effect: g.pick(genEffects)}
		if g.maybe() {
			t.TolerationSeconds = fmt.Sprint(g.r.IntN(600))
		}
		p.Tolerations = append(p.Tolerations, t)
	}
	if g.r.IntN(2) == 0 {
		p.Requests = g.quantities()
	} else {
		for i := range g.r.IntN(4) {
			c := model.Container{Kind: g.pick([]string{model.ContainerApp, model.ContainerInit}), Name: fmt.Sprint("c", i), Image: g.pick(genImages), Requests: g.quantities()}
			if c.Kind == model.ContainerInit && g.maybe() {
				c.RestartPolicy = "Always"
			}
			for range g.r.IntN(2) {
				c.Ports = append(c.Ports, model.ContainerPort{Name: "p", ContainerPort: int32(80 + g.r.IntN(3)), HostPort: int32(g.r.IntN(2) * 8080), Protocol: g.pick([]string{"", "TCP", "UDP"}), HostIP: g.pick([]string{"", "10.0.0.1"})})
			}
			p.Containers = append(p.Containers, c)
		}
	}
	for range g.r.IntN(3) {
		p.TopologySpreadConstraints = append(p.TopologySpreadConstraints, model.TopologySpreadConstraint{MaxSkew: int32(1 + g.r.IntN(3)), TopologyKey: g.pick(Keys),
			WhenUnsatisfiable: g.pick([]string{"DoNotSchedule", "ScheduleAnyway"}), LabelSelector: g.selector(), MinDomains: int32(g.r.IntN(3)),
			NodeAffinityPolicy: g.pick([]string{"", "Honor", "Ignore"}), NodeTaintsPolicy: g.pick([]string{"", "Honor", "Ignore"}), MatchLabelKeys: g.strs(Keys)})
	}
	if g.maybe() {
		p.DefaultSpreadSelector = g.selector()
	}
	g.otherStrings(p)
	return p
}

// otherStrings gives each top-level string field of a pod or node that is
// still empty (one the generator above does not know, such as a field
// added since) a value one time in three, so the round trip covers a new
// string read with no change here. Timestamps keep their own generator.
func (g *Gen) otherStrings(obj any) {
	v := reflect.ValueOf(obj).Elem()
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		if f.Kind() == reflect.String && f.String() == "" && !strings.HasSuffix(name, "Timestamp") && g.maybe() {
			f.SetString(fmt.Sprint(strings.ToLower(name), "-", g.r.IntN(3)))
		}
	}
}

func (g *Gen) Node(name string) *model.Node {
	n := &model.Node{Name: name, Labels: g.labels(), Annotations: g.labels(), Allocatable: g.quantities(), Capacity: g.quantities(),
		Unschedulable: g.maybe(), Requested: g.quantities(), PodCount: g.r.IntN(4)}
	// status.nodeInfo, each set or not.
	for _, f := range []struct {
		to   *string
		from []string
	}{
		{&n.KubeletVersion, []string{"v1.37.2", "v1.30.0-eks-1"}}, {&n.KernelVersion, []string{"6.8.0-1019-aws", "5.15.0"}},
		{&n.OSImage, []string{"Ubuntu 24.04.1 LTS", "Bottlerocket OS 1.20.0"}}, {&n.OperatingSystem, []string{"linux", "windows"}},
		{&n.Architecture, []string{"amd64", "arm64"}}, {&n.ContainerRuntimeVersion, []string{"containerd://1.7.22", "cri-o://1.30.0"}},
	} {
		if g.maybe() {
			*f.to = g.pick(f.from)
		}
	}
	for range g.r.IntN(3) {
		n.Taints = append(n.Taints, model.Taint{Key: g.pick(Keys), Value: g.pick(genValues), Effect: g.pick(genEffects[:3])})
	}
	for range g.r.IntN(3) {
		n.Conditions = append(n.Conditions, model.NodeCondition{Type: g.pick([]string{"Ready", "DiskPressure"}), Status: g.pick([]string{"True", "False", "Unknown"}), Reason: g.pick(genValues)})
	}
	for range g.r.IntN(3) {
		n.Images = append(n.Images, model.NodeImage{Name: g.pick(genImages), SizeBytes: int64(1+g.r.IntN(3)) << 20})
	}
	for range g.r.IntN(2) {
		n.Addresses = append(n.Addresses, model.NodeAddress{Type: "InternalIP", Address: fmt.Sprint("10.0.0.", g.r.IntN(9))})
	}
	for i := range g.r.IntN(4) {
		pn := fmt.Sprint(name, "-p", i)
		p := model.NodePod{Namespace: g.pick(Namespaces), Name: pn, Priority: int64(g.r.IntN(3) * 100), Terminating: g.maybe(),
			Labels: g.labels(), OwnerReferences: g.owners(), Affinity: g.affinity()}
		if g.r.IntN(4) != 0 {
			p.UID = "uid-" + pn
		}
		for range g.r.IntN(3) {
			p.HostPorts = append(p.HostPorts, model.HostPort{IP: g.pick([]string{"", "10.0.0.1"}), Protocol: g.pick([]string{"", "TCP", "UDP"}), Port: int32(g.r.IntN(3) * 8080)})
		}
		n.Pods = append(n.Pods, p)
	}
	g.otherStrings(n)
	return n
}

func (g *Gen) Cluster() *model.Cluster {
	c := &model.Cluster{Namespaces: map[string]map[string]string{}}
	for _, ns := range Namespaces[:1+g.r.IntN(len(Namespaces))] {
		c.Namespaces[ns] = g.labels()
	}
	for i := range 1 + g.r.IntN(4) {
		c.Nodes = append(c.Nodes, g.Node(fmt.Sprint("n", i)))
	}
	// The claims a pod's ClaimNames may name, each in one namespace,
	// bound or not, to a volume and through a class that may be missing.
	for _, name := range []string{"data", "logs"} {
		if g.r.IntN(3) > 0 {
			c.Claims = append(c.Claims, model.PersistentVolumeClaim{Namespace: g.pick(Namespaces), Name: name,
				Phase: g.pick([]string{"Bound", "Pending", "Lost", ""}), VolumeName: g.pick([]string{"", "pv-1", "pv-2", "pv-gone"}),
				StorageClassName: g.pick([]string{"", "fast", "slow", "gone"})})
		}
	}
	for _, name := range []string{"pv-1", "pv-2"} {
		if g.r.IntN(3) > 0 {
			pv := model.PersistentVolume{Name: name, Labels: g.labels()}
			for range g.r.IntN(3) {
				pv.NodeAffinity = append(pv.NodeAffinity, g.nodeTerm())
			}
			c.PersistentVolumes = append(c.PersistentVolumes, pv)
		}
	}
	for _, name := range []string{"fast", "slow"} {
		if g.r.IntN(3) > 0 {
			sc := model.StorageClass{Name: name, Provisioner: g.pick([]string{"csi.example.com", ""}), VolumeBindingMode: g.pick([]string{"", "Immediate", "WaitForFirstConsumer"})}
			for range g.r.IntN(3) {
				var t model.NodeSelectorTerm // a class's terms hold In requirements only
				for range 1 + g.r.IntN(2) {
					t.MatchExpressions = append(t.MatchExpressions, model.NodeSelectorRequirement{Key: g.pick(Keys), Operator: "In", Values: g.strs(genValues)})
				}
				sc.AllowedTopologies = append(sc.AllowedTopologies, t)
			}
			c.StorageClasses = append(c.StorageClasses, sc)
		}
	}
	return c
}

func (g *Gen) CountTerm() model.CountTerm {
	t := model.CountTerm{LabelSelector: g.selector(), TopologyKey: g.pick(append([]string{""}, Keys...)), IncludeTerminating: g.maybe()}
	if g.maybe() {
		t.Namespaces = g.strs(Namespaces)
	}
	if g.maybe() {
		t.NamespaceSelector = g.selector()
	}
	if g.maybe() {
		t.AlsoMatching = []model.CountTerm{{LabelSelector: g.selector(), Namespaces: g.strs(Namespaces)}}
	}
	if g.maybe() {
		t.NodeKeys = g.strs(Keys)
	}
	t.NodeAffinityPolicy = g.pick([]string{"", model.NodeInclusionHonor, model.NodeInclusionIgnore})
	t.NodeTaintsPolicy = g.pick([]string{"", model.NodeInclusionHonor, model.NodeInclusionIgnore})
	return t
}
