package sdk

// The points after a cycle's outcome (ABI v4, docs/abi.md §3.5): no node
// fit the pod, or the pod was bound.

var (
	postFilterFn func(Pod) Status
	postBindFn   func(Pod, Node)
)

// RegisterPostFilter sets a function called when no node fit the pod (and
// preemption found none either), after every Filter of the cycle. It reads
// the pod and the cycle's state (CycleState), not a node. An Unschedulable
// status adds its reason to the pod's unschedulable message, as
// "WasmPolicy/<policy>: <reason>", in the pod's condition and Event: a
// policy's own explanation of why nothing fit. It nominates no node and
// evicts nothing (preemption stays kube-scheduler's). It is not called for
// a member of a pod group (the Workload API), whose cycles kube-scheduler
// runs without a pod's PostFilter.
func RegisterPostFilter(f func(pod Pod) Status) { postFilterFn = f }

// RegisterPostBind sets a function called once the pod is bound, with the
// node it was bound to: for counters and logs. Nothing it does changes the
// binding.
func RegisterPostBind(f func(pod Pod, node Node)) { postBindFn = f }
