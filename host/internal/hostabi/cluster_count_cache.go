package hostabi

import (
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

// NodeCountCache keeps, for each count_pods term, how many of each node's
// pods matched it, with the node's NodeInfo generation at the time:
// kube-scheduler gives a NodeInfo a new generation, from one process-wide
// counter, on every change to the node or its pods, so a node at the
// generation seen has the pods that gave the count. A cycle then counts
// only the nodes that changed since the term was last asked for, instead
// of matching every pod of the cluster (PodTopologySpread's and
// InterPodAffinity's ports ask once or twice a cycle; docs/architecture.md
// RATIONALE). A term with a namespace selector is never kept: namespace
// labels change without any node changing.
type NodeCountCache struct {
	mu    sync.Mutex
	terms map[string]*termCounts // by termKey
	// hits and misses count the node counts taken from the cache and
	// not found in it (for tests).
	hits, misses int

	// order is existing_terms' pairs in order, and orderSorts counts how
	// often it was sorted (for tests).
	order      pairOrder
	orderSorts int
}

// termCounts are one term's counts by the node's position in the
// snapshot's list (which keeps its order from cycle to cycle), each with
// the node's name and generation; generation 0 marks no count.
type termCounts struct {
	names  []string
	gens   []int64
	counts []int64
	// values are the nodes' values of the term's topology key (their
	// names for an empty key), and noValue marks a node without the key:
	// labels belong to the generation too, and a node's label map is a
	// cache miss and a hash per node (half of count_pods' time in
	// SchedulingPreferredPodAffinity).
	values  []string
	noValue []bool
	// order is the nodes with a value, by value: an answer is encoded in
	// this order, each value's counts summed, with no map and no sort
	// (sorting a hostname term's 500 node names was most of count_pods'
	// time in SchedulingPodAntiAffinity). Kept until a node's value
	// changes (orderOK).
	order   []int32
	orderOK bool
	// values is the number of values the last count had.
	nvalues int
}

// maxCountTerms bounds the terms a NodeCountCache keeps (past it, it
// starts over): each holds about 55 bytes per node of the cluster.
const maxCountTerms = 64

// maxKeptTermBytes bounds the terms kept by their encoding (a term is its
// key): a spread constraint's or an affinity term's is a few hundred
// bytes, and a guest may send count_pods terms up to 1 MiB, which 64 kept
// terms would turn into 64 MiB held outside its memory budget.
const maxKeptTermBytes = 4 << 10

// NewNodeCountCache returns an empty cache.
func NewNodeCountCache() *NodeCountCache { return &NodeCountCache{terms: map[string]*termCounts{}} }

// term returns key's counts, sized for n nodes. The caller holds mu.
func (c *NodeCountCache) term(key string, n int) *termCounts {
	tc := c.terms[key]
	if tc == nil {
		if len(c.terms) >= maxCountTerms {
			clear(c.terms)
		}
		tc = &termCounts{}
		c.terms[key] = tc
	}
	tc.size(n)
	return tc
}

// size makes tc hold n nodes, forgetting everything if it held another
// number.
func (tc *termCounts) size(n int) {
	if len(tc.gens) != n {
		tc.names, tc.gens, tc.counts = make([]string, n), make([]int64, n), make([]int64, n)
		tc.values, tc.noValue = make([]string, n), make([]bool, n)
		tc.order, tc.orderOK = nil, false
	}
}

// get reports whether node i of the list is kept as ni was counted (its
// count and value are then current). The caller holds the cache's lock.
func (tc *termCounts) get(c *NodeCountCache, i int, ni fwk.NodeInfo, name string) bool {
	if gen := Generation(ni); gen != 0 && tc.gens[i] == gen && tc.names[i] == name {
		c.hits++
		return true
	}
	c.misses++
	return false
}

// put keeps n and the topology value as node i's, at generation gen
// (0, as for a NodeInfo made outside the scheduler's generation counter,
// is never found by get).
func (tc *termCounts) put(i int, gen int64, name string, n int64, value string, hasValue bool) {
	if tc.noValue[i] != !hasValue || tc.values[i] != value {
		tc.orderOK = false
	}
	tc.names[i], tc.gens[i], tc.counts[i] = name, gen, n
	tc.values[i], tc.noValue[i] = value, !hasValue
}

// sorted is the counts by value over the nodes include admits (nil: all),
// each value's nodes summed: every value of an admitted node is present.
func (tc *termCounts) sorted(nodes []fwk.NodeInfo, include func(*v1.Node) bool) []model.ValueCount {
	if !tc.orderOK {
		tc.order = tc.order[:0]
		for i, no := range tc.noValue {
			if !no {
				tc.order = append(tc.order, int32(i))
			}
		}
		slices.SortFunc(tc.order, func(a, b int32) int { return strings.Compare(tc.values[a], tc.values[b]) })
		tc.orderOK = true
	}
	out := make([]model.ValueCount, 0, tc.nvalues)
	for k := 0; k < len(tc.order); {
		value := tc.values[tc.order[k]]
		var sum int64
		admitted := false
		for ; k < len(tc.order) && tc.values[tc.order[k]] == value; k++ {
			i := tc.order[k]
			if include == nil || include(nodes[i].Node()) {
				sum += tc.counts[i]
				admitted = true
			}
		}
		if admitted {
			out = append(out, model.ValueCount{Value: value, N: sum})
		}
	}
	tc.nvalues = len(out)
	return out
}
