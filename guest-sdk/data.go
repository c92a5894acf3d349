package sdk

// PodData describes a pod for running a policy natively (outside wasm), in
// unit tests of the policy's logic. Inside wasm the host supplies the pod.
type PodData struct {
	Name, Namespace, UID, SchedulerName, PriorityClassName, ServiceAccountName string
	Labels, Annotations, NodeSelector                                          map[string]string
	Tolerations                                                                []Toleration
	// Requests are effective requests: cpu in millicores, memory in bytes.
	Requests map[string]int64
	Priority int64
	NodeName string
	// Containers are the pod's init containers (Kind "init") and
	// containers (Kind "app"). Their Requests are per container, where a
	// missing resource and an explicit 0 differ; the effective Requests
	// above are given separately.
	Containers      []Container
	OwnerReferences []OwnerReference
	Overhead        map[string]int64
	SchedulingGates []string
	// PodResources are pod-level spec.resources.requests.
	PodResources map[string]int64
	// ClaimNames are the persistentVolumeClaim volumes' claim names.
	ClaimNames []string
	// ImageVolumes are the image volumes' references.
	ImageVolumes []string
	// DefaultSpreadSelector is what Pod.DefaultSpreadSelector returns: in
	// a scheduler, what the Services and the controller selecting the pod
	// select.
	DefaultSpreadSelector *LabelSelector
	// CreationTimestamp and DeletionTimestamp are RFC 3339 in UTC, "" when unset.
	CreationTimestamp, DeletionTimestamp string
	// Affinity is spec.affinity; TopologySpreadConstraints are
	// spec.topologySpreadConstraints.
	Affinity                  *Affinity
	TopologySpreadConstraints []TopologySpreadConstraint
	// Object is the whole pod as JSON, what Pod.Object returns natively. In
	// a case table (docs/abi.md §8) it is the pod the case starts from, and
	// the fields above that are set are applied over it.
	Object RawJSON
}

// RawJSON is a JSON value kept as its bytes (encoding/json's RawMessage,
// without importing encoding/json into guests).
type RawJSON []byte

// MarshalJSON returns the bytes, or null when there are none.
func (r RawJSON) MarshalJSON() ([]byte, error) {
	if len(r) == 0 {
		return []byte("null"), nil
	}
	return r, nil
}

// UnmarshalJSON keeps a copy of the bytes.
func (r *RawJSON) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*r = nil
		return nil
	}
	*r = append((*r)[:0], b...)
	return nil
}

// NodeData describes a node for running a policy natively.
type NodeData struct {
	Name                             string
	Labels, Annotations              map[string]string
	Taints                           []Taint
	Allocatable, Capacity, Requested map[string]int64
	PodCount                         int
	Unschedulable                    bool
	Conditions                       []NodeCondition
	Images                           []NodeImage
	Addresses                        []NodeAddress
	// Pods are the pods on the node (Node.Pods). Without them, Requested
	// and PodCount stand for pods named <node>-load and <node>-pod<i>, as
	// case tables build them.
	Pods []NodePod
	// NonZeroRequested is what Node.NonZeroRequested returns natively (cpu
	// and memory); case tables compute it from the node's pods.
	NonZeroRequested map[string]int64
	// Object is the whole node as JSON (Node.Object natively; in a case
	// table, the node the case starts from, with the fields above over it).
	Object RawJSON
}

// Container kinds.
const (
	ContainerInit = "init"
	ContainerApp  = "app"
)

// Container is one of the pod's init containers or containers.
type Container struct {
	// Kind is ContainerInit or ContainerApp.
	Kind        string
	Name, Image string
	// RestartPolicy is "Always" for a sidecar (an init container that keeps
	// running), "" when unset.
	RestartPolicy string
	// Requests are what the container's resources.requests set: cpu in
	// millicores, everything else in base units. A resource the container
	// does not request is absent; an explicit 0 is present. The scheduler's
	// scoring counts a missing cpu or memory request as 100m / 200Mi and an
	// explicit 0 as 0, so a policy that mirrors it needs the difference.
	Requests map[string]int64
	Ports    []ContainerPort
}

// ContainerPort is one of a container's ports. HostPort is 0 when unset.
type ContainerPort struct {
	Name                    string
	ContainerPort, HostPort int32
	Protocol, HostIP        string
}

// OwnerReference is one of the pod's metadata.ownerReferences.
type OwnerReference struct {
	APIVersion, Kind, Name, UID string
	Controller                  bool
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

// ClusterData is what Cluster reads natively: the snapshot's nodes (with
// their Pods, which CountPods counts) and the namespaces' labels.
type ClusterData struct {
	Nodes      []*NodeData
	Namespaces map[string]map[string]string
}
