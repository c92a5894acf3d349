package kubemodel

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
)

// NodePart is a group of model.Node fields converted together, once per
// NodeInfo generation.
type NodePart uint8

// The parts of a node.
const (
	// NodeScalars: the name, spec.unschedulable and the pod count.
	NodeScalars NodePart = iota
	NodeLabels
	NodeAnnotations
	NodeTaints
	// NodeAllocatable: Derived.Allocatable.
	NodeAllocatable
	NodeCapacity
	// NodeRequested: Derived.Requested.
	NodeRequested
	// NodeNonZero: Derived.NonZeroRequested.
	NodeNonZero
	NodeConditions
	NodeImages
	NodeAddresses
	// NodePods: Derived.Pods.
	NodePods
	// NodeUsedPorts: Derived.UsedPorts.
	NodeUsedPorts
	// NodeImageStates: Derived.ImageStates. The snapshot may change an
	// image's node count without this node's generation changing, so the
	// host converts it on every read.
	NodeImageStates
	// NumNodeParts is the number of parts.
	NumNodeParts
)

// NodeLabelsOf and NodeAnnotationsOf are the NodeLabels and
// NodeAnnotations parts of ni: the maps themselves, which the host looks
// a key up in on every node_label and node_annotation call.
func NodeLabelsOf(ni fwk.NodeInfo) map[string]string { return ni.Node().Labels }

// NodeAnnotationsOf: see NodeLabelsOf.
func NodeAnnotationsOf(ni fwk.NodeInfo) map[string]string { return ni.Node().Annotations }

// Cheap reports whether converting part costs only copies (no allocation,
// no computation): the host converts such a part per read rather than
// looking up the node's cache entry.
func Cheap(part NodePart) bool {
	return part == NodeScalars || part == NodeLabels || part == NodeAnnotations
}

// NodeListPart is the part node_list kind reads (NumNodeParts for an
// unknown kind).
func NodeListPart(kind int32) NodePart {
	switch kind {
	case model.NodeLabels:
		return NodeLabels
	case model.NodeAnnotations:
		return NodeAnnotations
	case model.NodeTaints:
		return NodeTaints
	case model.NodeAllocatable:
		return NodeAllocatable
	case model.NodeCapacity:
		return NodeCapacity
	case model.NodeRequested:
		return NodeRequested
	case model.NodeNonZeroRequested:
		return NodeNonZero
	case model.NodeConditions:
		return NodeConditions
	case model.NodeImages:
		return NodeImages
	case model.NodeAddresses:
		return NodeAddresses
	case model.NodePods, model.NodePodLabels, model.NodePodOwners:
		return NodePods
	case model.NodeUsedPorts:
		return NodeUsedPorts
	case model.NodeImageStates:
		return NodeImageStates
	}
	return NumNodeParts
}

// ResourcePart is the part node_resource kind reads.
func ResourcePart(kind int32) NodePart {
	switch kind {
	case model.ResourceAllocatable:
		return NodeAllocatable
	case model.ResourceCapacity:
		return NodeCapacity
	case model.ResourceRequested:
		return NodeRequested
	case model.ResourceNonZeroRequested:
		return NodeNonZero
	}
	return NumNodeParts
}

// ColumnPart is the part a node-table column of kind reads.
func ColumnPart(kind string) NodePart {
	switch kind {
	case abi.ColLabel:
		return NodeLabels
	case abi.ColAnnotation:
		return NodeAnnotations
	case abi.ColAllocatable:
		return NodeAllocatable
	case abi.ColCapacity:
		return NodeCapacity
	case abi.ColRequested:
		return NodeRequested
	case abi.ColNonZeroRequested:
		return NodeNonZero
	case abi.ColTaint, abi.ColTaintEffects:
		return NodeTaints
	case abi.ColImage:
		return NodeImages
	}
	return NodeScalars
}

// FillNode converts part of ni into m, touching only that part's fields.
func FillNode(m *model.Node, ni fwk.NodeInfo, part NodePart) {
	node := ni.Node()
	switch part {
	case NodeScalars:
		m.Name, m.Unschedulable = node.Name, node.Spec.Unschedulable
		info := &node.Status.NodeInfo
		m.KubeletVersion, m.KernelVersion, m.OSImage = info.KubeletVersion, info.KernelVersion, info.OSImage
		m.OperatingSystem, m.Architecture, m.ContainerRuntimeVersion = info.OperatingSystem, info.Architecture, info.ContainerRuntimeVersion
		m.Derived.PodCount = len(ni.GetPods())
	case NodeLabels:
		m.Labels = NodeLabelsOf(ni)
	case NodeAnnotations:
		m.Annotations = NodeAnnotationsOf(ni)
	case NodeTaints:
		m.Taints = make([]model.Taint, len(node.Spec.Taints))
		for i, t := range node.Spec.Taints {
			m.Taints[i] = model.Taint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)}
		}
	case NodeAllocatable:
		a := resourceMap(ni.GetAllocatable())
		for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage, v1.ResourcePods} {
			// The NodeInfo cannot tell a core resource the node does not
			// report from 0; the Node can.
			if _, ok := node.Status.Allocatable[name]; !ok {
				delete(a, string(name))
			}
		}
		m.Derived.Allocatable = a
	case NodeCapacity:
		m.Capacity = Quantities(node.Status.Capacity)
	case NodeRequested:
		m.Derived.Requested = resourceMap(ni.GetRequested())
	case NodeNonZero:
		r := ni.GetNonZeroRequested()
		m.Derived.NonZeroRequested = map[string]int64{abi.ResourceCPU: r.GetMilliCPU(), abi.ResourceMemory: r.GetMemory()}
	case NodeConditions:
		m.Conditions = make([]model.NodeCondition, len(node.Status.Conditions))
		for i, c := range node.Status.Conditions {
			m.Conditions[i] = model.NodeCondition{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason}
		}
	case NodeImages:
		m.Images = nil
		for _, im := range node.Status.Images {
			for _, name := range im.Names {
				m.Images = append(m.Images, model.NodeImage{Name: name, SizeBytes: im.SizeBytes})
			}
		}
	case NodeAddresses:
		m.Addresses = make([]model.NodeAddress, len(node.Status.Addresses))
		for i, a := range node.Status.Addresses {
			m.Addresses[i] = model.NodeAddress{Type: string(a.Type), Address: a.Address}
		}
	case NodePods:
		pods := ni.GetPods()
		m.Derived.Pods = make([]model.NodePod, len(pods))
		for i, pi := range pods {
			p := pi.GetPod()
			np := model.NodePod{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID), Terminating: p.DeletionTimestamp != nil,
				Labels: p.Labels, OwnerReferences: owners(p.OwnerReferences)}
			if p.Spec.Priority != nil {
				np.Priority = int64(*p.Spec.Priority)
			}
			m.Derived.Pods[i] = np
		}
	case NodeUsedPorts:
		var ps []model.HostPort
		for ip, pm := range ni.GetUsedPorts() {
			for pp := range pm {
				ps = append(ps, model.HostPort{IP: ip, Protocol: pp.Protocol, Port: pp.Port})
			}
		}
		sort.Slice(ps, func(i, j int) bool {
			if ps[i].IP != ps[j].IP {
				return ps[i].IP < ps[j].IP
			}
			if ps[i].Protocol != ps[j].Protocol {
				return ps[i].Protocol < ps[j].Protocol
			}
			return ps[i].Port < ps[j].Port
		})
		m.Derived.UsedPorts = ps
	case NodeImageStates:
		states := ni.GetImageStates()
		m.Derived.ImageStates = make([]model.ImageState, 0, len(states))
		for _, name := range slices.Sorted(maps.Keys(states)) {
			st := states[name]
			m.Derived.ImageStates = append(m.Derived.ImageStates, model.ImageState{Name: name, SizeBytes: st.Size, NumNodes: st.NumNodes})
		}
	}
}

// resourceMap is a fwk.Resource in the model's units: the core four always,
// then each scalar resource.
func resourceMap(r fwk.Resource) map[string]int64 {
	m := map[string]int64{
		abi.ResourceCPU:                     r.GetMilliCPU(),
		abi.ResourceMemory:                  r.GetMemory(),
		string(v1.ResourceEphemeralStorage): r.GetEphemeralStorage(),
		abi.ResourcePods:                    int64(r.GetAllowedPodNumber()),
	}
	for name, v := range r.GetScalarResources() {
		m[string(name)] = v
	}
	return m
}

// NodeObject is the whole node as JSON (node_object): as the apiserver
// serves it, apiVersion and kind set, without metadata.managedFields.
func NodeObject(node *v1.Node) []byte {
	n := *node
	n.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}
	n.ManagedFields = nil
	return encodeObject(&n)
}

// ToNode converts a model node (a case table's) into a real Node and the
// pods on it (model.NodePods: its Pods, the load pod with Requested, and
// pods up to PodCount): its Object, if any, then the fields that are set,
// over it.
func ToNode(d *model.Node) (*v1.Node, []*v1.Pod, error) {
	node := &v1.Node{}
	if len(d.Object) > 0 {
		if err := decodeObject(d.Object, node); err != nil {
			return nil, nil, fmt.Errorf("node Object: %w", err)
		}
	}
	if d.Name != "" {
		node.Name = d.Name
	}
	if d.Labels != nil {
		node.Labels = d.Labels
	}
	if d.Annotations != nil {
		node.Annotations = d.Annotations
	}
	if d.Unschedulable {
		node.Spec.Unschedulable = true
	}
	// status.nodeInfo: what the case sets, over what its Object set.
	info := &node.Status.NodeInfo
	for _, f := range []struct {
		to   *string
		from string
	}{
		{&info.KubeletVersion, d.KubeletVersion}, {&info.KernelVersion, d.KernelVersion}, {&info.OSImage, d.OSImage},
		{&info.OperatingSystem, d.OperatingSystem}, {&info.Architecture, d.Architecture}, {&info.ContainerRuntimeVersion, d.ContainerRuntimeVersion},
	} {
		if f.from != "" {
			*f.to = f.from
		}
	}
	if d.Allocatable != nil {
		node.Status.Allocatable = resourceList(d.Allocatable)
	}
	if d.Capacity != nil {
		node.Status.Capacity = resourceList(d.Capacity)
	}
	for _, c := range d.Conditions {
		node.Status.Conditions = append(node.Status.Conditions, v1.NodeCondition{Type: v1.NodeConditionType(c.Type), Status: v1.ConditionStatus(c.Status), Reason: c.Reason})
	}
	for _, im := range d.Images {
		node.Status.Images = append(node.Status.Images, v1.ContainerImage{Names: []string{im.Name}, SizeBytes: im.SizeBytes})
	}
	for _, a := range d.Addresses {
		node.Status.Addresses = append(node.Status.Addresses, v1.NodeAddress{Type: v1.NodeAddressType(a.Type), Address: a.Address})
	}
	if len(d.Taints) > 0 {
		node.Spec.Taints = nil
	}
	for _, t := range d.Taints {
		node.Spec.Taints = append(node.Spec.Taints, v1.Taint{Key: t.Key, Value: t.Value, Effect: v1.TaintEffect(t.Effect)})
	}
	// What the node derives from its pods, the pods give the scheduler:
	// DeriveNode checks a NonZeroRequested the case set against them.
	if _, err := model.DeriveNode(d, nil); err != nil {
		return nil, nil, err
	}
	mpods, load := model.PodsOn(d)
	pods := make([]*v1.Pod, len(mpods))
	for i, np := range mpods {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: np.Name, Namespace: np.Namespace, UID: types.UID(np.UID), Labels: np.Labels}}
		p.Spec.NodeName = node.Name
		p.OwnerReferences = toOwners(np.OwnerReferences)
		if np.Priority != 0 {
			prio := int32(np.Priority)
			p.Spec.Priority = &prio
		}
		if np.Affinity != nil {
			p.Spec.Affinity = affinity(np.Affinity)
		}
		if np.Terminating {
			now := metav1.Now()
			p.DeletionTimestamp = &now
		}
		if len(np.HostPorts) > 0 {
			c := v1.Container{Name: "c"}
			for _, h := range np.HostPorts {
				c.Ports = append(c.Ports, v1.ContainerPort{ContainerPort: h.Port, HostPort: h.Port, HostIP: h.IP, Protocol: v1.Protocol(h.Protocol)})
			}
			p.Spec.Containers = []v1.Container{c}
		}
		if i == load {
			p.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: resourceList(d.Requested)}}}
		}
		pods[i] = p
	}
	return node, pods, nil
}

func toOwners(refs []model.OwnerReference) []metav1.OwnerReference {
	var out []metav1.OwnerReference
	for _, o := range refs {
		controller := o.Controller
		out = append(out, metav1.OwnerReference{APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name, UID: types.UID(o.UID), Controller: &controller})
	}
	return out
}

// ToNodeInfo converts a model node into the scheduler's NodeInfo of the
// node and its pods (ToNode).
func ToNodeInfo(d *model.Node) (fwk.NodeInfo, error) {
	node, pods, err := ToNode(d)
	if err != nil {
		return nil, err
	}
	ni := intree.NewNodeInfo(pods...)
	ni.SetNode(node)
	return ni, nil
}

// NodeResource is node_resource's kind for one resource of ni, read in
// place: what model.NodeResource answers for the model FillNode converts
// (TestRoundTrip reads both), without building the part's map. The host
// reads a resource on every call of a policy that has no node table, and
// four map lookups cost a bin-packing Score 8% more per node than this
// (docs/abi.md RATIONALE).
func NodeResource(ni fwk.NodeInfo, kind int32, name string) (int64, bool) {
	switch kind {
	case model.ResourceAllocatable:
		switch name {
		case abi.ResourceCPU, abi.ResourceMemory, string(v1.ResourceEphemeralStorage), abi.ResourcePods:
			// The NodeInfo cannot tell a core resource the node does not
			// report from 0; the Node can.
			if _, ok := ni.Node().Status.Allocatable[v1.ResourceName(name)]; !ok {
				return abi.MissingQuantity, true
			}
		}
		return resourceValue(ni.GetAllocatable(), name), true
	case model.ResourceRequested:
		if v := resourceValue(ni.GetRequested(), name); v != abi.MissingQuantity {
			return v, true
		}
		return 0, true
	case model.ResourceNonZeroRequested:
		switch name {
		case abi.ResourceCPU:
			return ni.GetNonZeroRequested().GetMilliCPU(), true
		case abi.ResourceMemory:
			return ni.GetNonZeroRequested().GetMemory(), true
		}
		return 0, true
	case model.ResourceCapacity:
		if q, ok := ni.Node().Status.Capacity[v1.ResourceName(name)]; ok {
			return QuantityValue(v1.ResourceName(name), q), true
		}
		return abi.MissingQuantity, true
	}
	return abi.MissingQuantity, false
}

// resourceValue reads one resource of a fwk.Resource without building a map.
func resourceValue(r fwk.Resource, name string) int64 {
	switch name {
	case abi.ResourceCPU:
		return r.GetMilliCPU()
	case abi.ResourceMemory:
		return r.GetMemory()
	case string(v1.ResourceEphemeralStorage):
		return r.GetEphemeralStorage()
	case abi.ResourcePods:
		return int64(r.GetAllowedPodNumber())
	}
	if v, ok := r.GetScalarResources()[v1.ResourceName(name)]; ok {
		return v
	}
	return abi.MissingQuantity
}
