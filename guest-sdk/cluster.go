package sdk

import (
	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

// Cluster is the scheduler's view of the whole cluster in the current
// scheduling cycle (docs/abi.md §4.6): every node of its snapshot, not only
// those the pod may run on, with their names, labels and taints; pod counts
// the host computes once per cycle; and namespace labels. Use the zero
// value. A policy reads it only when its args declare `reads: [Cluster]`
// (NamespaceLabels: `[Namespaces]`); an undeclared read fails the call with
// an Error naming the declaration, as Node.Pods does.
//
// Nodes are numbered 0..NodeCount()-1 in an order that holds for the whole
// cycle (not across cycles).
type Cluster struct{}

// NodeCount returns how many nodes the snapshot holds. It is asked of the
// host once per cycle, so calling it on every node costs nothing more.
func (Cluster) NodeCount() int { return clusterNodes() }

// NodeName returns the name of node i.
func (Cluster) NodeName(i int) string { return string(clusterNode(i, model.ClusterNodeName)) }

// NodeLabels returns the labels of node i (encoded once per node
// generation by the host; decoded on each call).
func (Cluster) NodeLabels(i int) map[string]string {
	return decodeMap(clusterNode(i, model.ClusterNodeLabels))
}

// NodeTaints returns the taints of node i.
func (Cluster) NodeTaints(i int) []Taint {
	var ts []Taint
	r := abi.NewListReader(clusterNode(i, model.ClusterNodeTaints))
	for r.Len() >= 3 {
		f := next(&r, 3)
		ts = append(ts, Taint{Key: f[0], Value: f[1], Effect: f[2]})
	}
	return ts
}

// CountPods counts the pods on the snapshot's nodes that match term, per
// value of term.TopologyKey on the nodes that have that label (per node
// name when TopologyKey is ""), over the nodes term includes (NodeKeys,
// NodeAffinityPolicy, NodeTaintsPolicy: a spread constraint's rules).
// Every such value is in the result, with 0 when no pod matches, so a
// policy also learns the topology's domains. The host counts natively,
// once per cycle per distinct term, whichever policy or node asks; the SDK
// keeps the answer for the rest of the cycle, so do not change the map.
func (Cluster) CountPods(term CountTerm) map[string]int64 { return countPods(&term) }

// Kinds of Cluster.ExistingTerms: which terms of the pods already on
// nodes.
const (
	ExistingAntiAffinityRequired  = model.ExistingAntiAffinityRequired
	ExistingAffinityRequired      = model.ExistingAffinityRequired
	ExistingAffinityPreferred     = model.ExistingAffinityPreferred
	ExistingAntiAffinityPreferred = model.ExistingAntiAffinityPreferred
)

// ExistingTerms looks the other way from CountPods: it takes the affinity
// terms of one kind (ExistingAntiAffinityRequired and its siblings) of the
// pods already on the snapshot's nodes, keeps those the pod being
// scheduled matches, and sums them per topology pair of the node each
// term's pod runs on (1 per required term, the weight of a preferred one).
// A term matches with upstream's rules: its namespaces hold the pod's
// namespace, or its namespace selector matches the labels of the pod's
// namespace (none when the scheduler does not know it), and its selector
// matches the pod's labels. This is what InterPodAffinity checks against
// the existing pods' anti-affinity, and adds to its scores. Sorted by key
// and value; only pairs with a match. Computed by the host once per cycle.
func (Cluster) ExistingTerms(kind int32) []TopologySum {
	var out []TopologySum
	r := abi.NewListReader(existingTerms(kind))
	for r.Len() >= 3 {
		f := next(&r, 3)
		out = append(out, TopologySum{Key: f[0], Value: f[1], Sum: parseInt([]byte(f[2]))})
	}
	return out
}

// NamespaceLabels returns the labels of a namespace, and false when the
// scheduler knows no such namespace.
func (Cluster) NamespaceLabels(namespace string) (map[string]string, bool) {
	return namespaceLabels(namespace)
}
