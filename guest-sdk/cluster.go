package sdk

import "github.com/wasmsched/wasmsched/guest-sdk/abi"

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

// NodeCount returns how many nodes the snapshot holds.
func (Cluster) NodeCount() int { return clusterNodes() }

// NodeName returns the name of node i.
func (Cluster) NodeName(i int) string { return string(clusterNode(i, abi.ClusterNodeName)) }

// NodeLabels returns the labels of node i (encoded once per node
// generation by the host; decoded on each call).
func (Cluster) NodeLabels(i int) map[string]string {
	return decodeMap(clusterNode(i, abi.ClusterNodeLabels))
}

// NodeTaints returns the taints of node i.
func (Cluster) NodeTaints(i int) []Taint {
	var ts []Taint
	r := abi.NewListReader(clusterNode(i, abi.ClusterNodeTaints))
	for r.Len() >= 3 {
		f := next(&r, 3)
		ts = append(ts, Taint{Key: f[0], Value: f[1], Effect: f[2]})
	}
	return ts
}

// CountPods counts the pods on the snapshot's nodes that match term, per
// value of term.TopologyKey on the nodes that have that label (per node
// name when TopologyKey is ""). Every such value is in the result, with 0
// when no pod matches, so a policy also learns the topology's domains. The
// host counts natively, once per cycle per distinct term, whichever policy
// or node asks; the SDK keeps the answer for the rest of the cycle.
func (Cluster) CountPods(term CountTerm) map[string]int64 { return countPods(&term) }

// Kinds of Cluster.ExistingTerms: which terms of the pods already on
// nodes.
const (
	ExistingAntiAffinityRequired  = abi.ExistingAntiAffinityRequired
	ExistingAffinityRequired      = abi.ExistingAffinityRequired
	ExistingAffinityPreferred     = abi.ExistingAffinityPreferred
	ExistingAntiAffinityPreferred = abi.ExistingAntiAffinityPreferred
)

// TopologySum is a sum for one topology pair: the nodes whose label Key
// has Value.
type TopologySum struct {
	Key, Value string
	Sum        int64
}

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

// CountTerm says which pods Cluster.CountPods counts. It is a
// PodAffinityTerm as the Kubernetes API spells it, with the same namespace
// rules, plus IncludeTerminating:
//   - LabelSelector nil matches no pod; an empty selector every pod.
//   - Namespaces empty and NamespaceSelector nil: the pod's own namespace.
//     A NamespaceSelector with no requirements selects every namespace;
//     otherwise the namespaces listed and those the selector matches count.
//   - Terminating pods (deletionTimestamp set) are left out, as
//     PodTopologySpread leaves them out, unless IncludeTerminating is set
//     (InterPodAffinity counts them).
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
}

// LabelSelector is metav1.LabelSelector: MatchLabels and MatchExpressions
// must all hold.
type LabelSelector struct {
	MatchLabels      map[string]string
	MatchExpressions []LabelSelectorRequirement
}

// LabelSelectorRequirement is one expression of a LabelSelector. Operator
// is "In", "NotIn", "Exists" or "DoesNotExist".
type LabelSelectorRequirement struct {
	Key      string
	Operator string
	Values   []string
}

// Matches reports whether labels satisfy the selector, as
// metav1.LabelSelectorAsSelector(s).Matches does: a nil selector matches
// nothing, an empty one everything, NotIn and DoesNotExist match a label
// that is absent. A selector upstream refuses (In or NotIn without values,
// Exists or DoesNotExist with values, an unknown operator, a key or value
// that is not a valid label key or value) matches nothing.
func (s *LabelSelector) Matches(labels map[string]string) bool {
	if s == nil {
		return false
	}
	ok := true
	for k, v := range s.MatchLabels {
		if !validLabelKey(k) || !validLabelValue(v) {
			return false
		}
		got, has := labels[k]
		ok = ok && has && Equal(got, v)
	}
	for _, r := range s.MatchExpressions {
		ok = ok && r.matches(labels)
	}
	return ok
}

func (r LabelSelectorRequirement) matches(labels map[string]string) bool {
	if !validRequirement(r.Key, r.Values) {
		return false
	}
	v, has := labels[r.Key]
	switch r.Operator {
	case "In":
		return len(r.Values) > 0 && has && contains(r.Values, v)
	case "NotIn":
		return len(r.Values) > 0 && (!has || !contains(r.Values, v))
	case "Exists":
		return len(r.Values) == 0 && has
	case "DoesNotExist":
		return len(r.Values) == 0 && !has
	}
	return false
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if Equal(v, s) {
			return true
		}
	}
	return false
}

// JSON returns the term as the host's count_pods takes it (docs/abi.md
// §4.6.1): what a guest in another language writes, and what the host's
// log quotes.
func (t CountTerm) JSON() []byte { return t.appendJSON(nil) }

// appendJSON encodes the term as count_pods takes it (docs/abi.md §4.6.1),
// without encoding/json, which would weigh on TinyGo guests.
func (t *CountTerm) appendJSON(b []byte) []byte {
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
			b = t.AlsoMatching[i].appendJSON(b)
		}
		b = append(b, ']')
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
