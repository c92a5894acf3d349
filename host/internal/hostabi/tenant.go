package hostabi

import (
	"encoding/json"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/model"
	"github.com/wasmsched/wasmsched/internal/kubemodel"
)

// A namespaced policy belongs to a team, and a team may see its own
// namespace's pods in full and other namespaces' pods only as counts, the
// way its RBAC lets it list its own pods and nothing else. Whatever reads
// the operator grants it, the host answers them inside its namespace:
//
//   - node_list(9, 10, 11), the pods on a node with their labels and
//     owners: its namespace's pods only (node_pod_count and the node's
//     requested resources still count every pod);
//   - count_pods: the term counts pods of its namespace only, whatever
//     namespaces or namespace selector it names (a selector over other
//     namespaces would reveal their pods' labels, and its namespace
//     selector their namespace's labels);
//   - existing_terms: the terms of its namespace's pods only;
//   - namespace_labels: its own namespace only;
//   - node_list(8), the node's addresses: none (a team cannot list
//     nodes; the node's name and labels are what placement needs);
//   - intern_string: never a string that only a pod's label put there (a
//     pod of another namespace scheduled by the operator's policies).
//
// The pod being scheduled is always of the policy's namespace: a
// namespaced policy is called only for its namespace's pods.

// tenantFiltered reports whether node_list's kind lists the node's pods,
// or its addresses.
func tenantFiltered(kind int32) bool {
	return kind == model.NodePods || kind == model.NodePodLabels || kind == model.NodePodOwners || kind == model.NodeAddresses
}

// tenantLists are a node's pod lists as the policies of one namespace
// read them.
type tenantLists struct {
	ns    string
	lists [3][]byte
}

// tenantList is node_list(kind) of ni for the policies of namespace ns:
// the node's model with only ns's pods, encoded once per NodeInfo
// generation and namespace (the last namespace asked is kept).
func (c *nodeCache) tenantList(ni fwk.NodeInfo, kind int32, ns string) ([]byte, bool) {
	if kind == model.NodeAddresses {
		return noAddresses, true
	}
	e := c.entry(ni)
	i := kind - model.NodePods
	t := e.tenant.Load()
	if t != nil && t.ns == ns && t.lists[i] != nil {
		return t.lists[i], true
	}
	full := e.model(ni, kubemodel.NodeListPart(kind))
	// A model of its own with only the pods (the lists of pods read
	// nothing else): the shared one's other parts may be filled meanwhile.
	var own model.Node
	for j := range full.Derived.Pods {
		if full.Derived.Pods[j].Namespace == ns {
			own.Derived.Pods = append(own.Derived.Pods, full.Derived.Pods[j])
		}
	}
	b, ok := model.NodeList(&own, kind)
	if !ok {
		return nil, false
	}
	if b == nil {
		b = []byte{} // cached as encoded
	}
	next := &tenantLists{ns: ns}
	if t != nil && t.ns == ns {
		next.lists = t.lists
	}
	next.lists[i] = b
	e.tenant.Store(next)
	return b, true
}

// noAddresses is node_list(8) of a node without addresses.
var noAddresses, _ = model.NodeList(&model.Node{}, model.NodeAddresses)

// tenantTerm narrows a count_pods term to namespace ns: its namespaces
// and namespace selector, and those of its alsoMatching terms, are
// replaced by ns. A term that does not parse is returned as it is, for
// countPods to refuse.
func tenantTerm(term []byte, ns string) []byte {
	t, err := ParseCountTerm(term)
	if err != nil {
		return term
	}
	narrow := func(t *CountTerm) bool {
		if t.NamespaceSelector == nil && (len(t.Namespaces) == 0 || len(t.Namespaces) == 1 && t.Namespaces[0] == ns) {
			return false
		}
		t.NamespaceSelector, t.Namespaces = nil, []string{ns}
		return true
	}
	changed := narrow(t)
	for i := range t.AlsoMatching {
		changed = narrow(&t.AlsoMatching[i]) || changed
	}
	if !changed {
		return term
	}
	b, err := json.Marshal(t)
	if err != nil {
		return term
	}
	return b
}

// tenantExistingTerms is existingTerms over the terms of the pod's own
// namespace's pods.
func (c *ClusterView) tenantExistingTerms(kind int32, pod *v1.Pod) ([]byte, bool) {
	return c.encodeOnce(c.tenantExisting[:], kind, func() []byte {
		if c.NodeCounts != nil {
			return model.EncodeSortedTopologySums(c.NodeCounts.sortSums(c.existingSums(kind, pod, pod.Namespace), c.Nodes))
		}
		sums := c.existingSums(kind, pod, pod.Namespace)
		out := make([]model.TopologySum, 0, len(sums))
		for p, sum := range sums {
			out = append(out, model.TopologySum{Key: p.key, Value: p.value, Sum: sum})
		}
		return model.EncodeTopologySums(out)
	})
}
