package hostabi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero/api"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/abi/fields"
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

	mu       sync.Mutex
	counts   map[string][]byte // by term bytes
	existing [model.NumExistingTerms][]byte
	// tenantExisting is existing_terms as namespaced policies read it:
	// the terms of the pod's own namespace's pods only (every namespaced
	// policy of a cycle is of the pod's namespace).
	tenantExisting [model.NumExistingTerms][]byte
	claims         []model.VolumeClaim
	volumes        [model.NumVolumeClaimKinds][]byte
}

// volumeClaims answers volume_claims of kind for pod: the pod's claims
// read from the listers once per view, each kind encoded once; ok is
// false for an unknown kind.
func (c *ClusterView) volumeClaims(kind int32, pod *v1.Pod) ([]byte, bool) {
	if kind < 0 || kind >= model.NumVolumeClaimKinds {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if b := c.volumes[kind]; b != nil {
		return b, true
	}
	if c.claims == nil {
		c.claims = kubemodel.VolumeClaims(pod, c.Volumes)
		if c.claims == nil {
			c.claims = []model.VolumeClaim{}
		}
	}
	b, _ := model.EncodeVolumeClaims(c.claims, kind)
	c.volumes[kind] = b
	return b, true
}

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
	if gen := ni.GetGeneration(); gen != 0 && tc.gens[i] == gen && tc.names[i] == name {
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

// keepable reports whether t's counts may be kept across cycles: no
// namespace selector in it or in what it also matches.
func (t *CountTerm) keepable() bool {
	if t.NamespaceSelector != nil {
		return false
	}
	for i := range t.AlsoMatching {
		if t.AlsoMatching[i].NamespaceSelector != nil {
			return false
		}
	}
	return true
}

// CountTerm is what count_pods counts: a PodAffinityTerm as the API spells
// it, with upstream's namespace rules (no namespaces and no selector: the
// pod's own namespace; an empty namespaceSelector: every namespace), plus
// extensions (docs/abi.md §4.6.1). An empty TopologyKey counts per node
// name. Terminating pods are left out, as PodTopologySpread leaves them
// out, unless IncludeTerminating is set (InterPodAffinity counts them).
type CountTerm struct {
	LabelSelector      *metav1.LabelSelector `json:"labelSelector"`
	Namespaces         []string              `json:"namespaces"`
	NamespaceSelector  *metav1.LabelSelector `json:"namespaceSelector"`
	TopologyKey        string                `json:"topologyKey"`
	IncludeTerminating bool                  `json:"includeTerminating"`
	// AlsoMatching are further terms a pod must match too (their
	// labelSelector, namespaces and namespaceSelector; the other fields
	// must be unset), as InterPodAffinity counts the pods that match all
	// of a pod's required affinity terms.
	AlsoMatching []CountTerm `json:"alsoMatching"`
	// NodeKeys, NodeAffinityPolicy and NodeTaintsPolicy narrow the nodes
	// that count as a PodTopologySpread constraint does (hasNodeKeys,
	// podIncludes).
	NodeKeys           []string `json:"nodeKeys"`
	NodeAffinityPolicy string   `json:"nodeAffinityPolicy"`
	NodeTaintsPolicy   string   `json:"nodeTaintsPolicy"`
}

// ParseCountTerm decodes a count_pods term strictly: an unknown field or a
// selector that does not convert is an error naming it.
func ParseCountTerm(b []byte) (*CountTerm, error) {
	var t CountTerm
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&t); err != nil {
		return nil, fmt.Errorf("count_pods term: %w", err)
	}
	if d.More() {
		return nil, fmt.Errorf("count_pods term: data after the JSON object")
	}
	if _, err := metav1.LabelSelectorAsSelector(t.LabelSelector); err != nil {
		return nil, fmt.Errorf("count_pods term: labelSelector: %w", err)
	}
	if _, err := metav1.LabelSelectorAsSelector(t.NamespaceSelector); err != nil {
		return nil, fmt.Errorf("count_pods term: namespaceSelector: %w", err)
	}
	for _, p := range []struct{ field, value string }{{"nodeAffinityPolicy", t.NodeAffinityPolicy}, {"nodeTaintsPolicy", t.NodeTaintsPolicy}} {
		if p.value != "" && p.value != model.NodeInclusionHonor && p.value != model.NodeInclusionIgnore {
			return nil, fmt.Errorf("count_pods term: %s: %q is neither %q nor %q", p.field, p.value, model.NodeInclusionHonor, model.NodeInclusionIgnore)
		}
	}
	for i, a := range t.AlsoMatching {
		if a.TopologyKey != "" || a.IncludeTerminating || len(a.AlsoMatching) > 0 || len(a.NodeKeys) > 0 || a.NodeAffinityPolicy != "" || a.NodeTaintsPolicy != "" {
			return nil, fmt.Errorf("count_pods term: alsoMatching[%d]: only labelSelector, namespaces and namespaceSelector may be set", i)
		}
		if _, err := metav1.LabelSelectorAsSelector(a.LabelSelector); err != nil {
			return nil, fmt.Errorf("count_pods term: alsoMatching[%d].labelSelector: %w", i, err)
		}
		if _, err := metav1.LabelSelectorAsSelector(a.NamespaceSelector); err != nil {
			return nil, fmt.Errorf("count_pods term: alsoMatching[%d].namespaceSelector: %w", i, err)
		}
	}
	return &t, nil
}

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
		tc.put(i, ni.GetGeneration(), node.Name, n, value, hasValue)
	}
	return tc.sorted(c.Nodes, include)
}

// A term includes a node for pod when the node has every one of NodeKeys
// among its labels (hasNodeKeys); with nodeAffinityPolicy Honor, the pod's
// nodeSelector and required node affinity match it (upstream's
// RequiredNodeAffinity; a term that does not parse matches nothing, as
// PodTopologySpread ignores the error); with nodeTaintsPolicy Honor, the
// pod tolerates each of its NoSchedule and NoExecute taints (upstream's
// toleration rules with the TaintTolerationComparisonOperators gate off,
// its default). Those two are podIncludes.
//
// hasNodeKeys reports whether node has every one of NodeKeys: the part of
// a term's test of a node that depends on the term alone, which
// count_pods keeps with a node's count.
func (t *CountTerm) hasNodeKeys(node *v1.Node) bool {
	for _, k := range t.NodeKeys {
		if _, ok := node.Labels[k]; !ok {
			return false
		}
	}
	return true
}

// podIncludes is the part of a term's test of a node that depends on the
// pod: its node affinity and tolerations, when the term honours them (nil
// when every node passes, as for a pod without a nodeSelector or required
// node affinity under an affinity policy alone).
func (t *CountTerm) podIncludes(pod *v1.Pod) func(*v1.Node) bool {
	affinity := t.NodeAffinityPolicy == model.NodeInclusionHonor
	taints := t.NodeTaintsPolicy == model.NodeInclusionHonor
	if affinity && len(pod.Spec.NodeSelector) == 0 && (pod.Spec.Affinity == nil || pod.Spec.Affinity.NodeAffinity == nil ||
		pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil) {
		affinity = false // nothing to match: every node does
	}
	if !affinity && !taints {
		return nil
	}
	required := nodeaffinity.GetRequiredNodeAffinity(pod)
	return func(node *v1.Node) bool {
		if affinity {
			if ok, _ := required.Match(node); !ok {
				return false
			}
		}
		if taints {
			for i := range node.Spec.Taints {
				taint := &node.Spec.Taints[i]
				if taint.Effect != v1.TaintEffectNoSchedule && taint.Effect != v1.TaintEffectNoExecute {
					continue
				}
				if !slices.ContainsFunc(pod.Spec.Tolerations, func(tol v1.Toleration) bool { return tolerates(&tol, taint) }) {
					return false
				}
			}
		}
		return true
	}
}

// tolerates is v1.Toleration.ToleratesTaint with comparison operators
// off (their feature gate's default; the method's signature differs
// between the Kubernetes lines this package builds for).
func tolerates(t *v1.Toleration, taint *v1.Taint) bool {
	if t.Effect != "" && t.Effect != taint.Effect {
		return false
	}
	if t.Key != "" && t.Key != taint.Key {
		return false
	}
	switch t.Operator {
	case "", v1.TolerationOpEqual:
		return t.Value == taint.Value
	case v1.TolerationOpExists:
		return true
	}
	return false
}

// matcher is the term's test of a pod: its namespace (the term's
// namespaces, or podNS when it names none and has no namespace selector,
// or a namespace whose labels the selector matches), then its labels.
//
// A namespace selector is resolved as InterPodAffinity resolves the
// incoming pod's terms (mergeAffinityTermNamespacesIfNotEmpty): a selector
// with requirements stands for the namespaces the scheduler's lister holds
// whose labels it matches, so a pod in a namespace the lister does not
// hold never matches it, not even NotIn or DoesNotExist; an empty
// selector ({}) is every namespace, known or not.
func (t *CountTerm) matcher(podNS string, namespaceLabels func(string) (labels.Set, bool)) func(*v1.Pod) bool {
	sel, _ := metav1.LabelSelectorAsSelector(t.LabelSelector)
	var nsSel labels.Selector = labels.Nothing()
	if t.NamespaceSelector != nil {
		nsSel, _ = metav1.LabelSelectorAsSelector(t.NamespaceSelector)
	}
	everyNamespace := t.NamespaceSelector != nil && nsSel.Empty()
	names := sets.New(t.Namespaces...)
	if len(t.Namespaces) == 0 && t.NamespaceSelector == nil {
		names.Insert(podNS)
	}
	inSelected := func(ns string) bool {
		if everyNamespace {
			return true
		}
		if t.NamespaceSelector == nil {
			return false
		}
		l, known := namespaceLabels(ns)
		return known && nsSel.Matches(l)
	}
	return func(p *v1.Pod) bool {
		if !names.Has(p.Namespace) && !inSelected(p.Namespace) {
			return false
		}
		return sel.Matches(labels.Set(p.Labels))
	}
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

// existingTerms answers existing_terms for pod (docs/abi.md §4.6.2): the
// terms of one kind of the pods on the view's nodes that pod matches,
// summed per (topologyKey, value) of the node each term's pod is on, as
// InterPodAffinity counts them: a term matches when its namespaces hold the
// pod's namespace or its namespace selector matches that namespace's
// labels (none for a namespace the view does not know), and its selector
// matches the pod's labels. Encoded once per view per kind; ok is false
// for an unknown kind.
func (c *ClusterView) existingTerms(kind int32, pod *v1.Pod) ([]byte, bool) {
	if kind < 0 || kind >= model.NumExistingTerms {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if b := c.existing[kind]; b != nil {
		return b, true
	}
	var b []byte
	if c.NodeCounts != nil {
		b = model.EncodeSortedTopologySums(c.NodeCounts.sortSums(c.existingSums(kind, pod, ""), c.Nodes))
	} else {
		b = model.EncodeTopologySums(c.ExistingTerms(kind, pod))
	}
	c.existing[kind] = b
	return b, true
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

// clusterFuncs read the cycle's cluster view (Cluster and Namespaces reads).
var clusterFuncs = map[string]api.GoModuleFunc{
	abi.FnClusterNodes: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		c := in.cluster()
		switch {
		case c == nil:
			s[0] = retNotAvailable
		case !in.Policy.Permits(fields.ScopeCluster, abi.FnClusterNodes, fields.NoNum):
			s[0] = retNotDeclared
		default:
			s[0] = uint64(uint32(len(c.Nodes)))
		}
	},
	abi.FnClusterNode: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		c := in.cluster()
		if c == nil {
			s[0] = retNotAvailable
			return
		}
		if !in.Policy.Permits(fields.ScopeCluster, abi.FnClusterNode, int32(s[1])) {
			s[0] = retNotDeclared
			return
		}
		b, str, ok := c.clusterNode(in.Caches.nodes, int32(s[0]), int32(s[1]))
		switch {
		case !ok:
			s[0] = retBadArgs
		case b != nil:
			s[0] = writeOut(m, s[2], s[3], b)
		default:
			s[0] = writeOutString(m, s[2], s[3], str)
		}
	},
	abi.FnCountPods: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		c := in.cluster()
		if c == nil {
			s[0] = retNotAvailable
			return
		}
		if !in.Policy.Permits(fields.ScopeCluster, abi.FnCountPods, fields.NoNum) {
			s[0] = retNotDeclared
			return
		}
		term, ok := m.Memory().Read(uint32(s[0]), uint32(s[1]))
		if !ok || uint32(s[1]) > MaxCycleStateSize {
			s[0] = retBadArgs
			return
		}
		if in.Tenant != "" {
			term = tenantTerm(term, in.Tenant)
		}
		b, ok := c.countPods(term, in.Pod.Pod)
		if !ok {
			in.Policy.BadTerm(term)
			s[0] = retBadArgs
			return
		}
		s[0] = writeOut(m, s[2], s[3], b)
	},
	abi.FnExistingTerms: tenantKindRead(fields.ScopeCluster, abi.FnExistingTerms, (*ClusterView).existingTerms, (*ClusterView).tenantExistingTerms),
	abi.FnVolumeClaims:  kindRead(fields.ScopeVolumes, abi.FnVolumeClaims, (*ClusterView).volumeClaims),
	abi.FnNamespaceLabels: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		c := in.cluster()
		if c == nil || c.NamespaceLabels == nil {
			s[0] = retNotAvailable
			return
		}
		if !in.Policy.Permits(fields.ScopeNamespaces, abi.FnNamespaceLabels, fields.NoNum) {
			s[0] = retNotDeclared
			return
		}
		name, ok := m.Memory().Read(uint32(s[0]), uint32(s[1]))
		if !ok {
			s[0] = retBadArgs
			return
		}
		if in.Tenant != "" && string(name) != in.Tenant {
			// A team sees its own namespace's labels only: others'
			// (cost centres, projects) are not its to read, and to it
			// they are as a namespace that does not exist.
			in.Policy.Refused(abi.FnNamespaceLabels, "a namespaced policy reads only the labels of its own namespace, "+in.Tenant)
			s[0] = retNotFound
			return
		}
		l, found := c.NamespaceLabels(string(name))
		if !found {
			s[0] = retNotFound
			return
		}
		s[0] = writeOut(m, s[2], s[3], model.EncodeMap(l))
	},
}

// kindRead is a cluster read of one kind for the pod being scheduled
// (existing_terms, volume_claims): `(kind, buf, cap) -> i32`, answered by
// read from the cycle's view once the policy's declaration permits it.
func kindRead(scope fields.Scope, fn string, read func(c *ClusterView, kind int32, pod *v1.Pod) ([]byte, bool)) func(context.Context, api.Module, []uint64) {
	return tenantKindRead(scope, fn, read, nil)
}

// tenantKindRead is kindRead with another read for namespaced policies
// (nil: the same).
func tenantKindRead(scope fields.Scope, fn string, read, tenantRead func(c *ClusterView, kind int32, pod *v1.Pod) ([]byte, bool)) func(context.Context, api.Module, []uint64) {
	return func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		c := in.cluster()
		if c == nil {
			s[0] = retNotAvailable
			return
		}
		kind := int32(s[0])
		if !in.Policy.Permits(scope, fn, kind) {
			s[0] = retNotDeclared
			return
		}
		r := read
		if in.Tenant != "" && tenantRead != nil {
			r = tenantRead
		}
		b, ok := r(c, kind, in.Pod.Pod)
		if !ok {
			s[0] = retBadArgs
			return
		}
		s[0] = writeOut(m, s[1], s[2], b)
	}
}
