package model

import (
	"strconv"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
)

// A node as a policy reads it, and the encoders of the node's rows of the
// fields table (node_string, node_taint, node_resource, node_list, the
// node-table columns).

// Fields for node_string.
const (
	NodeName int32 = 0
	// NodeKubeletVersion is status.nodeInfo.kubeletVersion.
	NodeKubeletVersion int32 = 1
	// NodeKernelVersion is status.nodeInfo.kernelVersion.
	NodeKernelVersion int32 = 2
	// NodeOSImage is status.nodeInfo.osImage.
	NodeOSImage int32 = 3
	// NodeOperatingSystem is status.nodeInfo.operatingSystem.
	NodeOperatingSystem int32 = 4
	// NodeArchitecture is status.nodeInfo.architecture.
	NodeArchitecture int32 = 5
	// NodeContainerRuntimeVersion is status.nodeInfo.containerRuntimeVersion.
	NodeContainerRuntimeVersion int32 = 6
)

// Kinds for node_list.
const (
	NodeLabels      int32 = 0
	NodeAnnotations int32 = 1
	NodeTaints      int32 = 2 // entries of 3 strings: key, value, effect
	NodeAllocatable int32 = 3 // entries of 2 strings: resource name, decimal int64 value
	NodeCapacity    int32 = 4
	NodeRequested   int32 = 5
	// NodeConditions: status.conditions, 3 strings each: type, status, reason.
	NodeConditions int32 = 6
	// NodeImages: status.images, 2 strings per name of each image: name,
	// decimal sizeBytes.
	NodeImages int32 = 7
	// NodeAddresses: status.addresses, 2 strings each: type, address.
	NodeAddresses int32 = 8
	// NodePods: the pods on the node as the scheduler sees them (assumed
	// pods included), 5 strings each: namespace, name, uid, priority
	// (decimal), terminating ("true" once deletionTimestamp is set).
	NodePods int32 = 9
	// NodePodLabels: 3 strings per label: pod index (in NodePods order),
	// key, value.
	NodePodLabels int32 = 10
	// NodePodOwners: 6 strings per owner reference: pod index, apiVersion,
	// kind, name, uid, controller ("true" or "false").
	NodePodOwners int32 = 11
	// NodeUsedPorts: the host ports the node's pods use, 3 strings each: ip,
	// protocol, port; sorted.
	NodeUsedPorts int32 = 12
	// NodeNonZeroRequested: the requests of the pods on the node as
	// NodeResourcesFit scores them (a container without a cpu or memory
	// request counts 100m / 200Mi), cpu and memory, name, decimal pairs.
	NodeNonZeroRequested int32 = 13
	// NodeImageStates: the scheduler's image states for the node, 3
	// strings per image name: name, decimal size in bytes, decimal number
	// of nodes in the scheduler's snapshot that hold the image (as
	// ImageLocality reads them). Encoded on every call: the count depends
	// on other nodes.
	NodeImageStates int32 = 14

	// NumNodeLists sizes tables indexed by node_list kind.
	NumNodeLists = NodeImageStates + 1
)

// Kinds for node_resource.
const (
	ResourceAllocatable int32 = 0
	ResourceCapacity    int32 = 1
	ResourceRequested   int32 = 2
	// ResourceNonZeroRequested is cpu or memory of NodeNonZeroRequested;
	// 0 for any other resource.
	ResourceNonZeroRequested int32 = 3
)

// Node is a node as a policy reads it. In a scheduler the host converts
// a NodeInfo into it (internal/kubemodel), once per NodeInfo generation;
// natively and in case tables it is a test's node.
type Node struct {
	Name string
	// KubeletVersion is status.nodeInfo.kubeletVersion ("v1.37.2").
	KubeletVersion string
	// KernelVersion, OSImage, OperatingSystem, Architecture and
	// ContainerRuntimeVersion are the rest of status.nodeInfo that a
	// policy may key on, as the kubelet reports them.
	KernelVersion, OSImage, OperatingSystem, Architecture, ContainerRuntimeVersion string
	Labels, Annotations                                                            map[string]string
	Taints                                                                         []Taint
	// Allocatable and Capacity are status.allocatable and status.capacity.
	Allocatable, Capacity map[string]int64
	// Requested are the requests of one pod on the node named <node>-load
	// (its one container's), for a test that needs a loaded node but not
	// its pods; none when unset.
	Requested map[string]int64
	// PodCount is how many pods run on the node in all: Pods, the load
	// pod, then pods named <node>-pod<i> with nothing set, up to PodCount.
	PodCount      int
	Unschedulable bool
	Conditions    []NodeCondition
	Images        []NodeImage
	Addresses     []NodeAddress
	// Pods are pods on the node with what a policy reads of them.
	Pods []NodePod
	// NonZeroRequested is derived from the node's pods (Derived); a test
	// may set it to say what it expects, and DeriveNode fails when the
	// pods give something else.
	NonZeroRequested map[string]int64
	// Object is the whole node as JSON (Node.Object). In a case table it is
	// the node the case starts from, with the fields above applied over it
	// by the host; natively Node.Object returns it as given.
	Object RawJSON

	// Derived is what the scheduler computes from the node, its pods and
	// the cluster, which the encoders read: the host fills it from the
	// NodeInfo, and natively DeriveNode computes it. Case tables never set
	// it.
	Derived NodeDerived `json:"-"`
}

// NodeDerived is what the scheduler's NodeInfo holds beyond the Node.
type NodeDerived struct {
	// Pods are all the pods on the node (Node.Pods), PodCount how many.
	Pods     []NodePod
	PodCount int
	// Allocatable is what the scheduler counts of status.allocatable: the
	// resources it keeps (cpu, memory, ephemeral-storage, pods and scalar
	// resources), the core four only when the node reports them.
	Allocatable map[string]int64
	// Requested sums the pods' effective requests: cpu, memory,
	// ephemeral-storage and pods always (pods is always 0), and each
	// scalar resource requested.
	Requested map[string]int64
	// NonZeroRequested is cpu and memory as NodeResourcesFit scores them.
	NonZeroRequested map[string]int64
	// UsedPorts are the host ports the pods use, sorted.
	UsedPorts []HostPort
	// ImageStates are the node's images as ImageLocality reads them, sorted
	// by name.
	ImageStates []ImageState
}

// Taint is a node taint.
type Taint struct {
	Key, Value, Effect string
}

// NodeCondition is one of the node's status.conditions.
type NodeCondition struct {
	Type, Status, Reason string
}

// NodeImage is one name of an image on the node, with the image's size.
type NodeImage struct {
	Name      string
	SizeBytes int64
}

// ImageState is one image name as the scheduler's snapshot has it for a
// node (ImageStateSummary): its size, and how many nodes hold it.
type ImageState struct {
	Name      string
	SizeBytes int64
	NumNodes  int
}

// NodeAddress is one of the node's status.addresses.
type NodeAddress struct {
	Type, Address string
}

// NodePod is a pod on the node, as the scheduler's snapshot has it.
type NodePod struct {
	Namespace, Name, UID string
	Priority             int64
	// Terminating is true once the pod's deletionTimestamp is set.
	Terminating     bool
	Labels          map[string]string
	OwnerReferences []OwnerReference
	// HostPorts are the pod's containers' host ports (natively they make
	// Node.UsedPorts; in case tables, the pod's container ports).
	HostPorts []HostPort
	// Affinity is the pod's spec.affinity: its pod affinity and
	// anti-affinity terms are what Cluster.ExistingTerms matches.
	Affinity *Affinity
}

// HostPort is a host port in use on the node. IP is "0.0.0.0" and
// Protocol "TCP" when the pod leaves them unset.
type HostPort struct {
	IP, Protocol string
	Port         int32
}

// NodeString is node_string's field; ok is false for an unknown field.
func NodeString(n *Node, field int32) (string, bool) {
	switch field {
	case NodeName:
		return n.Name, true
	case NodeKubeletVersion:
		return n.KubeletVersion, true
	case NodeKernelVersion:
		return n.KernelVersion, true
	case NodeOSImage:
		return n.OSImage, true
	case NodeOperatingSystem:
		return n.OperatingSystem, true
	case NodeArchitecture:
		return n.Architecture, true
	case NodeContainerRuntimeVersion:
		return n.ContainerRuntimeVersion, true
	}
	return "", false
}

// NodeTaint appends node_taint's answer for key to b: the value and effect
// of each taint with the key; ok is false when no taint has it.
func NodeTaint(b []byte, n *Node, key string) ([]byte, bool) {
	c := 0
	for i := range n.Taints {
		if n.Taints[i].Key == key {
			c++
		}
	}
	if c == 0 {
		return b, false
	}
	b = abi.AppendListHeader(b, 2*c)
	for i := range n.Taints {
		if t := &n.Taints[i]; t.Key == key {
			b = abi.AppendString(abi.AppendString(b, t.Value), t.Effect)
		}
	}
	return b, true
}

// NodeResource is node_resource's kind for one resource, in ABI units:
// abi.MissingQuantity when the node does not report it (requested: 0);
// ok is false for an unknown kind (which also answers MissingQuantity).
func NodeResource(n *Node, kind int32, name string) (int64, bool) {
	var m map[string]int64
	switch kind {
	case ResourceAllocatable:
		m = n.Derived.Allocatable
	case ResourceCapacity:
		m = n.Capacity
	case ResourceRequested:
		return n.Derived.Requested[name], true
	case ResourceNonZeroRequested:
		return n.Derived.NonZeroRequested[name], true
	default:
		return abi.MissingQuantity, false
	}
	if v, ok := m[name]; ok {
		return v, true
	}
	return abi.MissingQuantity, true
}

// NodePodCount is node_pod_count: the pods on the node.
func NodePodCount(n *Node) int { return n.Derived.PodCount }

// NodeList is node_list's kind; ok is false for an unknown kind.
func NodeList(n *Node, kind int32) ([]byte, bool) {
	var r records
	switch kind {
	case NodeLabels:
		return EncodeMap(n.Labels), true
	case NodeAnnotations:
		return EncodeMap(n.Annotations), true
	case NodeTaints:
		return encodeTaints(n.Taints), true
	case NodeAllocatable:
		return EncodeInts(n.Derived.Allocatable), true
	case NodeCapacity:
		return EncodeInts(n.Capacity), true
	case NodeRequested:
		return EncodeInts(n.Derived.Requested), true
	case NodeNonZeroRequested:
		return EncodeInts(n.Derived.NonZeroRequested), true
	case NodeConditions:
		for _, c := range n.Conditions {
			r.add(c.Type, c.Status, c.Reason)
		}
	case NodeImages:
		for _, im := range n.Images {
			r.add(im.Name, strconv.FormatInt(im.SizeBytes, 10))
		}
	case NodeAddresses:
		for _, a := range n.Addresses {
			r.add(a.Type, a.Address)
		}
	case NodeImageStates:
		for _, s := range n.Derived.ImageStates {
			r.add(s.Name, strconv.FormatInt(s.SizeBytes, 10), strconv.Itoa(s.NumNodes))
		}
	case NodeUsedPorts:
		for _, h := range n.Derived.UsedPorts {
			r.add(h.IP, h.Protocol, strconv.Itoa(int(h.Port)))
		}
	case NodePods:
		for _, p := range n.Derived.Pods {
			r.add(p.Namespace, p.Name, p.UID, strconv.FormatInt(p.Priority, 10), strconv.FormatBool(p.Terminating))
		}
	case NodePodLabels:
		for i, p := range n.Derived.Pods {
			idx := strconv.Itoa(i)
			for _, k := range sortedKeys(p.Labels) {
				r.add(idx, k, p.Labels[k])
			}
		}
	case NodePodOwners:
		for i, p := range n.Derived.Pods {
			idx := strconv.Itoa(i)
			for _, o := range p.OwnerReferences {
				r.add(idx, o.APIVersion, o.Kind, o.Name, o.UID, strconv.FormatBool(o.Controller))
			}
		}
	default:
		return nil, false
	}
	return r.bytes(), true
}

// TableColumn is one column of n's node-table row (docs/abi.md §3.2): a
// string (isString; ok false when unset, which the row holds as id 0) or
// the slot's integer v. ok is false for an unknown kind.
func TableColumn(n *Node, kind, arg string) (s string, isString, ok bool, v uint64) {
	switch kind {
	case abi.ColName:
		return n.Name, true, true, 0
	case abi.ColLabel:
		s, ok = n.Labels[arg]
		return s, true, ok, 0
	case abi.ColAnnotation:
		s, ok = n.Annotations[arg]
		return s, true, ok, 0
	case abi.ColAllocatable, abi.ColCapacity, abi.ColRequested, abi.ColNonZeroRequested:
		k := map[string]int32{abi.ColAllocatable: ResourceAllocatable, abi.ColCapacity: ResourceCapacity, abi.ColRequested: ResourceRequested,
			abi.ColNonZeroRequested: ResourceNonZeroRequested}[kind]
		r, _ := NodeResource(n, k, arg)
		return "", false, true, uint64(r)
	case abi.ColPodCount:
		return "", false, true, uint64(NodePodCount(n))
	case abi.ColUnschedulable:
		if n.Unschedulable {
			v = 1
		}
		return "", false, true, v
	case abi.ColTaint:
		for _, t := range n.Taints {
			if t.Key == arg {
				v |= TaintBit(t.Effect)
			}
		}
		return "", false, true, v
	case abi.ColTaintEffects:
		return "", false, true, TaintEffects(n.Taints)
	case abi.ColImage:
		return "", false, true, uint64(ImageSize(n.Images, arg))
	}
	return "", false, false, 0
}

// ImageSize is the size of the image listed under name in images (the
// last entry with the name), -1 if none is.
func ImageSize(images []NodeImage, name string) int64 {
	size := int64(-1)
	for _, im := range images {
		if im.Name == name {
			size = im.SizeBytes
		}
	}
	return size
}

// TaintEffects is the bit set of the effects of taints (TaintBit).
func TaintEffects(taints []Taint) uint64 {
	var v uint64
	for _, t := range taints {
		v |= TaintBit(t.Effect)
	}
	return v
}

// TaintBit is a taint effect's bit in a taint column.
func TaintBit(effect string) uint64 {
	switch effect {
	case "NoSchedule":
		return abi.TaintNoSchedule
	case "PreferNoSchedule":
		return abi.TaintPreferNoSchedule
	case "NoExecute":
		return abi.TaintNoExecute
	}
	return 0
}

func encodeTaints(ts []Taint) []byte {
	var r records
	for _, t := range ts {
		r.add(t.Key, t.Value, t.Effect)
	}
	return r.bytes()
}
