package hostabi

import (
	"runtime"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

// existingTerms answers existing_terms for pod (docs/abi.md §4.6.2): the
// terms of one kind of the pods on the view's nodes that pod matches,
// summed per (topologyKey, value) of the node each term's pod is on, as
// InterPodAffinity counts them: a term matches when its namespaces hold the
// pod's namespace or its namespace selector matches that namespace's
// labels (none for a namespace the view does not know), and its selector
// matches the pod's labels. Encoded once per view per kind; ok is false
// for an unknown kind.
func (c *ClusterView) existingTerms(kind int32, pod *v1.Pod) ([]byte, bool) {
	return c.encodeOnce(c.existing[:], kind, func() []byte {
		if c.NodeCounts != nil {
			return model.EncodeSortedTopologySums(c.NodeCounts.sortSums(c.existingSums(kind, pod, ""), c.Nodes))
		}
		return model.EncodeTopologySums(c.ExistingTerms(kind, pod))
	})
}

// ExistingTerms computes existing_terms of kind for pod, unsorted and
// uncached (existingTerms caches its encoding per view).
func (c *ClusterView) ExistingTerms(kind int32, pod *v1.Pod) []model.TopologySum {
	sums := c.existingSums(kind, pod, "")
	out := make([]model.TopologySum, 0, len(sums))
	for p, sum := range sums {
		out = append(out, model.TopologySum{Key: p.key, Value: p.value, Sum: sum})
	}
	return out
}

// existingSums is ExistingTerms by topology pair, of the terms of pods in
// namespace ns ("": every namespace).
func (c *ClusterView) existingSums(kind int32, pod *v1.Pod, ns string) map[topologyPair]int64 {
	var nsLabels labels.Set
	if c.NamespaceLabels != nil {
		if l, ok := c.NamespaceLabels(pod.Namespace); ok {
			nsLabels = l
		}
	}
	nodes := c.Nodes
	if c.HasAffinityLists {
		nodes = c.WithAffinity
		if kind == model.ExistingAntiAffinityRequired {
			nodes = c.WithRequiredAntiAffinity
		}
	}
	// Split over the CPUs, as InterPodAffinity's PreFilter and PreScore
	// walk nodes through the scheduler's parallelizer.
	parts := make([]map[topologyPair]int64, parallelChunks(len(nodes)))
	var wg sync.WaitGroup
	for k := range parts {
		lo, hi := k*len(nodes)/len(parts), (k+1)*len(nodes)/len(parts)
		wg.Go(func() { parts[k] = existingSums(nodes[lo:hi], kind, pod, nsLabels, ns) })
	}
	wg.Wait()
	sums := parts[0]
	for _, m := range parts[1:] {
		for p, sum := range m {
			sums[p] += sum
		}
	}
	return sums
}

// topologyPair is a topology key and one of its values.
type topologyPair struct{ key, value string }

// pairOrder is the topology pairs existing_terms last answered with,
// sorted by key and value, and each one's rank in that order. A cluster's
// pairs are its nodes' values of a few keys and hardly change from cycle
// to cycle, so a cycle's sums are put in order by their ranks, integers,
// instead of being sorted as strings: with an anti-affinity term on the
// hostname, sorting 500 node names was three quarters of existing_terms'
// time in SchedulingPodAntiAffinity (docs/architecture.md).
type pairOrder struct {
	pairs []topologyPair
	rank  map[topologyPair]int32
	// at is scratch space by rank, all zero between calls.
	at []int32
}

// rankedSum is a sum and its pair's rank.
type rankedSum struct {
	rank int32
	sum  int64
}

// sortSums returns sums sorted by key and value. A pair the kept order
// does not hold sorts the order again, with every pair nodes have of the
// topology keys in sums: a workload whose pods land on one new node after
// another then finds each new pair already there (in
// SchedulingPodAntiAffinity, where every cycle added a hostname, adding
// only sums' pairs sorted the order again in every cycle). The pairs kept
// from before stay unless that would pass 4 per node (nodes come and go:
// the order must not grow with every name it ever saw).
func (c *NodeCountCache) sortSums(sums map[topologyPair]int64, nodes []fwk.NodeInfo) []model.TopologySum {
	c.mu.Lock()
	defer c.mu.Unlock()
	o := &c.order
	for p := range sums {
		if _, ok := o.rank[p]; !ok {
			o.add(sums, nodes)
			c.orderSorts++
			break
		}
	}
	ranked := make([]rankedSum, 0, len(sums))
	for p, sum := range sums {
		ranked = append(ranked, rankedSum{o.rank[p], sum})
	}
	out := make([]model.TopologySum, 0, len(ranked))
	if len(ranked) < len(o.pairs)/16 {
		// A few of many pairs (a zone term's, next to the hostnames).
		slices.SortFunc(ranked, func(a, b rankedSum) int { return int(a.rank - b.rank) })
		for _, r := range ranked {
			p := o.pairs[r.rank]
			out = append(out, model.TopologySum{Key: p.key, Value: p.value, Sum: r.sum})
		}
		return out
	}
	// Most of them: one pass over the order, with no comparison.
	if len(o.at) != len(o.pairs) {
		o.at = make([]int32, len(o.pairs))
	}
	for i, r := range ranked {
		o.at[r.rank] = int32(i) + 1
	}
	for rank, i := range o.at {
		if i > 0 {
			p := o.pairs[rank]
			out = append(out, model.TopologySum{Key: p.key, Value: p.value, Sum: ranked[i-1].sum})
			o.at[rank] = 0
		}
	}
	return out
}

// add sorts the order again with sums' pairs and nodes' pairs of sums'
// keys in it.
func (o *pairOrder) add(sums map[topologyPair]int64, nodes []fwk.NodeInfo) {
	var keys []string
	for p := range sums {
		if !slices.Contains(keys, p.key) {
			keys = append(keys, p.key)
		}
	}
	fresh := make(map[topologyPair]bool, len(sums)+len(keys)*len(nodes))
	for p := range sums {
		fresh[p] = true
	}
	for _, ni := range nodes {
		if n := ni.Node(); n != nil {
			for _, k := range keys {
				if v, ok := n.Labels[k]; ok {
					fresh[topologyPair{k, v}] = true
				}
			}
		}
	}
	var pairs []topologyPair
	keep := len(o.pairs)+len(fresh) <= 4*len(nodes)+256
	if keep {
		pairs = append(pairs, o.pairs...)
	}
	for p := range fresh {
		if _, ok := o.rank[p]; !ok || !keep {
			pairs = append(pairs, p)
		}
	}
	slices.SortFunc(pairs, func(a, b topologyPair) int { return model.CompareTopology(a.key, a.value, b.key, b.value) })
	o.pairs, o.rank = pairs, make(map[topologyPair]int32, len(pairs))
	for i, p := range pairs {
		o.rank[p] = int32(i)
	}
}

// parallelChunks is how many goroutines walk n nodes: one per CPU (at
// most 16, the scheduler's default parallelism), each with at least 128
// nodes.
func parallelChunks(n int) int {
	return max(1, min(runtime.GOMAXPROCS(0), 16, n/128))
}

// existingSums is ExistingTerms over some of the nodes.
func existingSums(nodes []fwk.NodeInfo, kind int32, pod *v1.Pod, nsLabels labels.Set, ns string) map[topologyPair]int64 {
	sums := map[topologyPair]int64{}
	for _, ni := range nodes {
		node := ni.Node()
		if node == nil || len(node.Labels) == 0 {
			continue
		}
		// The matching terms of a node's pods mostly share one topology
		// key: its value is looked up once per run of matching terms with
		// that key, and their weights summed before one entry of sums is
		// touched (the node's label map and sums were 85% of
		// existing_terms' time in SchedulingPreferredPodAffinity). A term
		// is matched first, as upstream does: most anti-affinity terms do
		// not match the pod, and cost no lookup.
		var key, value string
		var hasKey, matched, looked bool
		var sum int64
		flush := func() {
			if matched {
				sums[topologyPair{key, value}] += sum
			}
			matched, sum = false, 0
		}
		add := func(t *fwk.AffinityTerm, weight int32) {
			if !t.Matches(pod, nsLabels) {
				return
			}
			if !looked || t.TopologyKey != key {
				flush()
				key, looked = t.TopologyKey, true
				value, hasKey = node.Labels[key]
			}
			if hasKey {
				sum += int64(weight)
				matched = true
			}
		}
		// Only pods with terms of the kind: kube-scheduler keeps them in
		// lists of their own, as InterPodAffinity walks them.
		pods := ni.GetPodsWithAffinity()
		if kind == model.ExistingAntiAffinityRequired {
			pods = ni.GetPodsWithRequiredAntiAffinity()
		}
		for _, pi := range pods {
			if ns != "" && pi.GetPod().Namespace != ns {
				continue
			}
			switch kind {
			case model.ExistingAntiAffinityRequired, model.ExistingAffinityRequired:
				terms := pi.GetRequiredAntiAffinityTerms()
				if kind == model.ExistingAffinityRequired {
					terms = pi.GetRequiredAffinityTerms()
				}
				for i := range terms {
					add(&terms[i], 1)
				}
			default:
				terms := pi.GetPreferredAffinityTerms()
				if kind == model.ExistingAntiAffinityPreferred {
					terms = pi.GetPreferredAntiAffinityTerms()
				}
				for i := range terms {
					add(&terms[i].AffinityTerm, terms[i].Weight)
				}
			}
		}
		flush()
	}
	return sums
}
