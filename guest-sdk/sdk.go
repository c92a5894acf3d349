// Package sdk is the Go SDK for wasmsched scheduling policies.
//
// A policy is a main package that registers its functions in init and is
// compiled to wasm with TinyGo or Go:
//
//	package main
//
//	import sdk "github.com/wasmsched/wasmsched/guest-sdk"
//
//	func init() { sdk.RegisterFilter(filter) }
//
//	func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
//		team, _ := pod.Label("team")
//		if v, _ := node.Label("team"); v != team {
//			return sdk.Unschedulable("team label mismatch")
//		}
//		return sdk.Success()
//	}
//
//	func main() {}
//
// Build with TinyGo (small, fast):
//
//	tinygo build -target=wasip1 -buildmode=c-shared -scheduler=none -no-debug -opt=2 -o policy.wasm .
//
// or with Go ≥ 1.24:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o policy.wasm .
//
// Pod and Node read their fields lazily from the host: a policy pays only for
// the fields it reads. Strings returned by accessors stay valid after the
// policy function returns (they are ordinary Go strings).
//
// Besides Filter and Score, a policy can gate pods before they enter the
// scheduling queue (RegisterPreEnqueue, Recheck) and record on a pod what
// was decided before it is bound (RegisterPreBind, SetPodLabel,
// SetPodAnnotation, CyclePolicies): docs/abi.md §3.3.
//
// Outside wasm (GOOS != wasip1) the same package runs natively against
// PodData and NodeData values, so a policy's logic can be unit-tested with
// plain `go test`; see RunFilter, RunScore, RunPreEnqueue and RunPreBind.
package sdk

import (
	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

var (
	preFilterFn func(Pod) Status
	filterFn    func(Pod, Node) Status
	preScoreFn  func(Pod) Status
	scoreFn     func(Pod, Node) (int64, Status)
	normalizeFn func(Pod, []int64) Status
)

// RegisterFilter sets the policy's Filter, called once per (pod, node).
func RegisterFilter(f func(pod Pod, node Node) Status) { filterFn = f }

// RegisterScore sets the policy's Score, called once per (pod, feasible
// node). Scores are 0..100 unless the policy also registers NormalizeScore.
func RegisterScore(f func(pod Pod, node Node) (int64, Status)) { scoreFn = f }

// RegisterPreFilter sets a function called once per scheduling cycle before
// Filter. It can reject the pod outright, return Skip, or compute data for
// Filter with SetCycleState.
func RegisterPreFilter(f func(pod Pod) Status) { preFilterFn = f }

// RegisterPreScore sets a function called once per scheduling cycle before Score.
func RegisterPreScore(f func(pod Pod) Status) { preScoreFn = f }

// RegisterNormalizeScore sets a function that rewrites the raw scores of all
// feasible nodes in place to the 0..100 range. ScoredNode(i) gives the node
// of scores[i], for a normalization that depends on the node (its zone).
func RegisterNormalizeScore(f func(pod Pod, scores []int64) Status) { normalizeFn = f }

// PreFilterNodes, called from a PreFilter function, limits the pod to the
// named nodes, as an in-tree PreFilter's PreFilterResult does: the
// scheduler filters and scores only those. An empty list leaves no node.
// With several policies, their lists intersect. It needs no declaration.
func PreFilterNodes(names ...string) { preFilterNodes(names) }

// ScoredNode makes the node of scores[i] the current node, inside a
// NormalizeScore function, and returns it; ok is false outside
// NormalizeScore or for i out of range. The returned Node reads that node
// until the next ScoredNode call.
func ScoredNode(i int) (node Node, ok bool) { return Node{}, selectScored(i) }

// KeepsState declares that the policy's verdicts depend on state it keeps
// across calls (a counter, a cache of earlier answers, a random choice
// remembered): the host then evaluates every node itself, even nodes
// whose declared fields are all equal. Without it, the host may give one
// node's verdict to another node that reads the same (docs/abi.md §3.4),
// which is right for a policy whose verdict is a function of what it
// reads. Call it from main or init, with the Register functions.
func KeepsState() { keepsState = true }

var keepsState bool

// registered reports whether the policy registered a function for point
// p. A batch form counts as registered with the point it batches: the SDK
// implements every batch form on top of the single one.
func registered(p abi.Point) bool {
	if of := abi.Points[p].BatchOf; of != abi.BatchNone {
		p = of
	}
	switch p {
	case abi.PreFilter:
		return preFilterFn != nil
	case abi.Filter:
		return filterFn != nil
	case abi.PreScore:
		return preScoreFn != nil
	case abi.Score:
		return scoreFn != nil
	case abi.NormalizeScore:
		return normalizeFn != nil
	case abi.PreEnqueue:
		return preEnqueueFn != nil
	case abi.PreBind:
		return preBindFn != nil
	case abi.PostFilter:
		return postFilterFn != nil
	case abi.PostBind:
		return postBindFn != nil
	case abi.Reserve:
		return reserveFn != nil
	case abi.Unreserve:
		return unreserveFn != nil
	case abi.Permit:
		return permitFn != nil
	}
	return false
}

// capabilities tells the host which functions are registered, so it never
// calls an export the policy does not implement.
func capabilities() int32 {
	var c int32
	for p := abi.Point(0); p < abi.NumPoints; p++ {
		if registered(p) {
			c |= p.Cap()
		}
	}
	if keepsState {
		c |= abi.CapKeepsState
	}
	return c
}

// Pod is the pod being scheduled. The zero value is ready to use inside a
// policy function; fields are read from the host on first use and cached for
// the rest of the scheduling cycle.
type Pod struct{}

// Name returns the pod's name.
func (Pod) Name() string { return podString(model.PodName) }

// Namespace returns the pod's namespace.
func (Pod) Namespace() string { return podString(model.PodNamespace) }

// UID returns the pod's UID.
func (Pod) UID() string { return podString(model.PodUID) }

// SchedulerName returns spec.schedulerName.
func (Pod) SchedulerName() string { return podString(model.PodSchedulerName) }

// PriorityClassName returns spec.priorityClassName.
func (Pod) PriorityClassName() string { return podString(model.PodPriorityClassName) }

// ServiceAccountName returns spec.serviceAccountName.
func (Pod) ServiceAccountName() string { return podString(model.PodServiceAccount) }

// Label returns one label and whether it is set. Repeated reads in a cycle
// are answered from a cache in the guest.
func (Pod) Label(key string) (string, bool) { return podLabel(key) }

// Annotation returns one annotation and whether it is set.
func (Pod) Annotation(key string) (string, bool) { return podAnnotation(key) }

// Labels returns all labels.
func (Pod) Labels() map[string]string { return decodeMap(podList(model.PodLabels)) }

// Annotations returns all annotations.
func (Pod) Annotations() map[string]string { return decodeMap(podList(model.PodAnnotations)) }

// NodeSelector returns spec.nodeSelector.
func (Pod) NodeSelector() map[string]string { return decodeMap(podList(model.PodNodeSelector)) }

// Tolerations returns spec.tolerations.
func (Pod) Tolerations() []Toleration {
	r := abi.NewListReader(podList(model.PodTolerations))
	ts := make([]Toleration, 0, r.Len()/5)
	for r.Len() >= 5 {
		f := [5]string{}
		for i := range f {
			b, _ := r.Next()
			f[i] = string(b)
		}
		ts = append(ts, Toleration{Key: f[0], Operator: f[1], Value: f[2], Effect: f[3], TolerationSeconds: f[4]})
	}
	return ts
}

// Request returns the pod's effective request of a resource as the
// scheduler counts it (containers, init containers and overhead): cpu in
// millicores, memory in bytes, extended resources as integers; 0 if none.
func (Pod) Request(resource string) int64 { return podRequest(resource) }

// Requests returns every resource the pod requests.
func (Pod) Requests() map[string]int64 { return decodeInts(podList(model.PodRequests)) }

// NonZeroRequests returns the pod's requests as NodeResourcesFit's Score
// counts them: a container that requests no cpu or memory counts 100m or
// 200Mi of it (DefaultNonZeroRequests), and pod-level resources
// (PodResources) are not applied, as that score does not apply them. The
// host sums the containers' quantities before it rounds cpu to
// millicores, as kube-scheduler does, so a pod with sub-millicore requests
// ("1500u") gets the scheduler's number, where summing Containers'
// requests with PodRequests rounds each container first.
func (Pod) NonZeroRequests() map[string]int64 { return decodeInts(podList(model.PodNonZeroRequests)) }

// Priority returns the pod's priority (0 if unset).
func (Pod) Priority() int64 { return podPriority() }

// NodeName returns spec.nodeName: empty for a pod being scheduled, unless
// it was created with a node already named (what NodeName, the in-tree
// plugin, checks).
func (Pod) NodeName() string { return podString(model.PodNodeName) }

// Containers returns the pod's init containers, then its containers, each
// with its own requests and ports (docs/abi.md §4.0). The host encodes
// them once per cycle; each call decodes them.
func (Pod) Containers() []Container {
	var cs []Container
	r := abi.NewListReader(podList(model.PodContainers))
	for r.Len() >= 4 {
		f := next(&r, 4)
		cs = append(cs, Container{Kind: f[0], Name: f[1], Image: f[2], RestartPolicy: f[3]})
	}
	r = abi.NewListReader(podList(model.PodContainerRequests))
	for r.Len() >= 3 {
		f := next(&r, 3)
		if i := int(parseInt([]byte(f[0]))); i >= 0 && i < len(cs) {
			if cs[i].Requests == nil {
				cs[i].Requests = map[string]int64{}
			}
			cs[i].Requests[f[1]] = parseInt([]byte(f[2]))
		}
	}
	r = abi.NewListReader(podList(model.PodContainerPorts))
	for r.Len() >= 6 {
		f := next(&r, 6)
		if i := int(parseInt([]byte(f[0]))); i >= 0 && i < len(cs) {
			cs[i].Ports = append(cs[i].Ports, ContainerPort{Name: f[1], ContainerPort: int32(parseInt([]byte(f[2]))),
				HostPort: int32(parseInt([]byte(f[3]))), Protocol: f[4], HostIP: f[5]})
		}
	}
	return cs
}

// OwnerReferences returns metadata.ownerReferences.
func (Pod) OwnerReferences() []OwnerReference {
	var refs []OwnerReference
	r := abi.NewListReader(podList(model.PodOwnerReferences))
	for r.Len() >= 5 {
		f := next(&r, 5)
		refs = append(refs, OwnerReference{APIVersion: f[0], Kind: f[1], Name: f[2], UID: f[3], Controller: f[4] == "true"})
	}
	return refs
}

// Overhead returns spec.overhead (cpu in millicores, the rest in base units).
func (Pod) Overhead() map[string]int64 { return decodeInts(podList(model.PodOverhead)) }

// SchedulingGates returns the names of spec.schedulingGates.
func (Pod) SchedulingGates() []string {
	var gs []string
	r := abi.NewListReader(podList(model.PodSchedulingGates))
	for r.Len() >= 1 {
		gs = append(gs, next(&r, 1)[0])
	}
	return gs
}

// CreationTimestamp returns metadata.creationTimestamp in RFC 3339 (UTC).
func (Pod) CreationTimestamp() string { return podString(model.PodCreationTimestamp) }

// DeletionTimestamp returns metadata.deletionTimestamp in RFC 3339 (UTC),
// "" when the pod is not being deleted.
func (Pod) DeletionTimestamp() string { return podString(model.PodDeletionTimestamp) }

// PodResources returns the pod-level spec.resources.requests, empty unless
// the pod sets them.
func (Pod) PodResources() map[string]int64 { return decodeInts(podList(model.PodResources)) }

// ClaimNames returns the claim names of the pod's persistentVolumeClaim volumes.
func (Pod) ClaimNames() []string {
	var out []string
	r := abi.NewListReader(podList(model.PodClaims))
	for r.Len() >= 1 {
		out = append(out, next(&r, 1)[0])
	}
	return out
}

// ImageVolumes returns the references of the pod's image volumes
// (spec.volumes[].image.reference), in spec order.
func (Pod) ImageVolumes() []string {
	var out []string
	r := abi.NewListReader(podList(model.PodImageVolumes))
	for r.Len() >= 1 {
		out = append(out, next(&r, 1)[0])
	}
	return out
}

// next reads n strings of a record.
func next(r *abi.ListReader, n int) []string {
	f := make([]string, n)
	for i := range f {
		b, _ := r.Next()
		f[i] = string(b)
	}
	return f
}

// Object returns the whole pod as JSON (docs/abi.md §4.2, pod_object), for
// a field no accessor reads. The host encodes it once per cycle and the SDK
// keeps it for the cycle; do not modify it. Decoding JSON costs a guest
// tens of microseconds, so decode once per cycle (in PreFilter, into cycle
// state) and use typed accessors where one exists. Its args must declare
// WholeObjects, or the call fails closed. Natively it is PodData.Object as
// the test wrote it, or nil (see Node.Object).
func (Pod) Object() []byte { return podObject() }

// Config returns the policy's config string from the scheduler configuration.
func Config() string { return config() }

// SetCycleState stores data for this scheduling cycle; call it from
// PreFilter or PreScore and read it back with CycleState in Filter or Score.
// Different calls of a cycle may run in different instances, so this is the
// only way to pass data between them.
func SetCycleState(b []byte) { setCycleState(b) }

// CycleState returns what SetCycleState stored in this cycle, or nil.
func CycleState() []byte { return cycleState() }

// Cycle identifies the scheduling cycle being run: the same for every call
// about one pod in one cycle (on any node, single or batch form), different
// in the next cycle, never 0. Natively a cycle starts at RunPreFilter or
// when a Run function gets a different PodData.
func Cycle() int64 { return currentCycle() }

// PerCycle keeps one value per scheduling cycle in an instance, so that a
// policy decodes what it needs from the pod (its requests, tolerations,
// terms) once per cycle instead of once per node. Keep it in a global; each
// instance has its own, so Get may compute the value once per instance and
// cycle.
type PerCycle[T any] struct {
	cycle int64
	value T
}

// Get returns the value computed in this cycle, calling compute the first
// time in a cycle.
func (c *PerCycle[T]) Get(compute func() T) T {
	if id := Cycle(); id != c.cycle {
		c.value, c.cycle = compute(), id
	}
	return c.value
}

// PerConfig keeps a value parsed from the policy's config (Config): parse
// it once, not on every call. In a scheduler an instance's config never
// changes, so Get parses once per instance and then costs a field read, no
// host call. Natively a test may run several case tables, or SetConfig,
// with different configs in one process: there Get parses again whenever
// Config has changed, so a global parsed once never carries one table's
// config into the next. Keep it in a global:
//
//	type settings struct{ max int; bad string }
//	var cfg sdk.PerConfig[settings]
//	func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
//		s := cfg.Get(parse) // parse(config string) settings
//		...
type PerConfig[T any] struct {
	parsed bool
	config string
	value  T
}

// Get returns the value parse made of the current config, calling parse
// the first time (and, natively, again after the config changed).
func (c *PerConfig[T]) Get(parse func(config string) T) T {
	if !c.parsed || (configMayChange && c.config != config()) {
		c.config = config()
		c.value, c.parsed = parse(c.config), true
	}
	return c.value
}

// Log writes a structured log line through the scheduler's klog, with the
// policy name attached. keysAndValues alternate keys and values.
func Log(msg string, keysAndValues ...string) { logV(0, msg, keysAndValues) }

// LogV is Log at a klog verbosity level; the host drops it unless the
// scheduler runs with -v=level or higher.
func LogV(level int32, msg string, keysAndValues ...string) { logV(level, msg, keysAndValues) }

func missingToMinus1(v int64) int64 {
	if v == abi.MissingQuantity {
		return -1
	}
	return v
}

func decodeMap(b []byte) map[string]string {
	r := abi.NewListReader(b)
	m := make(map[string]string, r.Len()/2)
	for r.Len() >= 2 {
		k, _ := r.Next()
		v, _ := r.Next()
		m[string(k)] = string(v)
	}
	return m
}

func decodeInts(b []byte) map[string]int64 {
	r := abi.NewListReader(b)
	m := make(map[string]int64, r.Len()/2)
	for r.Len() >= 2 {
		k, _ := r.Next()
		v, _ := r.Next()
		m[string(k)] = parseInt(v)
	}
	return m
}

// parseInt parses a decimal int64 without strconv, to keep TinyGo guests small.
func parseInt(b []byte) int64 {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		return -n
	}
	return n
}
