package hostabi

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

// CountPods counts the pods matching term for pod, the pod being
// scheduled, per topology value: the value of the term's topology key on
// each node that has it, or each node's name for an empty key, over the
// nodes the term includes (hasNodeKeys, podIncludes). Every such value is
// present, with 0 when no pod matches. A nil labelSelector matches no pod
// and an empty one every pod, as in upstream.
func (c *ClusterView) CountPods(t *CountTerm, pod *v1.Pod) map[string]int64 {
	out := map[string]int64{}
	for _, vc := range c.countPodsKept(t, pod, "") {
		out[vc.Value] = vc.N
	}
	return out
}

// countPodsKept is CountPods, sorted by value, taking the counts of nodes
// unchanged since the term was last counted from c.NodeCounts when termKey
// (the term's bytes) is set and the term is keepable.
func (c *ClusterView) countPodsKept(t *CountTerm, pod *v1.Pod, termKey string) []model.ValueCount {
	podNS := pod.Namespace
	cache := c.NodeCounts
	var kept *termCounts
	if cache != nil && termKey != "" && len(termKey) <= maxKeptTermBytes && t.keepable() {
		cache.mu.Lock()
		defer cache.mu.Unlock()
		kept = cache.term(podNS+"\x00"+termKey, len(c.Nodes)) // a term without namespaces counts the pod's own
	}
	tc := kept
	if tc == nil {
		tc = new(termCounts) // this count's alone
		tc.size(len(c.Nodes))
	}
	include := t.podIncludes(pod) // and hasNodeKeys, kept with the count
	type nsEntry struct {
		labels labels.Set
		known  bool
	}
	nsLabels := map[string]nsEntry{}
	namespaceLabels := func(ns string) (labels.Set, bool) {
		e, seen := nsLabels[ns]
		if !seen {
			if c.NamespaceLabels != nil {
				e.labels, e.known = c.NamespaceLabels(ns)
			}
			nsLabels[ns] = e
		}
		return e.labels, e.known
	}
	matchers := []func(*v1.Pod) bool{t.matcher(podNS, namespaceLabels)}
	for i := range t.AlsoMatching {
		matchers = append(matchers, t.AlsoMatching[i].matcher(podNS, namespaceLabels))
	}
	matches := func(p *v1.Pod) bool {
		for _, m := range matchers {
			if !m(p) {
				return false
			}
		}
		return true
	}
	for i, ni := range c.Nodes {
		node := ni.Node()
		if node == nil {
			tc.put(i, 0, "", 0, "", false)
			continue
		}
		if kept != nil && kept.get(cache, i, ni, node.Name) {
			continue
		}
		value, hasValue := node.Name, true
		if t.TopologyKey != "" {
			value, hasValue = node.Labels[t.TopologyKey]
		}
		hasValue = hasValue && t.hasNodeKeys(node) // a node without them counts for no value
		var n int64
		if hasValue {
			for _, pi := range ni.GetPods() {
				p := pi.GetPod()
				if (p.DeletionTimestamp != nil && !t.IncludeTerminating) || !matches(p) {
					continue
				}
				n++
			}
		}
		tc.put(i, Generation(ni), node.Name, n, value, hasValue)
	}
	return tc.sorted(c.Nodes, include)
}

// countPods answers count_pods for the term's bytes: encoded once per view
// per distinct term, so every policy and node of a cycle shares one count.
func (c *ClusterView) countPods(term []byte, pod *v1.Pod) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := c.counts[string(term)]; ok {
		return b, b != nil
	}
	if c.counts == nil {
		c.counts = map[string][]byte{}
	}
	t, err := ParseCountTerm(term)
	if err != nil {
		c.counts[string(term)] = nil
		return nil, false
	}
	b := model.EncodeSortedCounts(c.countPodsKept(t, pod, string(term)))
	c.counts[string(term)] = b
	return b, true
}
