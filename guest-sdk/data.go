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
}

// NodeData describes a node for running a policy natively.
type NodeData struct {
	Name                             string
	Labels, Annotations              map[string]string
	Taints                           []Taint
	Allocatable, Capacity, Requested map[string]int64
	PodCount                         int
	Unschedulable                    bool
}
