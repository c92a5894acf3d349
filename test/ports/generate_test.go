package ports

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/wasmsched/wasmsched/internal/framework/intree"
)

// The generated clusters draw from small sets so that matches and misses
// both happen often.
var (
	taintKeys   = []string{"dedicated", "gpu", "node.kubernetes.io/unschedulable", "spot"}
	taintValues = []string{"", "a", "b"}
	effects     = []v1.TaintEffect{v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute}
	labelKeys   = []string{"zone", "disk", "size", "team"}
	labelValues = []string{"a", "b", "ssd", "1", "3", "10", ""} // "" last (generateNodes)
)

// generateNodes makes n nodes with random labels, taints and cordons, and
// some running pods that use host ports.
func generateNodes(r *rand.Rand, n int) ([]fwk.NodeInfo, []*v1.Pod) {
	var infos []fwk.NodeInfo
	var all []*v1.Pod
	// Half the clusters have no label with the value "" (as real ones
	// seldom do): PodTopologySpread scores a node labelled "" through a
	// path of its own (upstream's domain "" also takes the nodes without
	// the key), and the other half would hide the usual path.
	values, zoneValues := labelValues, zones
	if r.IntN(2) == 0 {
		values, zoneValues = labelValues[:len(labelValues)-1], zones[:len(zones)-1]
	}
	for i := range n {
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i), Labels: map[string]string{}}}
		for _, k := range labelKeys {
			if r.IntN(3) > 0 {
				node.Labels[k] = values[r.IntN(len(values))]
			}
		}
		// The spread ports' topology: usually a hostname and a zone (of
		// three, or ""), sometimes neither.
		if r.IntN(8) > 0 {
			node.Labels[v1.LabelHostname] = node.Name
		}
		if r.IntN(6) > 0 {
			node.Labels[v1.LabelTopologyZone] = zoneValues[r.IntN(len(zoneValues))]
		}
		// VolumeZone's other keys: a region, sometimes a beta zone label.
		if r.IntN(3) == 0 {
			node.Labels[v1.LabelTopologyRegion] = []string{"r1", "r2"}[r.IntN(2)]
		}
		if r.IntN(8) == 0 {
			node.Labels[v1.LabelFailureDomainBetaZone] = zoneValues[r.IntN(len(zoneValues))]
		}
		node.Spec.Unschedulable = r.IntN(5) == 0
		node.Status.Allocatable = v1.ResourceList{}
		for _, name := range sortedNames(nodeResources) { // sorted: the same seed gives the same cluster
			values := nodeResources[name]
			if v := values[r.IntN(len(values))]; v != "" {
				node.Status.Allocatable[name] = resource.MustParse(v)
			}
		}
		node.Status.Capacity = node.Status.Allocatable
		for range r.IntN(5) {
			im := v1.ContainerImage{Names: []string{nodeImages[r.IntN(len(nodeImages))]}, SizeBytes: imageSizes[r.IntN(len(imageSizes))]}
			if r.IntN(3) == 0 { // a second name (a digest or another tag) for the same image
				im.Names = append(im.Names, nodeImages[r.IntN(len(nodeImages))])
			}
			node.Status.Images = append(node.Status.Images, im)
		}
		for range r.IntN(4) {
			node.Spec.Taints = append(node.Spec.Taints, v1.Taint{Key: taintKeys[r.IntN(len(taintKeys))], Value: taintValues[r.IntN(len(taintValues))], Effect: effects[r.IntN(len(effects))]})
		}
		var pods []*v1.Pod
		for j := range r.IntN(3) {
			p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("run-%d-%d", i, j), Namespace: namespaces[r.IntN(len(namespaces))],
				UID: types.UID(fmt.Sprintf("u-%d-%d", i, j)), Labels: randomLabels(r)}, Spec: v1.PodSpec{NodeName: node.Name}}
			if r.IntN(10) == 0 {
				p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1700000000, 0)}
			}
			if r.IntN(3) == 0 {
				p.Spec.Affinity = podAffinity(r, &v1.Affinity{})
			}
			p.Spec.Containers = []v1.Container{{Name: "c", Ports: randomPorts(r), Resources: v1.ResourceRequirements{Requests: randomRequests(r)}}}
			pods = append(pods, p)
		}
		ni := intree.NewNodeInfo(pods...)
		ni.SetNode(node)
		infos = append(infos, ni)
		all = append(all, pods...)
	}
	return infos, all
}

// generatePod makes a pod with random tolerations (every operator and
// effect, empty keys), containers and init containers (sidecars or not)
// with host ports, sometimes a nodeName (of a node or of none), a
// nodeSelector, and required and preferred node affinity of every
// operator, matchFields included; always valid as the API server would
// accept it.
func generatePod(r *rand.Rand, name string, nodes []fwk.NodeInfo) *v1.Pod {
	pod := spreadPod(r, name)
	pod.UID = types.UID("uid-" + name)
	if r.IntN(2) == 0 {
		for range 1 + r.IntN(2) {
			pod.Spec.TopologySpreadConstraints = append(pod.Spec.TopologySpreadConstraints, spreadConstraint(r))
		}
	}
	for range r.IntN(4) {
		tol := v1.Toleration{Key: taintKeys[r.IntN(len(taintKeys))], Value: taintValues[r.IntN(len(taintValues))]}
		switch r.IntN(4) {
		case 0:
			tol.Operator = v1.TolerationOpExists
			tol.Value = ""
			if r.IntN(3) == 0 {
				tol.Key = "" // tolerates every key
			}
		case 1:
			tol.Operator = v1.TolerationOpEqual
		case 2: // "" means Equal
		case 3:
			tol.Operator = v1.TolerationOpExists
			tol.Value = ""
		}
		if r.IntN(3) > 0 {
			tol.Effect = effects[r.IntN(len(effects))]
		}
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, tol)
	}
	for i := range 1 + r.IntN(2) {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: fmt.Sprint("app", i), Image: podImages[r.IntN(len(podImages))], Ports: randomPorts(r), Resources: v1.ResourceRequirements{Requests: randomRequests(r)}})
	}
	for i := range r.IntN(3) / 2 { // an image volume in one pod of three
		pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: fmt.Sprint("image", i), VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: podImages[r.IntN(len(podImages))]}}})
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, claimVolumes(r)...)
	if r.IntN(4) == 0 {
		// Sometimes below a millicore: upstream sums the quantities and
		// rounds once.
		pod.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: resource.MustParse([]string{"100m", "50u"}[r.IntN(2)]), v1.ResourceMemory: resource.MustParse("64Mi")}
	}
	if r.IntN(8) == 0 {
		pod.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("3"), v1.ResourceMemory: resource.MustParse("6Gi")}}
	}
	if r.IntN(3) == 0 {
		c := v1.Container{Name: "init", Image: podImages[r.IntN(len(podImages))], Ports: randomPorts(r), Resources: v1.ResourceRequirements{Requests: randomRequests(r)}}
		if r.IntN(2) == 0 {
			always := v1.ContainerRestartPolicyAlways // a sidecar: its ports count
			c.RestartPolicy = &always
		}
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
	}
	switch r.IntN(10) {
	case 0:
		pod.Spec.NodeName = nodes[r.IntN(len(nodes))].Node().Name
	case 1:
		pod.Spec.NodeName = "node-gone"
	}
	if r.IntN(3) == 0 {
		pod.Spec.NodeSelector = map[string]string{}
		for range r.IntN(3) {
			pod.Spec.NodeSelector[labelKeys[r.IntN(len(labelKeys))]] = labelValues[r.IntN(len(labelValues))]
		}
	}
	if r.IntN(2) == 0 {
		na := &v1.NodeAffinity{}
		if r.IntN(2) == 0 {
			na.RequiredDuringSchedulingIgnoredDuringExecution = &v1.NodeSelector{}
			for range 1 + r.IntN(3) {
				na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = append(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms, nodeTerm(r, nodes))
			}
		}
		if r.IntN(2) == 0 {
			for range 1 + r.IntN(3) {
				pref := nodeTerm(r, nodes)
				if r.IntN(12) == 0 {
					pref.MatchExpressions = append(pref.MatchExpressions, unparsableRequirement(r))
				}
				na.PreferredDuringSchedulingIgnoredDuringExecution = append(na.PreferredDuringSchedulingIgnoredDuringExecution,
					v1.PreferredSchedulingTerm{Weight: int32(1 + r.IntN(100)), Preference: pref})
			}
		}
		pod.Spec.Affinity = &v1.Affinity{NodeAffinity: na}
	}
	if r.IntN(2) == 0 {
		if pod.Spec.Affinity == nil {
			pod.Spec.Affinity = &v1.Affinity{}
		}
		podAffinity(r, pod.Spec.Affinity)
		if r.IntN(4) == 0 {
			// The first pod of a group: it selects itself alone, which
			// upstream lets start a domain.
			pod.Labels["group"] = name
			t := podAffinityTerm(r)
			t.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"group": name}}
			pa := pod.Spec.Affinity.PodAffinity
			pa.RequiredDuringSchedulingIgnoredDuringExecution = append(pa.RequiredDuringSchedulingIgnoredDuringExecution, t)
		}
	}
	return pod
}

// podAffinity adds random pod affinity and anti-affinity terms, required
// and preferred, to a.
func podAffinity(r *rand.Rand, a *v1.Affinity) *v1.Affinity {
	a.PodAffinity, a.PodAntiAffinity = &v1.PodAffinity{}, &v1.PodAntiAffinity{}
	if r.IntN(3) == 0 {
		for range 1 + r.IntN(2) {
			a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, podAffinityTerm(r))
		}
	}
	if r.IntN(3) == 0 {
		a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, podAffinityTerm(r))
	}
	for range r.IntN(3) {
		a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
			v1.WeightedPodAffinityTerm{Weight: int32(1 + r.IntN(100)), PodAffinityTerm: podAffinityTerm(r)})
	}
	for range r.IntN(3) {
		a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
			v1.WeightedPodAffinityTerm{Weight: int32(1 + r.IntN(100)), PodAffinityTerm: podAffinityTerm(r)})
	}
	return a
}

// podAffinityTerm is a valid pod affinity term: on the hostname, the zone
// or another node label; a nil, empty or random selector; the pod's own
// namespace, a list, an empty namespace selector (every namespace) or one
// that selects by labels.
func podAffinityTerm(r *rand.Rand) v1.PodAffinityTerm {
	t := v1.PodAffinityTerm{TopologyKey: []string{v1.LabelHostname, v1.LabelTopologyZone, v1.LabelTopologyZone, "disk"}[r.IntN(4)]}
	switch r.IntN(6) {
	case 0: // nil: matches nothing
	case 1:
		t.LabelSelector = &metav1.LabelSelector{}
	default:
		t.LabelSelector = randomLabelSelector(r)
	}
	switch r.IntN(7) {
	case 1:
		t.Namespaces = []string{"other"}
	case 2:
		t.NamespaceSelector = &metav1.LabelSelector{}
	case 3:
		t.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	case 4:
		t.Namespaces = []string{"default"}
		t.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"b"}}}}
	case 5: // selects "default" and, were the lister to hold it, "ghost"
		t.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpDoesNotExist}}}
	}
	return t
}

// zones are the values of topology.kubernetes.io/zone; namespaces those
// of the running pods (the scheduled pods' are spreadPod's): "ghost" has
// no Namespace object, so the scheduler's lister does not hold it, which
// upstream's namespace selectors of the incoming pod's terms exclude and
// the running pods' own terms see as a namespace without labels.
var (
	zones      = []string{"zone-a", "zone-b", "zone-c", ""} // "" last (generateNodes)
	namespaces = []string{"default", "default", "other", "ghost"}
)

// spreadConstraint is a valid topology spread constraint: on the hostname,
// the zone or another node label, either action, any maxSkew, selector
// (nil, empty or random), minDomains, node inclusion policy and
// matchLabelKeys.
func spreadConstraint(r *rand.Rand) v1.TopologySpreadConstraint {
	c := v1.TopologySpreadConstraint{
		MaxSkew:           int32(1 + r.IntN(3)),
		TopologyKey:       []string{v1.LabelHostname, v1.LabelTopologyZone, v1.LabelTopologyZone, "disk"}[r.IntN(4)],
		WhenUnsatisfiable: []v1.UnsatisfiableConstraintAction{v1.DoNotSchedule, v1.ScheduleAnyway}[r.IntN(2)],
	}
	switch r.IntN(6) {
	case 0: // nil: matches nothing
	case 1:
		c.LabelSelector = &metav1.LabelSelector{}
	default:
		c.LabelSelector = randomLabelSelector(r)
	}
	if c.WhenUnsatisfiable == v1.DoNotSchedule && r.IntN(4) == 0 {
		c.MinDomains = ptr.To(int32(1 + r.IntN(4)))
	}
	policies := []v1.NodeInclusionPolicy{v1.NodeInclusionPolicyHonor, v1.NodeInclusionPolicyIgnore}
	if r.IntN(3) == 0 {
		c.NodeAffinityPolicy = &policies[r.IntN(2)]
	}
	if r.IntN(3) == 0 {
		c.NodeTaintsPolicy = &policies[r.IntN(2)]
	}
	if c.LabelSelector != nil && r.IntN(4) == 0 {
		c.MatchLabelKeys = []string{spreadKeys[r.IntN(len(spreadKeys))]}
	}
	return c
}

// nodeImages are the names a node reports its images by (the runtime's
// normalized names), imageSizes their sizes: below ImageLocality's 23 MiB
// floor, inside its range and above 1000 MiB. podImages are what pods ask
// for: with and without a tag, with a registry port, one that no node
// holds.
var (
	nodeImages = []string{"nginx:latest", "nginx:1.27", "docker.io/library/nginx:latest", "registry.local:5000/app:latest",
		"registry.local:5000/app:v2", "busybox:latest", "ml/model:v1", "ml/model@sha256:0f3c"}
	imageSizes = []int64{5 << 20, 60 << 20, 300 << 20, 800 << 20, 3 << 30}
	podImages  = []string{"nginx", "nginx:latest", "nginx:1.27", "docker.io/library/nginx", "registry.local:5000/app",
		"registry.local:5000/app:v2", "busybox", "ml/model:v1", "ml/model@sha256:0f3c", "absent:1"}
)

// nodeResources are the values a node's allocatable takes per resource;
// "" leaves the resource out (the node does not report it).
var nodeResources = map[v1.ResourceName][]string{
	v1.ResourceCPU:              {"2", "4", "8", "16"},
	v1.ResourceMemory:           {"4Gi", "16Gi", "64Gi", ""},
	v1.ResourcePods:             {"2", "3", "110", "110"},
	v1.ResourceEphemeralStorage: {"10Gi", "50Gi", ""},
	"example.com/gpu":           {"0", "2", ""},
	"hugepages-2Mi":             {"1Gi", ""},
}

// containerRequests are the values a container's request takes per
// resource; "" leaves the resource out.
var containerRequests = map[v1.ResourceName][]string{
	v1.ResourceCPU:              {"", "0", "500m", "1", "2", "5", "1500u", "250500u"},
	v1.ResourceMemory:           {"", "0", "1Gi", "3Gi", "20Gi"},
	v1.ResourceEphemeralStorage: {"", "", "1Gi", "20Gi"},
	"example.com/gpu":           {"", "", "", "1", "3"},
	"hugepages-2Mi":             {"", "", "", "512Mi"},
}

// sortedNames are a resource map's keys in order, so that generation does
// not depend on map iteration.
func sortedNames[V any](m map[v1.ResourceName]V) []v1.ResourceName {
	names := make([]v1.ResourceName, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// randomRequests are a container's requests: missing, explicit 0, or
// amounts that fit some nodes and not others.
func randomRequests(r *rand.Rand) v1.ResourceList {
	rl := v1.ResourceList{}
	for _, name := range sortedNames(containerRequests) {
		values := containerRequests[name]
		if v := values[r.IntN(len(values))]; v != "" {
			rl[name] = resource.MustParse(v)
		}
	}
	return rl
}

// randomPorts are a container's ports: often without a host port, else one
// of a few host ports on no IP, 0.0.0.0 or one of two IPs, with or without
// a protocol.
func randomPorts(r *rand.Rand) []v1.ContainerPort {
	var ps []v1.ContainerPort
	for i := range r.IntN(3) {
		p := v1.ContainerPort{ContainerPort: int32(8000 + i)}
		if r.IntN(3) > 0 {
			p.HostPort = []int32{80, 443, 8080}[r.IntN(3)]
			p.HostIP = []string{"", "0.0.0.0", "10.0.0.1", "10.0.0.2"}[r.IntN(4)]
			p.Protocol = []v1.Protocol{"", v1.ProtocolTCP, v1.ProtocolUDP}[r.IntN(3)]
		}
		ps = append(ps, p)
	}
	return ps
}

func nodeTerm(r *rand.Rand, nodes []fwk.NodeInfo) v1.NodeSelectorTerm {
	var t v1.NodeSelectorTerm
	for range r.IntN(3) {
		req := v1.NodeSelectorRequirement{Key: labelKeys[r.IntN(len(labelKeys))]}
		switch op := r.IntN(6); op {
		case 0, 1:
			req.Operator = []v1.NodeSelectorOperator{v1.NodeSelectorOpIn, v1.NodeSelectorOpNotIn}[op]
			for range 1 + r.IntN(2) {
				req.Values = append(req.Values, labelValues[r.IntN(len(labelValues))])
			}
		case 2:
			req.Operator = v1.NodeSelectorOpExists
		case 3:
			req.Operator = v1.NodeSelectorOpDoesNotExist
		case 4, 5:
			req.Operator = []v1.NodeSelectorOperator{v1.NodeSelectorOpGt, v1.NodeSelectorOpLt}[op-4]
			req.Values = []string{fmt.Sprint(r.IntN(12))}
		}
		t.MatchExpressions = append(t.MatchExpressions, req)
	}
	if r.IntN(4) == 0 {
		op := []v1.NodeSelectorOperator{v1.NodeSelectorOpIn, v1.NodeSelectorOpNotIn}[r.IntN(2)]
		t.MatchFields = append(t.MatchFields, v1.NodeSelectorRequirement{Key: metav1.ObjectNameField, Operator: op, Values: []string{nodes[r.IntN(len(nodes))].Node().Name}})
	}
	return t
}

// unparsableRequirement is a node selector requirement that the API server
// accepts in a preferred term (it validates only the required ones) and
// that upstream cannot parse into a selector: a Gt or Lt value that is no
// integer, a value that is no label value (a comma-joined list among
// them, which must not read as two values), a key that is no label key.
// Upstream's PreScore then fails the pod's cycle with an Error.
func unparsableRequirement(r *rand.Rand) v1.NodeSelectorRequirement {
	switch r.IntN(5) {
	case 0:
		return v1.NodeSelectorRequirement{Key: "size", Operator: v1.NodeSelectorOpGt, Values: []string{"abc"}}
	case 1:
		return v1.NodeSelectorRequirement{Key: "size", Operator: v1.NodeSelectorOpLt, Values: []string{"1", "3"}}
	case 2:
		return v1.NodeSelectorRequirement{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"-5"}}
	case 3:
		return v1.NodeSelectorRequirement{Key: "disk", Operator: v1.NodeSelectorOpIn, Values: []string{"a,ssd"}}
	default:
		return v1.NodeSelectorRequirement{Key: "not a label!", Operator: v1.NodeSelectorOpExists}
	}
}
