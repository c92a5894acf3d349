package host

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
)

var cycleCounter atomic.Uint64

// PodState is the pod of one scheduling cycle as policies see it. It is built
// once per cycle and shared by every policy and every node of that cycle, so
// nothing about the pod is computed or encoded more than once per cycle, and
// only if some policy asks for it.
type PodState struct {
	Pod *v1.Pod
	// Cycle is unique per PodState; guests use it to cache pod reads.
	Cycle uint64
	// Cluster is what policies that declare the Cluster or Namespaces reads
	// see of the cluster in this cycle; nil answers NotAvailable.
	Cluster *ClusterView

	reqOnce  sync.Once
	requests map[string]int64

	listOnce [abi.NumPodLists]sync.Once
	lists    [abi.NumPodLists][]byte

	objOnce sync.Once
	obj     []byte
}

// object is the whole pod as JSON (pod_object), encoded on first use.
func (p *PodState) object(format int32) ([]byte, bool) {
	if format != abi.ObjectJSON {
		return nil, false
	}
	p.objOnce.Do(func() {
		pod := *p.Pod // a shallow copy: only TypeMeta and managedFields change
		pod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
		pod.ManagedFields = nil
		p.obj = encodeObject(&pod)
	})
	return p.obj, true
}

// encodeObject is an object's JSON; a Pod or Node always encodes.
func encodeObject(obj any) []byte {
	b, err := json.Marshal(obj)
	if err != nil {
		panic(fmt.Sprintf("encoding %T: %v", obj, err))
	}
	return b
}

// NewPodState starts a cycle for pod.
func NewPodState(pod *v1.Pod) *PodState {
	return &PodState{Pod: pod, Cycle: cycleCounter.Add(1)}
}

// Requests returns the pod's effective requests the way the scheduler counts
// them (max of init containers and the sum of containers, plus overhead):
// cpu in millicores, everything else in base units.
func (p *PodState) Requests() map[string]int64 {
	p.reqOnce.Do(func() {
		p.requests = quantities(resourcehelper.PodRequests(p.Pod, resourcehelper.PodResourcesOptions{}))
	})
	return p.requests
}

func (p *PodState) list(kind int32) ([]byte, bool) {
	if kind < 0 || int(kind) >= len(p.lists) {
		return nil, false
	}
	p.listOnce[kind].Do(func() {
		pod := p.Pod
		switch kind {
		case abi.PodLabels:
			p.lists[kind] = abi.EncodeMap(pod.Labels)
		case abi.PodAnnotations:
			p.lists[kind] = abi.EncodeMap(pod.Annotations)
		case abi.PodNodeSelector:
			p.lists[kind] = abi.EncodeMap(pod.Spec.NodeSelector)
		case abi.PodTolerations:
			b := abi.AppendListHeader(nil, 5*len(pod.Spec.Tolerations))
			for _, t := range pod.Spec.Tolerations {
				secs := ""
				if t.TolerationSeconds != nil {
					secs = strconv.FormatInt(*t.TolerationSeconds, 10)
				}
				b = abi.AppendString(b, t.Key)
				b = abi.AppendString(b, string(t.Operator))
				b = abi.AppendString(b, t.Value)
				b = abi.AppendString(b, string(t.Effect))
				b = abi.AppendString(b, secs)
			}
			p.lists[kind] = b
		case abi.PodRequests:
			p.lists[kind] = abi.EncodeInts(p.Requests())
		case abi.PodContainers, abi.PodContainerRequests, abi.PodContainerPorts:
			p.lists[kind] = encodeContainers(pod, kind)
		case abi.PodOwnerReferences:
			b := abi.AppendListHeader(nil, 5*len(pod.OwnerReferences))
			for _, o := range pod.OwnerReferences {
				b = appendStrings(b, o.APIVersion, o.Kind, o.Name, string(o.UID), strconv.FormatBool(o.Controller != nil && *o.Controller))
			}
			p.lists[kind] = b
		case abi.PodOverhead:
			p.lists[kind] = abi.EncodeInts(quantities(pod.Spec.Overhead))
		case abi.PodResources:
			var rl v1.ResourceList
			if pod.Spec.Resources != nil {
				rl = pod.Spec.Resources.Requests
			}
			p.lists[kind] = abi.EncodeInts(quantities(rl))
		case abi.PodClaims:
			var names []string
			for _, v := range pod.Spec.Volumes {
				if v.PersistentVolumeClaim != nil {
					names = append(names, v.PersistentVolumeClaim.ClaimName)
				}
			}
			p.lists[kind] = appendStrings(abi.AppendListHeader(nil, len(names)), names...)
		case abi.PodImageVolumes:
			var refs []string
			for _, v := range pod.Spec.Volumes {
				if v.Image != nil {
					refs = append(refs, v.Image.Reference)
				}
			}
			p.lists[kind] = appendStrings(abi.AppendListHeader(nil, len(refs)), refs...)
		case abi.PodNodeAffinityRequired, abi.PodNodeAffinityPreferred, abi.PodAffinityRequired, abi.PodAffinityPreferred,
			abi.PodAntiAffinityRequired, abi.PodAntiAffinityPreferred, abi.PodTopologySpread:
			p.lists[kind] = encodeTerms(pod, kind)
		case abi.PodDefaultSpreadSelector:
			var r termRows
			if c := p.Cluster; c != nil && c.DefaultSpreadSelector != nil {
				if reqs := c.DefaultSpreadSelector(pod); len(reqs) > 0 {
					r.add(0, "", abi.TermStart, "", "", "")
					r.selector(0, abi.TermLabelSelector, &metav1.LabelSelector{MatchExpressions: reqs})
				}
			}
			p.lists[kind] = r.bytes()
		case abi.PodSchedulingGates:
			b := abi.AppendListHeader(nil, len(pod.Spec.SchedulingGates))
			for _, g := range pod.Spec.SchedulingGates {
				b = abi.AppendString(b, g.Name)
			}
			p.lists[kind] = b
		}
	})
	return p.lists[kind], true
}

func (p *PodState) str(field int32) (string, bool) {
	pod := p.Pod
	switch field {
	case abi.PodName:
		return pod.Name, true
	case abi.PodNamespace:
		return pod.Namespace, true
	case abi.PodUID:
		return string(pod.UID), true
	case abi.PodSchedulerName:
		return pod.Spec.SchedulerName, true
	case abi.PodPriorityClassName:
		return pod.Spec.PriorityClassName, true
	case abi.PodServiceAccount:
		return pod.Spec.ServiceAccountName, true
	case abi.PodNodeName:
		return pod.Spec.NodeName, true
	case abi.PodCreationTimestamp:
		return timestamp(&pod.CreationTimestamp), true
	case abi.PodDeletionTimestamp:
		return timestamp(pod.DeletionTimestamp), true
	}
	return "", false
}

func (p *PodState) priority() int64 {
	if p.Pod.Spec.Priority != nil {
		return int64(*p.Pod.Spec.Priority)
	}
	return 0
}

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

// nodeCache keeps the encoded lists of each node, keyed by node name and
// valid for one NodeInfo generation. The scheduler bumps the generation
// whenever the node or its pods change, so an entry is reused across cycles
// for as long as the node is unchanged.
type nodeCache struct {
	mu sync.RWMutex
	m  map[string]*nodeEntry
}

type nodeEntry struct {
	gen   int64
	once  [abi.NumNodeLists]sync.Once
	lists [abi.NumNodeLists][]byte

	objOnce sync.Once
	obj     []byte

	// rows are the node's node-table rows, one per layout (table.go):
	// read without a lock, replaced under rowsMu.
	rowsMu sync.Mutex
	rows   atomic.Pointer[[]cachedRow]
}

// nodeObject is the whole node as JSON (node_object), encoded once per
// NodeInfo generation.
func nodeObject(ni fwk.NodeInfo, format int32) ([]byte, bool) {
	if format != abi.ObjectJSON {
		return nil, false
	}
	e := nodes.entry(ni)
	e.objOnce.Do(func() {
		node := *ni.Node()
		node.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}
		node.ManagedFields = nil
		e.obj = encodeObject(&node)
	})
	return e.obj, true
}

var nodes = &nodeCache{m: map[string]*nodeEntry{}}

// maxNodeCacheEntries bounds the cache; it is cleared when a cluster has churned through this many node names.
const maxNodeCacheEntries = 50000

func (c *nodeCache) entry(ni fwk.NodeInfo) *nodeEntry {
	node := ni.Node()
	gen := ni.GetGeneration()
	c.mu.RLock()
	e := c.m[node.Name]
	c.mu.RUnlock()
	if e != nil && e.gen == gen {
		return e
	}
	e = &nodeEntry{gen: gen}
	c.mu.Lock()
	if len(c.m) >= maxNodeCacheEntries {
		c.m = map[string]*nodeEntry{}
	}
	if old := c.m[node.Name]; old != nil && old.gen == gen {
		e = old
	} else {
		c.m[node.Name] = e
	}
	c.mu.Unlock()
	return e
}

func nodeList(ni fwk.NodeInfo, kind int32) ([]byte, bool) {
	if kind < 0 || kind >= abi.NumNodeLists {
		return nil, false
	}
	if kind == abi.NodeImageStates {
		// Not cached with the node: an image's NumNodes counts other
		// nodes, and the snapshot may change it without this node's
		// generation changing.
		return encodeImageStates(ni.GetImageStates()), true
	}
	e := nodes.entry(ni)
	e.once[kind].Do(func() {
		node := ni.Node()
		switch kind {
		case abi.NodeLabels:
			e.lists[kind] = abi.EncodeMap(node.Labels)
		case abi.NodeAnnotations:
			e.lists[kind] = abi.EncodeMap(node.Annotations)
		case abi.NodeTaints:
			b := abi.AppendListHeader(nil, 3*len(node.Spec.Taints))
			for _, t := range node.Spec.Taints {
				b = abi.AppendString(b, t.Key)
				b = abi.AppendString(b, t.Value)
				b = abi.AppendString(b, string(t.Effect))
			}
			e.lists[kind] = b
		case abi.NodeAllocatable:
			m := resourceMap(ni.GetAllocatable())
			for _, name := range coreResources {
				if _, ok := node.Status.Allocatable[name]; !ok {
					delete(m, string(name))
				}
			}
			e.lists[kind] = abi.EncodeInts(m)
		case abi.NodeCapacity:
			e.lists[kind] = abi.EncodeInts(quantities(node.Status.Capacity))
		case abi.NodeRequested:
			e.lists[kind] = abi.EncodeInts(resourceMap(ni.GetRequested()))
		case abi.NodeConditions:
			b := abi.AppendListHeader(nil, 3*len(node.Status.Conditions))
			for _, c := range node.Status.Conditions {
				b = appendStrings(b, string(c.Type), string(c.Status), c.Reason)
			}
			e.lists[kind] = b
		case abi.NodeImages:
			n := 0
			for _, im := range node.Status.Images {
				n += len(im.Names)
			}
			b := abi.AppendListHeader(nil, 2*n)
			for _, im := range node.Status.Images {
				size := strconv.FormatInt(im.SizeBytes, 10)
				for _, name := range im.Names {
					b = appendStrings(b, name, size)
				}
			}
			e.lists[kind] = b
		case abi.NodePods, abi.NodePodLabels, abi.NodePodOwners:
			e.lists[kind] = encodeNodePods(ni, kind)
		case abi.NodeUsedPorts:
			type hp struct {
				ip, proto string
				port      int32
			}
			var ps []hp
			for ip, m := range ni.GetUsedPorts() {
				for pp := range m {
					ps = append(ps, hp{ip, pp.Protocol, pp.Port})
				}
			}
			sort.Slice(ps, func(i, j int) bool {
				if ps[i].ip != ps[j].ip {
					return ps[i].ip < ps[j].ip
				}
				if ps[i].proto != ps[j].proto {
					return ps[i].proto < ps[j].proto
				}
				return ps[i].port < ps[j].port
			})
			b := abi.AppendListHeader(nil, 3*len(ps))
			for _, p := range ps {
				b = appendStrings(b, p.ip, p.proto, strconv.Itoa(int(p.port)))
			}
			e.lists[kind] = b
		case abi.NodeNonZeroRequested:
			r := ni.GetNonZeroRequested()
			e.lists[kind] = abi.EncodeInts(map[string]int64{abi.ResourceCPU: r.GetMilliCPU(), abi.ResourceMemory: r.GetMemory()})
		case abi.NodeAddresses:
			b := abi.AppendListHeader(nil, 2*len(node.Status.Addresses))
			for _, a := range node.Status.Addresses {
				b = appendStrings(b, string(a.Type), a.Address)
			}
			e.lists[kind] = b
		}
	})
	return e.lists[kind], true
}

// encodeImageStates encodes node_list kind NodeImageStates, sorted by name.
func encodeImageStates(states map[string]*fwk.ImageStateSummary) []byte {
	names := slices.Sorted(maps.Keys(states))
	b := abi.AppendListHeader(nil, 3*len(names))
	for _, name := range names {
		st := states[name]
		b = appendStrings(b, name, strconv.FormatInt(st.Size, 10), strconv.Itoa(st.NumNodes))
	}
	return b
}

func quantities(rl v1.ResourceList) map[string]int64 {
	m := make(map[string]int64, len(rl))
	for name, q := range rl {
		m[string(name)] = quantityValue(name, q)
	}
	return m
}

// quantityValue is a quantity in ABI units: cpu in millicores, everything
// else in base units.
func quantityValue(name v1.ResourceName, q resource.Quantity) int64 {
	if name == v1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// coreResources are the resources fwk.Resource keeps in plain fields: it
// reads 0 for them whether the node reports 0 or nothing at all.
var coreResources = []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage, v1.ResourcePods}

// allocatableValue is one resource of the node's allocatable, or
// abi.MissingQuantity when the node does not report it (the NodeInfo alone
// cannot tell a missing core resource from 0, so the Node decides).
func allocatableValue(ni fwk.NodeInfo, name string) int64 {
	switch name {
	case abi.ResourceCPU, abi.ResourceMemory, string(v1.ResourceEphemeralStorage), abi.ResourcePods:
		if _, ok := ni.Node().Status.Allocatable[v1.ResourceName(name)]; !ok {
			return abi.MissingQuantity
		}
	}
	return resourceValue(ni.GetAllocatable(), name)
}

// nodeString reads node_string's fields; ok is false for an unknown one.
func nodeString(ni fwk.NodeInfo, field int32) (string, bool) {
	if field != abi.NodeName {
		return "", false
	}
	return ni.Node().Name, true
}

// nodeResource reads node_resource's kinds: one resource in ABI units, or
// abi.MissingQuantity when absent; ok is false for an unknown kind (which
// also answers abi.MissingQuantity, as bad arguments do).
func nodeResource(ni fwk.NodeInfo, kind int32, name string) (int64, bool) {
	switch kind {
	case abi.ResourceAllocatable:
		return allocatableValue(ni, name), true
	case abi.ResourceRequested:
		if v := resourceValue(ni.GetRequested(), name); v != abi.MissingQuantity {
			return v, true
		}
		return 0, true
	case abi.ResourceCapacity:
		if q, ok := ni.Node().Status.Capacity[v1.ResourceName(name)]; ok {
			return quantityValue(v1.ResourceName(name), q), true
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

func appendStrings(b []byte, ss ...string) []byte {
	for _, s := range ss {
		b = abi.AppendString(b, s)
	}
	return b
}

// encodeContainers encodes the pod's init containers, then its containers,
// as pod_list kind PodContainers, PodContainerRequests or PodContainerPorts
// (docs/abi.md §4.0). Requests list only what a container sets, sorted by
// name, so a missing request and an explicit 0 stay apart.
func encodeContainers(pod *v1.Pod, kind int32) []byte {
	type ctr struct {
		kind string
		c    *v1.Container
	}
	all := make([]ctr, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
	for i := range pod.Spec.InitContainers {
		all = append(all, ctr{"init", &pod.Spec.InitContainers[i]})
	}
	for i := range pod.Spec.Containers {
		all = append(all, ctr{"app", &pod.Spec.Containers[i]})
	}
	var body []byte
	n := 0
	for i, e := range all {
		idx := strconv.Itoa(i)
		switch kind {
		case abi.PodContainers:
			policy := ""
			if e.c.RestartPolicy != nil {
				policy = string(*e.c.RestartPolicy)
			}
			body = appendStrings(body, e.kind, e.c.Name, e.c.Image, policy)
			n += 4
		case abi.PodContainerRequests:
			names := make([]string, 0, len(e.c.Resources.Requests))
			for name := range e.c.Resources.Requests {
				names = append(names, string(name))
			}
			sort.Strings(names)
			for _, name := range names {
				q := e.c.Resources.Requests[v1.ResourceName(name)]
				body = appendStrings(body, idx, name, strconv.FormatInt(quantityValue(v1.ResourceName(name), q), 10))
				n += 3
			}
		case abi.PodContainerPorts:
			for _, p := range e.c.Ports {
				body = appendStrings(body, idx, p.Name, strconv.Itoa(int(p.ContainerPort)), strconv.Itoa(int(p.HostPort)), string(p.Protocol), p.HostIP)
				n += 6
			}
		}
	}
	return append(abi.AppendListHeader(make([]byte, 0, 4+len(body)), n), body...)
}

// encodeNodePods encodes the pods on a node (node_list kinds NodePods,
// NodePodLabels, NodePodOwners); labels sorted by key per pod.
func encodeNodePods(ni fwk.NodeInfo, kind int32) []byte {
	var body []byte
	n := 0
	for i, pi := range ni.GetPods() {
		pod := pi.GetPod()
		idx := strconv.Itoa(i)
		switch kind {
		case abi.NodePods:
			prio := int64(0)
			if pod.Spec.Priority != nil {
				prio = int64(*pod.Spec.Priority)
			}
			body = appendStrings(body, pod.Namespace, pod.Name, string(pod.UID), strconv.FormatInt(prio, 10), strconv.FormatBool(pod.DeletionTimestamp != nil))
			n += 5
		case abi.NodePodLabels:
			keys := make([]string, 0, len(pod.Labels))
			for k := range pod.Labels {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				body = appendStrings(body, idx, k, pod.Labels[k])
				n += 3
			}
		case abi.NodePodOwners:
			for _, o := range pod.OwnerReferences {
				body = appendStrings(body, idx, o.APIVersion, o.Kind, o.Name, string(o.UID), strconv.FormatBool(o.Controller != nil && *o.Controller))
				n += 6
			}
		}
	}
	return append(abi.AppendListHeader(make([]byte, 0, 4+len(body)), n), body...)
}

// timestamp is t in RFC 3339 UTC, "" when unset.
func timestamp(t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
