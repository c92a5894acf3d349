// The main line only: it follows the main line's kube-scheduler (its
// request options and NodeInfo interface); see docs/kubernetes.md.

//go:build !k8s_1_34

// Package nodeinfo builds the scheduler's view of a node (fwk.NodeInfo) for
// programs that run policies outside kube-scheduler and have Node and Pod
// objects but no scheduler cache, such as policytest.
//
// kube-scheduler's own NodeInfo lives in k8s.io/kubernetes, which a policy
// author's module cannot require without copying its staging replace lines;
// this package needs only published modules. It computes what policies read
// (the node, its pods, requested and allocatable resources) with the helper
// kube-scheduler uses for requests (k8s.io/component-helpers/resource),
// with the options kube-scheduler derives from its default feature gates.
// TestMatchesScheduler (in test/nodeinfo, which may import k8s.io/kubernetes)
// holds it to the scheduler's NodeInfo on generated pods.
package nodeinfo

import (
	"fmt"
	"maps"
	"strings"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// requestOptions are the options kube-scheduler v1.37 computes pod requests
// with under its default feature gates (InPlacePodVerticalScaling and
// InPlacePodLevelResourcesVerticalScaling on, PodLevelResources on,
// DRANodeAllocatableResources off). A function, so nothing can change them.
func requestOptions() resourcehelper.PodResourcesOptions {
	return resourcehelper.PodResourcesOptions{
		UseStatusResources: true,
		InPlacePodLevelResourcesVerticalScalingEnabled: true,
		SkipPodLevelResources:                          false,
	}
}

var generation atomic.Int64

// List returns one NodeInfo per node with the pods bound to it (by
// spec.nodeName), leaving out pods that have finished, as the scheduler's
// cache does, and the image states of a scheduler snapshot taken of these
// nodes at once (the scheduler's NewSnapshot): per name of each of the
// node's images, the size its node reports and the number of nodes listing
// the name. (The running scheduler's cache can lag: it sizes an image by
// the first node that reported it, and counts its nodes as of the last
// change to the node.)
func List(nodes []*v1.Node, pods []*v1.Pod) []fwk.NodeInfo {
	byNode := map[string][]*v1.Pod{}
	for _, p := range pods {
		if p.Spec.NodeName != "" && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed {
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
		}
	}
	// holders counts, per image name, the nodes listing it: ImageLocality's
	// spread factor.
	holders := map[string]int{}
	for _, n := range nodes {
		seen := map[string]bool{}
		for _, im := range n.Status.Images {
			for _, name := range im.Names {
				if !seen[name] {
					seen[name] = true
					holders[name]++
				}
			}
		}
	}
	out := make([]fwk.NodeInfo, len(nodes))
	for i, n := range nodes {
		ni := New(n, byNode[n.Name]...)
		ni.imageStates = map[string]*fwk.ImageStateSummary{}
		for _, im := range n.Status.Images {
			for _, name := range im.Names {
				ni.imageStates[name] = &fwk.ImageStateSummary{Size: im.SizeBytes, NumNodes: holders[name]}
			}
		}
		out[i] = ni
	}
	return out
}

// New returns the NodeInfo of node with pods on it.
// New knows no other node, so it gives no image states; List does.
func New(node *v1.Node, pods ...*v1.Pod) *NodeInfo {
	ni := &NodeInfo{requested: &Resource{}, nonZeroRequested: &Resource{}, allocatable: &Resource{}, usedPorts: fwk.HostPortInfo{}}
	ni.SetNode(node)
	for _, p := range pods {
		ni.AddPodInfo(newPodInfo(p))
	}
	return ni
}

// NodeInfo is a node and the pods on it, with what policies read through
// the host: the pods and their affinity terms (existing_terms), requested
// and non-zero requested resources, used host ports and image states. The
// volume view (PVC reference counts) is empty.
type NodeInfo struct {
	// The embedded interface is always nil: it only supplies the methods a
	// Kubernetes minor adds to fwk.NodeInfo that policies cannot read (such
	// as GetNodeDeclaredFeatures), so this package names no type that
	// exists in one build line only (docs/kubernetes.md). Calling one panics.
	fwk.NodeInfo

	node                         *v1.Node
	pods                         []fwk.PodInfo
	podsWithAffinity             []fwk.PodInfo
	podsWithRequiredAntiAffinity []fwk.PodInfo
	requested                    *Resource
	nonZeroRequested             *Resource
	allocatable                  *Resource
	usedPorts                    fwk.HostPortInfo
	imageStates                  map[string]*fwk.ImageStateSummary
	gen                          int64
}

var _ fwk.NodeInfo = &NodeInfo{}

// The methods below implement fwk.NodeInfo; see the interface for each.

func (n *NodeInfo) Node() *v1.Node                     { return n.node }
func (n *NodeInfo) GetPods() []fwk.PodInfo             { return n.pods }
func (n *NodeInfo) GetPodsWithAffinity() []fwk.PodInfo { return n.podsWithAffinity }
func (n *NodeInfo) GetPodsWithRequiredAntiAffinity() []fwk.PodInfo {
	return n.podsWithRequiredAntiAffinity
}

// GetPodsWithRequiredNonHostScopedAntiAffinity is empty, as the scheduler's
// is while its InterPodAffinityHostnameFastPath gate is off (alpha, the
// default).
func (n *NodeInfo) GetPodsWithRequiredNonHostScopedAntiAffinity() []fwk.PodInfo {
	return nil
}
func (n *NodeInfo) GetUsedPorts() fwk.HostPortInfo                    { return n.usedPorts }
func (n *NodeInfo) GetRequested() fwk.Resource                        { return n.requested }
func (n *NodeInfo) GetNonZeroRequested() fwk.Resource                 { return n.nonZeroRequested }
func (n *NodeInfo) GetAllocatable() fwk.Resource                      { return n.allocatable }
func (n *NodeInfo) GetImageStates() map[string]*fwk.ImageStateSummary { return n.imageStates }
func (n *NodeInfo) GetPVCRefCounts() map[string]int                   { return nil }

// GetGeneration changes whenever the node or its pods change, so the host
// knows when its per-node cache is stale.
func (n *NodeInfo) GetGeneration() int64 { return n.gen }

// Snapshot returns a copy sharing the node and pod objects.
func (n *NodeInfo) Snapshot() fwk.NodeInfo {
	c := *n
	c.pods = append([]fwk.PodInfo(nil), n.pods...)
	c.podsWithAffinity = append([]fwk.PodInfo(nil), n.podsWithAffinity...)
	c.podsWithRequiredAntiAffinity = append([]fwk.PodInfo(nil), n.podsWithRequiredAntiAffinity...)
	r, z, a := *n.requested, *n.nonZeroRequested, *n.allocatable
	r.scalar, a.scalar = maps.Clone(r.scalar), maps.Clone(a.scalar)
	c.requested, c.nonZeroRequested, c.allocatable = &r, &z, &a
	c.imageStates = maps.Clone(n.imageStates)
	c.usedPorts = fwk.HostPortInfo{}
	for ip, ports := range n.usedPorts {
		c.usedPorts[ip] = maps.Clone(ports)
	}
	return &c
}

func (n *NodeInfo) String() string {
	name := "<nil>"
	if n.node != nil {
		name = n.node.Name
	}
	return fmt.Sprintf("&NodeInfo{Node: %s, Pods: %d, Requested: %+v, Allocatable: %+v}", name, len(n.pods), *n.requested, *n.allocatable)
}

// AddPodInfo adds a pod, its requests and its host ports.
func (n *NodeInfo) AddPodInfo(pi fwk.PodInfo) {
	n.pods = append(n.pods, pi)
	if withAffinity(pi.GetPod()) {
		n.podsWithAffinity = append(n.podsWithAffinity, pi)
	}
	if withRequiredAntiAffinity(pi.GetPod()) {
		n.podsWithRequiredAntiAffinity = append(n.podsWithRequiredAntiAffinity, pi)
	}
	n.update(pi, 1)
}

// RemovePod removes a pod by UID and subtracts its requests and host ports.
// As in the scheduler, the last pod takes the removed one's place, and a
// pod without a UID cannot be removed.
func (n *NodeInfo) RemovePod(_ klog.Logger, pod *v1.Pod) error {
	if pod.UID == "" {
		return fmt.Errorf("pod %s/%s has no UID to remove it by", pod.Namespace, pod.Name)
	}
	if withAffinity(pod) {
		n.podsWithAffinity, _ = without(n.podsWithAffinity, pod.UID)
	}
	if withRequiredAntiAffinity(pod) {
		n.podsWithRequiredAntiAffinity, _ = without(n.podsWithRequiredAntiAffinity, pod.UID)
	}
	var removed fwk.PodInfo
	if n.pods, removed = without(n.pods, pod.UID); removed == nil {
		return fmt.Errorf("no pod %s/%s on node %s", pod.Namespace, pod.Name, n.String())
	}
	n.update(removed, -1)
	return nil
}

// update adds (sign 1) or subtracts (sign -1) a pod's requests, non-zero
// requests and host ports, as the scheduler's NodeInfo.update does.
func (n *NodeInfo) update(pi fwk.PodInfo, sign int64) {
	r := pi.CalculateResource()
	n.requested.addResource(r.Resource, sign)
	n.nonZeroRequested.milliCPU += sign * r.Non0CPU
	n.nonZeroRequested.memory += sign * r.Non0Mem
	for _, p := range hostPorts(pi.GetPod()) {
		if sign > 0 {
			n.usedPorts.Add(p.HostIP, string(p.Protocol), p.HostPort)
		} else {
			n.usedPorts.Remove(p.HostIP, string(p.Protocol), p.HostPort)
		}
	}
	n.gen = generation.Add(1)
}

// without returns pods without the one with uid, the last one moved into
// its place, and that one (nil if none).
func without(pods []fwk.PodInfo, uid types.UID) ([]fwk.PodInfo, fwk.PodInfo) {
	for i, pi := range pods {
		if pi.GetPod().UID == uid {
			last := len(pods) - 1
			pods[i] = pods[last]
			pods[last] = nil
			if last == 0 {
				return nil, pi
			}
			return pods[:last], pi
		}
	}
	return pods, nil
}

func withAffinity(p *v1.Pod) bool {
	a := p.Spec.Affinity
	return a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil)
}

func withRequiredAntiAffinity(p *v1.Pod) bool {
	a := p.Spec.Affinity
	return a != nil && a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0
}

// hostPorts are the container ports with a host port that the pod holds for
// its whole life: its containers' and its restartable (sidecar) init
// containers'.
func hostPorts(pod *v1.Pod) []v1.ContainerPort {
	var out []v1.ContainerPort
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
			continue
		}
		for _, p := range c.Ports {
			if p.HostPort > 0 {
				out = append(out, p)
			}
		}
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort > 0 {
				out = append(out, p)
			}
		}
	}
	return out
}

// SetNode sets the node and its allocatable resources.
func (n *NodeInfo) SetNode(node *v1.Node) {
	n.node = node
	n.allocatable = &Resource{}
	n.allocatable.add(node.Status.Allocatable, 1)
	n.gen = generation.Add(1)
}

// podInfo is a pod with the affinity terms and resources the scheduler
// precomputes for it.
type podInfo struct {
	pod                   *v1.Pod
	requiredAffinity      []fwk.AffinityTerm
	requiredAntiAffinity  []fwk.AffinityTerm
	preferredAffinity     []fwk.WeightedAffinityTerm
	preferredAntiAffinity []fwk.WeightedAffinityTerm
	resource              fwk.PodResource
}

// newPodInfo parses the pod's affinity terms as the scheduler's NewPodInfo
// does: a group of terms that does not parse (the apiserver does not
// validate every selector) is left out.
func newPodInfo(pod *v1.Pod) *podInfo {
	p := &podInfo{pod: pod}
	p.requiredAffinity, _ = fwk.GetAffinityTerms(pod, fwk.GetPodAffinityTerms(pod.Spec.Affinity))
	p.requiredAntiAffinity, _ = fwk.GetAffinityTerms(pod, fwk.GetPodAntiAffinityTerms(pod.Spec.Affinity))
	if a := pod.Spec.Affinity; a != nil {
		if a.PodAffinity != nil {
			p.preferredAffinity, _ = fwk.GetWeightedAffinityTerms(pod, a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
		}
		if a.PodAntiAffinity != nil {
			p.preferredAntiAffinity, _ = fwk.GetWeightedAffinityTerms(pod, a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
		}
	}
	p.resource = calculateResource(pod)
	return p
}

func (p *podInfo) GetPod() *v1.Pod                                  { return p.pod }
func (p *podInfo) GetRequiredAffinityTerms() []fwk.AffinityTerm     { return p.requiredAffinity }
func (p *podInfo) GetRequiredAntiAffinityTerms() []fwk.AffinityTerm { return p.requiredAntiAffinity }
func (p *podInfo) GetPreferredAffinityTerms() []fwk.WeightedAffinityTerm {
	return p.preferredAffinity
}
func (p *podInfo) GetPreferredAntiAffinityTerms() []fwk.WeightedAffinityTerm {
	return p.preferredAntiAffinity
}
func (p *podInfo) CalculateResource() fwk.PodResource { return p.resource }

// The requests the scheduler assumes for a container that requests no cpu
// or no memory, when it scores (NonZeroRequested).
const (
	defaultMilliCPURequest = 100
	defaultMemoryRequest   = 200 * 1024 * 1024
)

// calculateResource is the pod's requests and non-zero cpu and memory
// requests, as the scheduler's PodInfo.CalculateResource computes them:
// the non-zero defaults fill in a container's missing requests, or, when
// the pod sets pod-level requests, the pod's missing ones.
func calculateResource(pod *v1.Pod) fwk.PodResource {
	opts := requestOptions()
	requests := resourcehelper.PodRequests(pod, opts)
	defaults := v1.ResourceList{}
	if !resourcehelper.IsPodLevelRequestsSet(pod) {
		defaults[v1.ResourceCPU] = *resource.NewMilliQuantity(defaultMilliCPURequest, resource.DecimalSI)
		defaults[v1.ResourceMemory] = *resource.NewQuantity(defaultMemoryRequest, resource.DecimalSI)
	} else {
		if _, ok := requests[v1.ResourceCPU]; !ok {
			defaults[v1.ResourceCPU] = *resource.NewMilliQuantity(defaultMilliCPURequest, resource.DecimalSI)
		}
		if _, ok := requests[v1.ResourceMemory]; !ok {
			defaults[v1.ResourceMemory] = *resource.NewQuantity(defaultMemoryRequest, resource.DecimalSI)
		}
	}
	nonZero := requests
	if len(defaults) > 0 {
		opts.NonMissingContainerRequests = defaults
		nonZero = resourcehelper.PodRequests(pod, opts)
	}
	r := &Resource{}
	r.add(requests, 1)
	cpu, mem := nonZero[v1.ResourceCPU], nonZero[v1.ResourceMemory]
	return fwk.PodResource{Resource: r, Non0CPU: cpu.MilliValue(), Non0Mem: mem.Value()}
}

// Resource is a set of resource quantities in the scheduler's units.
type Resource struct {
	milliCPU, memory, ephemeralStorage int64
	allowedPods                        int
	scalar                             map[v1.ResourceName]int64
}

var _ fwk.Resource = &Resource{}

// The getters below implement fwk.Resource.

func (r *Resource) GetMilliCPU() int64                            { return r.milliCPU }
func (r *Resource) GetMemory() int64                              { return r.memory }
func (r *Resource) GetEphemeralStorage() int64                    { return r.ephemeralStorage }
func (r *Resource) GetAllowedPodNumber() int                      { return r.allowedPods }
func (r *Resource) GetScalarResources() map[v1.ResourceName]int64 { return r.scalar }

// SetMaxResource raises each quantity to rl's where rl's is larger.
func (r *Resource) SetMaxResource(rl v1.ResourceList) {
	for name, q := range rl {
		var v int64
		if name == v1.ResourceCPU {
			v = q.MilliValue()
		} else {
			v = q.Value()
		}
		switch name {
		case v1.ResourceCPU:
			r.milliCPU = max(r.milliCPU, v)
		case v1.ResourceMemory:
			r.memory = max(r.memory, v)
		case v1.ResourceEphemeralStorage:
			r.ephemeralStorage = max(r.ephemeralStorage, v)
		case v1.ResourcePods:
			r.allowedPods = max(r.allowedPods, int(v))
		default:
			if isScalar(name) {
				if r.scalar == nil {
					r.scalar = map[v1.ResourceName]int64{}
				}
				r.scalar[name] = max(r.scalar[name], v)
			}
		}
	}
}

// addResource adds (sign 1) or subtracts (sign -1) another Resource.
func (r *Resource) addResource(o fwk.Resource, sign int64) {
	r.milliCPU += sign * o.GetMilliCPU()
	r.memory += sign * o.GetMemory()
	r.ephemeralStorage += sign * o.GetEphemeralStorage()
	for name, v := range o.GetScalarResources() {
		if r.scalar == nil {
			r.scalar = map[v1.ResourceName]int64{}
		}
		r.scalar[name] += sign * v
	}
}

// add adds (sign 1) or subtracts (sign -1) a resource list, the way the
// scheduler's Resource.Add counts it.
func (r *Resource) add(rl v1.ResourceList, sign int64) {
	for name, q := range rl {
		switch name {
		case v1.ResourceCPU:
			r.milliCPU += sign * q.MilliValue()
		case v1.ResourceMemory:
			r.memory += sign * q.Value()
		case v1.ResourceEphemeralStorage:
			r.ephemeralStorage += sign * q.Value()
		case v1.ResourcePods:
			r.allowedPods += int(sign * q.Value())
		default:
			if isScalar(name) {
				if r.scalar == nil {
					r.scalar = map[v1.ResourceName]int64{}
				}
				r.scalar[name] += sign * q.Value()
			}
		}
	}
}

// isScalar reports whether the scheduler counts a resource as a scalar:
// extended resources (domain-prefixed, outside kubernetes.io), hugepages,
// attachable volumes and prefixed native resources (kubernetes.io/...).
func isScalar(name v1.ResourceName) bool {
	s := string(name)
	switch {
	case strings.HasPrefix(s, v1.ResourceHugePagesPrefix), strings.HasPrefix(s, v1.ResourceAttachableVolumesPrefix):
		return true
	case strings.Contains(s, "kubernetes.io/"):
		return true
	}
	return strings.Contains(s, "/") && !strings.HasPrefix(s, v1.DefaultResourceRequestsPrefix)
}
