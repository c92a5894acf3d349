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
	// Object is the whole node as JSON (Node.Object natively; in a case
	// table, the node the case starts from, with the fields above over it).
	Object RawJSON
}
