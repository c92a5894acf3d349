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
	"strings"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
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
// cache does.
func List(nodes []*v1.Node, pods []*v1.Pod) []fwk.NodeInfo {
	byNode := map[string][]*v1.Pod{}
	for _, p := range pods {
		if p.Spec.NodeName != "" && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed {
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
		}
	}
	out := make([]fwk.NodeInfo, len(nodes))
	for i, n := range nodes {
		out[i] = New(n, byNode[n.Name]...)
	}
	return out
}

// New returns the NodeInfo of node with pods on it.
func New(node *v1.Node, pods ...*v1.Pod) *NodeInfo {
	ni := &NodeInfo{requested: &Resource{}, allocatable: &Resource{}}
	ni.SetNode(node)
	for _, p := range pods {
		ni.AddPodInfo(&podInfo{pod: p})
	}
	return ni
}

// NodeInfo is a node and the pods on it. It implements what policies read;
// the affinity, port, image and volume views the scheduler's own plugins
// use are empty.
type NodeInfo struct {
	// The embedded interface is always nil: it only supplies the methods a
	// Kubernetes minor adds to fwk.NodeInfo that policies cannot read (such
	// as GetNodeDeclaredFeatures), so this package names no type that
	// exists in one build line only (docs/kubernetes.md). Calling one panics.
	fwk.NodeInfo

	node        *v1.Node
	pods        []fwk.PodInfo
	requested   *Resource
	allocatable *Resource
	gen         int64
}

var _ fwk.NodeInfo = &NodeInfo{}

// The methods below implement fwk.NodeInfo; see the interface for each.

func (n *NodeInfo) Node() *v1.Node                     { return n.node }
func (n *NodeInfo) GetPods() []fwk.PodInfo             { return n.pods }
func (n *NodeInfo) GetPodsWithAffinity() []fwk.PodInfo { return nil }
func (n *NodeInfo) GetPodsWithRequiredAntiAffinity() []fwk.PodInfo {
	return nil
}
func (n *NodeInfo) GetPodsWithRequiredNonHostScopedAntiAffinity() []fwk.PodInfo {
	return nil
}
func (n *NodeInfo) GetUsedPorts() fwk.HostPortInfo                    { return fwk.HostPortInfo{} }
func (n *NodeInfo) GetRequested() fwk.Resource                        { return n.requested }
func (n *NodeInfo) GetNonZeroRequested() fwk.Resource                 { return n.requested }
func (n *NodeInfo) GetAllocatable() fwk.Resource                      { return n.allocatable }
func (n *NodeInfo) GetImageStates() map[string]*fwk.ImageStateSummary { return nil }
func (n *NodeInfo) GetPVCRefCounts() map[string]int                   { return nil }

// GetGeneration changes whenever the node or its pods change, so the host
// knows when its per-node cache is stale.
func (n *NodeInfo) GetGeneration() int64 { return n.gen }

// Snapshot returns a copy sharing the node and pod objects.
func (n *NodeInfo) Snapshot() fwk.NodeInfo {
	c := *n
	c.pods = append([]fwk.PodInfo(nil), n.pods...)
	r, a := *n.requested, *n.allocatable
	r.scalar, a.scalar = cloneMap(r.scalar), cloneMap(a.scalar)
	c.requested, c.allocatable = &r, &a
	return &c
}

func (n *NodeInfo) String() string {
	name := "<nil>"
	if n.node != nil {
		name = n.node.Name
	}
	return fmt.Sprintf("&NodeInfo{Node: %s, Pods: %d, Requested: %+v, Allocatable: %+v}", name, len(n.pods), *n.requested, *n.allocatable)
}

// AddPodInfo adds a pod and its requests.
func (n *NodeInfo) AddPodInfo(pi fwk.PodInfo) {
	n.pods = append(n.pods, pi)
	n.requested.add(resourcehelper.PodRequests(pi.GetPod(), requestOptions()), 1)
	n.gen = generation.Add(1)
}

// RemovePod removes a pod by UID and subtracts its requests.
func (n *NodeInfo) RemovePod(_ klog.Logger, pod *v1.Pod) error {
	for i, pi := range n.pods {
		if pi.GetPod().UID == pod.UID {
			n.requested.add(resourcehelper.PodRequests(pi.GetPod(), requestOptions()), -1)
			n.pods = append(n.pods[:i], n.pods[i+1:]...)
			n.gen = generation.Add(1)
			return nil
		}
	}
	return fmt.Errorf("no pod %s/%s on node %s", pod.Namespace, pod.Name, n.String())
}

// SetNode sets the node and its allocatable resources.
func (n *NodeInfo) SetNode(node *v1.Node) {
	n.node = node
	n.allocatable = &Resource{}
	n.allocatable.add(node.Status.Allocatable, 1)
	n.gen = generation.Add(1)
}

// podInfo is a pod without the affinity terms the scheduler precomputes.
type podInfo struct{ pod *v1.Pod }

func (p *podInfo) GetPod() *v1.Pod                                  { return p.pod }
func (p *podInfo) GetRequiredAffinityTerms() []fwk.AffinityTerm     { return nil }
func (p *podInfo) GetRequiredAntiAffinityTerms() []fwk.AffinityTerm { return nil }
func (p *podInfo) GetPreferredAffinityTerms() []fwk.WeightedAffinityTerm {
	return nil
}
func (p *podInfo) GetPreferredAntiAffinityTerms() []fwk.WeightedAffinityTerm {
	return nil
}
func (p *podInfo) CalculateResource() fwk.PodResource {
	r := &Resource{}
	r.add(resourcehelper.PodRequests(p.pod, requestOptions()), 1)
	return fwk.PodResource{Resource: r, Non0CPU: r.milliCPU, Non0Mem: r.memory}
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

func cloneMap(m map[v1.ResourceName]int64) map[v1.ResourceName]int64 {
	if m == nil {
		return nil
	}
	c := make(map[v1.ResourceName]int64, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}
