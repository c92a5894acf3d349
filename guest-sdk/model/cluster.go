package model

import (
	"encoding/binary"
	"slices"
	"strconv"
	"strings"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
)

// The cluster as a policy reads it, and the encoders and the native
// computations of the cluster's rows (cluster_node, count_pods,
// existing_terms).

// Kinds for cluster_node.
const (
	ClusterNodeName   int32 = 0
	ClusterNodeLabels int32 = 1 // key, value pairs
	ClusterNodeTaints int32 = 2 // entries of 3 strings: key, value, effect

	// NumClusterNodeKinds sizes tables indexed by cluster_node kind.
	NumClusterNodeKinds = ClusterNodeTaints + 1
)

// Kinds for existing_terms: which terms of the pods already on nodes.
const (
	// ExistingAntiAffinityRequired: required pod anti-affinity terms;
	// each matching term adds 1.
	ExistingAntiAffinityRequired int32 = 0
	// ExistingAffinityRequired: required pod affinity terms; each adds 1.
	ExistingAffinityRequired int32 = 1
	// ExistingAffinityPreferred and ExistingAntiAffinityPreferred:
	// preferred terms; each adds its weight.
	ExistingAffinityPreferred     int32 = 2
	ExistingAntiAffinityPreferred int32 = 3

	// NumExistingTerms sizes tables indexed by existing_terms kind.
	NumExistingTerms = ExistingAntiAffinityPreferred + 1
)

// Cluster is the scheduler's snapshot as a policy reads it (natively and
// in case tables): its nodes (with their Pods, which CountPods counts) and
// the namespaces' labels.
type Cluster struct {
	Nodes      []*Node
	Namespaces map[string]map[string]string
	// Claims, PersistentVolumes and StorageClasses are what volume_claims
	// reads for the pod's claims (VolumeClaims).
	Claims            []PersistentVolumeClaim
	PersistentVolumes []PersistentVolume
	StorageClasses    []StorageClass
	// Devices is what resource_claims answers for the pod: its device
	// requests and the devices of their classes per node (the host
	// computes them from the DRA objects; case tables state them).
	Devices Devices
}

// CountTerm says which pods Cluster.CountPods counts. It is a
// PodAffinityTerm as the Kubernetes API spells it, with the same namespace
// rules, plus IncludeTerminating:
//   - LabelSelector nil matches no pod; an empty selector every pod.
//   - Namespaces empty and NamespaceSelector nil: the pod's own namespace.
//     A NamespaceSelector with no requirements selects every namespace;
//     otherwise the namespaces listed and those the selector matches count,
//     of the namespaces the scheduler knows (as InterPodAffinity resolves
//     the incoming pod's terms): a pod in a namespace the cluster does not
//     hold matches no selector with requirements, not even NotIn.
//   - Terminating pods (deletionTimestamp set) are left out, as
//     PodTopologySpread leaves them out, unless IncludeTerminating is set
//     (InterPodAffinity counts them).
//   - Which nodes count: every node that has TopologyKey, unless the node
//     fields below narrow them as PodTopologySpread's constraints do. An
//     empty TopologyKey counts per node name, over every node: sum the
//     counts for a cluster-wide total (a team's pods anywhere), and add
//     up the nodes you pick for a part of it (its pods on spot nodes).
type CountTerm struct {
	LabelSelector      *LabelSelector
	Namespaces         []string
	NamespaceSelector  *LabelSelector
	TopologyKey        string
	IncludeTerminating bool
	// AlsoMatching are further terms a pod must match too to count (their
	// LabelSelector, Namespaces and NamespaceSelector; leave the other
	// fields unset): InterPodAffinity counts the pods that match all of a
	// pod's required affinity terms.
	AlsoMatching []CountTerm
	// NodeKeys: only nodes that have every one of these labels count (a
	// spread constraint counts only nodes with all of the pod's topology
	// keys).
	NodeKeys []string
	// NodeAffinityPolicy "Honor": only nodes the pod being scheduled may
	// run on by its nodeSelector and required node affinity count; ""
	// or "Ignore": every node. NodeTaintsPolicy "Honor": only nodes whose
	// NoSchedule and NoExecute taints the pod tolerates count. The names
	// and values are a spread constraint's (nodeAffinityPolicy,
	// nodeTaintsPolicy), so a PodTopologySpread port passes its
	// constraint's policies and learns each domain's count in one read
	// instead of walking the cluster's nodes itself.
	NodeAffinityPolicy, NodeTaintsPolicy string
}

// Node inclusion policies of CountTerm (a spread constraint's values).
const (
	NodeInclusionHonor  = "Honor"
	NodeInclusionIgnore = "Ignore"
)

// JSON returns the term as the host's count_pods takes it (docs/abi.md
// §4.6.1): what a guest in another language writes, and what the host's
// log quotes.
func (t CountTerm) JSON() []byte { return t.AppendJSON(nil) }

// AppendJSON appends the term as count_pods takes it (docs/abi.md §4.6.1),
// without encoding/json, which would weigh on TinyGo guests.
func (t *CountTerm) AppendJSON(b []byte) []byte {
	b = append(b, `{"labelSelector":`...)
	b = t.LabelSelector.appendJSON(b)
	b = append(b, `,"namespaces":`...)
	b = appendJSONStrings(b, t.Namespaces)
	b = append(b, `,"namespaceSelector":`...)
	b = t.NamespaceSelector.appendJSON(b)
	b = append(b, `,"topologyKey":`...)
	b = appendJSONString(b, t.TopologyKey)
	if t.IncludeTerminating {
		b = append(b, `,"includeTerminating":true`...)
	}
	if len(t.AlsoMatching) > 0 {
		b = append(b, `,"alsoMatching":[`...)
		for i := range t.AlsoMatching {
			if i > 0 {
				b = append(b, ',')
			}
			b = t.AlsoMatching[i].AppendJSON(b)
		}
		b = append(b, ']')
	}
	if len(t.NodeKeys) > 0 {
		b = append(b, `,"nodeKeys":`...)
		b = appendJSONStrings(b, t.NodeKeys)
	}
	if t.NodeAffinityPolicy != "" {
		b = append(b, `,"nodeAffinityPolicy":`...)
		b = appendJSONString(b, t.NodeAffinityPolicy)
	}
	if t.NodeTaintsPolicy != "" {
		b = append(b, `,"nodeTaintsPolicy":`...)
		b = appendJSONString(b, t.NodeTaintsPolicy)
	}
	return append(b, '}')
}

func (s *LabelSelector) appendJSON(b []byte) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	b = append(b, `{"matchLabels":{`...)
	// Sorted, so that the same selector is the same term to the host's
	// and the SDK's caches.
	for i, k := range sortedKeys(s.MatchLabels) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendJSONString(b, s.MatchLabels[k])
	}
	b = append(b, `},"matchExpressions":[`...)
	for i, r := range s.MatchExpressions {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"key":`...)
		b = appendJSONString(b, r.Key)
		b = append(b, `,"operator":`...)
		b = appendJSONString(b, r.Operator)
		b = append(b, `,"values":`...)
		b = appendJSONStrings(b, r.Values)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

func appendJSONStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

// appendJSONString quotes s for JSON: quote, backslash and control bytes
// escaped; other bytes (UTF-8 included) pass through.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// TopologySum is a sum for one topology pair: the nodes whose label Key
// has Value.
type TopologySum struct {
	Key, Value string
	Sum        int64
}

// ClusterNode is cluster_node's kind for node n: the name as a string, the
// labels and taints as lists; ok is false for an unknown kind.
func ClusterNode(n *Node, kind int32) (b []byte, s string, ok bool) {
	switch kind {
	case ClusterNodeName:
		return nil, n.Name, true
	case ClusterNodeLabels:
		return EncodeMap(n.Labels), "", true
	case ClusterNodeTaints:
		return encodeTaints(n.Taints), "", true
	}
	return nil, "", false
}

// EncodeCounts is count_pods' answer: (value, decimal count) pairs sorted
// by value.
func EncodeCounts(counts map[string]int64) []byte {
	sorted := make([]ValueCount, 0, len(counts))
	for k, n := range counts {
		sorted = append(sorted, ValueCount{k, n})
	}
	// slices.SortFunc on the value, not sort.Slice: a hostname topology
	// sorts every node's name each cycle, and the generic sort takes half
	// the time.
	slices.SortFunc(sorted, func(a, b ValueCount) int { return strings.Compare(a.Value, b.Value) })
	return EncodeSortedCounts(sorted)
}

// ValueCount is one topology value's count in count_pods' answer.
type ValueCount struct {
	Value string
	N     int64
}

// EncodeSortedCounts is EncodeCounts for counts already sorted by value,
// each value once: the host keeps a term's order from cycle to cycle, and
// encodes without a map or a sort.
func EncodeSortedCounts(counts []ValueCount) []byte {
	size := 4
	for _, c := range counts {
		size += 8 + len(c.Value) + 4
	}
	b := abi.AppendListHeader(make([]byte, 0, size), 2*len(counts))
	var num [20]byte
	for _, c := range counts {
		b = appendDecimal(abi.AppendString(b, c.Value), num[:0], c.N)
	}
	return b
}

// appendDecimal appends n as a length-prefixed decimal string, formatted
// in scratch (which must not escape).
func appendDecimal(b, scratch []byte, n int64) []byte {
	d := strconv.AppendInt(scratch, n, 10)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(d)))
	return append(b, d...)
}

// EncodeTopologySums is existing_terms' answer: (key, value, sum) records
// sorted by key and value.
func EncodeTopologySums(sums []TopologySum) []byte {
	s := append([]TopologySum(nil), sums...)
	slices.SortFunc(s, func(a, b TopologySum) int { return CompareTopology(a.Key, a.Value, b.Key, b.Value) })
	return EncodeSortedTopologySums(s)
}

// CompareTopology is the order of existing_terms' answer: by topology
// key, then by value. The host keeps its pairs in this order across
// cycles, so both sides compare with this one function.
func CompareTopology(aKey, aValue, bKey, bValue string) int {
	if c := strings.Compare(aKey, bKey); c != 0 {
		return c
	}
	return strings.Compare(aValue, bValue)
}

// EncodeSortedTopologySums is EncodeTopologySums for sums already sorted
// by key and value (the host keeps their order across cycles).
func EncodeSortedTopologySums(s []TopologySum) []byte {
	size := 4
	for _, t := range s {
		size += 12 + len(t.Key) + len(t.Value) + 4
	}
	b := abi.AppendListHeader(make([]byte, 0, size), 3*len(s))
	var num [20]byte
	for _, t := range s {
		b = appendDecimal(abi.AppendString(abi.AppendString(b, t.Key), t.Value), num[:0], t.Sum)
	}
	return b
}

// CountPods counts what count_pods counts, over c's nodes (PodsOn)
// and with the model's selector matching: per value of t.TopologyKey on
// the nodes that have it (per node name when it is ""), over the nodes the
// term's node fields include, for pod, the pod being scheduled. The host
// counts with upstream's matching; kubemodel's tests hold the two to each
// other.
func CountPods(c *Cluster, pod *Pod, t *CountTerm) map[string]int64 {
	podNS := pod.Namespace
	matches := func(t *CountTerm, p *NodePod) bool {
		in := false
		if len(t.Namespaces) == 0 && t.NamespaceSelector == nil {
			in = p.Namespace == podNS
		} else {
			in = contains(t.Namespaces, p.Namespace) || selectsNamespace(c, t.NamespaceSelector, p.Namespace)
		}
		return in && t.LabelSelector.Matches(p.Labels)
	}
	out := map[string]int64{}
	for _, n := range c.Nodes {
		value := n.Name
		if t.TopologyKey != "" {
			v, ok := n.Labels[t.TopologyKey]
			if !ok {
				continue
			}
			value = v
		}
		if !IncludesNode(t, pod, n.Name, n.Labels, n.Taints) {
			continue
		}
		count := out[value]
		pods, _ := PodsOn(n)
	pods:
		for i := range pods {
			p := &pods[i]
			if (p.Terminating && !t.IncludeTerminating) || !matches(t, p) {
				continue
			}
			for j := range t.AlsoMatching {
				if !matches(&t.AlsoMatching[j], p) {
					continue pods
				}
			}
			count++
		}
		out[value] = count
	}
	return out
}

// IncludesNode reports whether the node fields of t (NodeKeys,
// NodeAffinityPolicy, NodeTaintsPolicy) let a node with this name, labels
// and taints count for pod, as PodTopologySpread includes nodes: the
// pod's nodeSelector and required node affinity (a malformed term matches
// no node), and its tolerations of the node's NoSchedule and NoExecute
// taints.
func IncludesNode(t *CountTerm, pod *Pod, name string, labels map[string]string, taints []Taint) bool {
	for _, k := range t.NodeKeys {
		if _, ok := labels[k]; !ok {
			return false
		}
	}
	if t.NodeAffinityPolicy == NodeInclusionHonor {
		for k, v := range pod.NodeSelector {
			if got, ok := labels[k]; !ok || got != v {
				return false
			}
		}
		if pod.Affinity != nil && len(pod.Affinity.NodeAffinityRequired) > 0 && !MatchNodeSelectorTerms(pod.Affinity.NodeAffinityRequired, name, labels) {
			return false
		}
	}
	if t.NodeTaintsPolicy == NodeInclusionHonor {
		for _, taint := range taints {
			if taint.Effect != "NoSchedule" && taint.Effect != "NoExecute" {
				continue
			}
			tolerated := false
			for _, tol := range pod.Tolerations {
				if tol.Tolerates(taint) {
					tolerated = true
					break
				}
			}
			if !tolerated {
				return false
			}
		}
	}
	return true
}

// ExistingTerms computes existing_terms of kind over c's nodes' pods for
// pod p, with the model's selector matching (docs/abi.md §4.6.2).
func ExistingTerms(c *Cluster, p *Pod, kind int32) []TopologySum {
	nsLabels := c.Namespaces[p.Namespace]
	type pair struct{ key, value string }
	sums := map[pair]int64{}
	for _, n := range c.Nodes {
		pods, _ := PodsOn(n)
		for _, ep := range pods {
			a := ep.Affinity
			if a == nil {
				continue
			}
			var terms []WeightedPodAffinityTerm
			switch kind {
			case ExistingAntiAffinityRequired, ExistingAffinityRequired:
				req := a.PodAntiAffinityRequired
				if kind == ExistingAffinityRequired {
					req = a.PodAffinityRequired
				}
				for _, t := range req {
					terms = append(terms, WeightedPodAffinityTerm{Weight: 1, PodAffinityTerm: t})
				}
			case ExistingAffinityPreferred:
				terms = a.PodAffinityPreferred
			case ExistingAntiAffinityPreferred:
				terms = a.PodAntiAffinityPreferred
			}
			for _, t := range terms {
				v, ok := n.Labels[t.TopologyKey]
				if ok && termMatches(&t.PodAffinityTerm, ep.Namespace, p, nsLabels) {
					sums[pair{t.TopologyKey, v}] += int64(t.Weight)
				}
			}
		}
	}
	out := make([]TopologySum, 0, len(sums))
	for k, s := range sums {
		out = append(out, TopologySum{Key: k.key, Value: k.value, Sum: s})
	}
	return out
}

// termMatches is upstream's AffinityTerm.Matches for a term of a pod in
// namespace ownerNS: no namespaces and no namespace selector mean ownerNS.
func termMatches(t *PodAffinityTerm, ownerNS string, p *Pod, nsLabels map[string]string) bool {
	in := false
	if len(t.Namespaces) == 0 && t.NamespaceSelector == nil {
		in = p.Namespace == ownerNS
	} else {
		in = contains(t.Namespaces, p.Namespace) || t.NamespaceSelector.Matches(nsLabels)
	}
	return in && t.LabelSelector.Matches(p.Labels)
}

// selectsNamespace reports whether a count term's namespace selector
// selects ns: an empty selector every namespace, known or not; one with
// requirements only the namespaces c holds whose labels it matches.
func selectsNamespace(c *Cluster, sel *LabelSelector, ns string) bool {
	if sel == nil {
		return false
	}
	if len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0 {
		return true
	}
	l, known := c.Namespaces[ns]
	return known && sel.Matches(l)
}
