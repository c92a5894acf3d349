package hostabi

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/model"
	"github.com/wasmsched/wasmsched/internal/kubemodel"
)

// ClusterView is what a policy may see of the cluster beyond the pod being
// scheduled and the node being evaluated (docs/abi.md §4.6): every node of
// the scheduler's snapshot, namespace labels, and pod counts. One view
// serves every policy and call of a cycle; a count is computed natively the
// first time any policy asks for its term, so a topology-spread or
// pod-affinity policy never walks the cluster's pods through host calls.
type ClusterView struct {
	// Nodes are the snapshot's nodes, in the order cluster_node numbers them.
	Nodes []fwk.NodeInfo
	// NamespaceLabels returns a namespace's labels and whether it exists; nil
	// when the view has no namespaces (namespace_labels then answers -3).
	NamespaceLabels func(name string) (map[string]string, bool)
	// DefaultSpreadSelector returns the requirements of the selector
	// PodTopologySpread's default constraints use for a pod (pod_list kind
	// PodDefaultSpreadSelector); nil gives none.
	DefaultSpreadSelector func(pod *v1.Pod) []metav1.LabelSelectorRequirement

	// WithAffinity and WithRequiredAntiAffinity, when set, are the nodes
	// among Nodes that have pods with inter-pod (anti-)affinity terms, and
	// with required anti-affinity terms: the snapshot's own lists, which
	// existing_terms walks instead of every node, as InterPodAffinity does
	// (SchedulingPodAntiAffinity's 500-node cycles spent 0.4 ms a pod
	// touching nodes without such pods). Nil walks Nodes.
	WithAffinity, WithRequiredAntiAffinity []fwk.NodeInfo
	// HasAffinityLists says the two lists were set (either may be empty).
	HasAffinityLists bool

	// NodeCounts, when set, keeps count_pods' per-node counts across
	// cycles (NodeCountCache); one per scheduler profile, shared by its
	// views.
	NodeCounts *NodeCountCache

	// Volumes are the listers volume_claims reads the pod's claims, their
	// volumes and classes from; nil holds none (every claim not found).
	Volumes kubemodel.VolumeLister

	// Devices answers resource_claims for the pod: its DRA requests and,
	// with nodes, the devices of their classes per node (in a scheduler,
	// from the DynamicResources plugin's view; in a case table, the
	// case's). Nil holds none: no requests, no devices.
	Devices func(pod *v1.Pod, nodes bool) model.Devices

	mu       sync.Mutex
	counts   map[string][]byte // by term bytes
	existing [model.NumExistingTerms][]byte
	// tenantExisting is existing_terms as namespaced policies read it:
	// the terms of the pod's own namespace's pods only (every namespaced
	// policy of a cycle is of the pod's namespace).
	tenantExisting [model.NumExistingTerms][]byte
	claims         []model.VolumeClaim
	volumes        [model.NumVolumeClaimKinds][]byte
	devices        *model.Devices // the requests, and the nodes once devicesNodes
	devicesNodes   bool
	deviceLists    [model.NumDeviceClaimKinds][]byte
}

// resourceClaims answers resource_claims of kind for pod: the pod's DRA
// view read once per view, each kind encoded once; ok is false for an
// unknown kind.
func (c *ClusterView) resourceClaims(kind int32, pod *v1.Pod) ([]byte, bool) {
	return c.encodeOnce(c.deviceLists[:], kind, func() []byte {
		// The requests alone cost a claim lookup; the nodes' sums walk
		// every slice, so they are read only for a policy that asks.
		nodes := kind == model.DeviceClaimsNodes
		if c.devices == nil || nodes && !c.devicesNodes {
			c.devices = &model.Devices{}
			if c.Devices != nil {
				*c.devices = c.Devices(pod, nodes)
			}
			c.devicesNodes = nodes
		}
		b, _ := model.EncodeDevices(*c.devices, kind)
		return b
	})
}

// encodeOnce answers one kind of a per-cycle cluster read whose answers
// the view keeps in lists: encoded under c.mu the first time any policy
// of the cycle asks, then shared; ok is false for a kind out of range.
func (c *ClusterView) encodeOnce(lists [][]byte, kind int32, encode func() []byte) ([]byte, bool) {
	if kind < 0 || int(kind) >= len(lists) {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if b := lists[kind]; b != nil {
		return b, true
	}
	b := encode()
	lists[kind] = b
	return b, true
}

// volumeClaims answers volume_claims of kind for pod: the pod's claims
// read from the listers once per view, each kind encoded once; ok is
// false for an unknown kind.
func (c *ClusterView) volumeClaims(kind int32, pod *v1.Pod) ([]byte, bool) {
	return c.encodeOnce(c.volumes[:], kind, func() []byte {
		if c.claims == nil {
			c.claims = kubemodel.VolumeClaims(pod, c.Volumes)
			if c.claims == nil {
				c.claims = []model.VolumeClaim{}
			}
		}
		b, _ := model.EncodeVolumeClaims(c.claims, kind)
		return b
	})
}

// clusterNode reads field kind of node i; ok is false for a bad i or kind.
func (c *ClusterView) clusterNode(nodes *nodeCache, i, kind int32) ([]byte, string, bool) {
	if i < 0 || int(i) >= len(c.Nodes) || c.Nodes[i].Node() == nil {
		return nil, "", false
	}
	return clusterNodeField(nodes, c.Nodes[i], kind)
}

// clusterNodeField reads one cluster_node field of a node: the name as a
// string, the lists from the node's per-generation cache.
func clusterNodeField(nodes *nodeCache, ni fwk.NodeInfo, kind int32) ([]byte, string, bool) {
	switch kind {
	case model.ClusterNodeName:
		return model.ClusterNode(nodes.model(ni, kubemodel.NodeScalars), kind)
	case model.ClusterNodeLabels:
		b, ok := nodes.list(ni, model.NodeLabels)
		return b, "", ok
	case model.ClusterNodeTaints:
		b, ok := nodes.list(ni, model.NodeTaints)
		return b, "", ok
	}
	return nil, "", false
}
