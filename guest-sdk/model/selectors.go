package model

import (
	"unsafe"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
)

// Selectors and terms, with upstream's matching rules.

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
		ok = ok && has && equal(got, v)
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
		if equal(v, s) {
			return true
		}
	}
	return false
}

// NodeSelectorRequirement is one requirement of a NodeSelectorTerm.
// Operator is In, NotIn, Exists, DoesNotExist, Gt or Lt.
type NodeSelectorRequirement struct {
	Key      string
	Operator string
	Values   []string
}

// NodeSelectorTerm is v1.NodeSelectorTerm: every requirement must hold.
// MatchFields may only name metadata.name.
type NodeSelectorTerm struct {
	MatchExpressions []NodeSelectorRequirement
	MatchFields      []NodeSelectorRequirement
}

// NodeLabelReader is what a node selector reads of a node: its name (only
// for matchFields) and its labels one key at a time, so that a policy can
// match terms against its node without decoding every label (sdk.Node is
// one: each label a column of the node table).
type NodeLabelReader interface {
	Name() string
	Label(key string) (string, bool)
}

// labelMap is a NodeLabelReader over a name and a label map.
type labelMap struct {
	name   string
	labels map[string]string
}

func (m labelMap) Name() string { return m.name }

func (m labelMap) Label(key string) (string, bool) {
	v, ok := m.labels[key]
	return v, ok
}

// Matches reports whether a node with this name and these labels satisfies
// the term, as the scheduler's NodeAffinity evaluates a required term
// (k8s.io/component-helpers nodeaffinity.LazyErrorNodeSelector): every
// requirement holds. A term without requirements matches nothing, and so
// does a term upstream cannot parse (In or NotIn without values, Exists or
// DoesNotExist with values, Gt or Lt without exactly one integer, a
// matchFields requirement other than In or NotIn with one value, an
// unknown operator, a key or value that is not a valid label key or value:
// so Gt and Lt cannot take a negative number). Gt and Lt compare the
// label's value as a decimal int64 and fail when it is not one.
func (t NodeSelectorTerm) Matches(nodeName string, labels map[string]string) bool {
	return TermMatches(t, labelMap{nodeName, labels})
}

// TermMatches is NodeSelectorTerm.Matches on a node read through n: the
// labels its requirements name, and the name only for matchFields. Generic
// rather than over the interface, so that a value of a concrete type is
// never boxed per call.
func TermMatches[N NodeLabelReader](t NodeSelectorTerm, n N) bool {
	if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
		return false
	}
	ok := true
	for _, r := range t.MatchExpressions {
		v, has := n.Label(r.Key)
		m, valid := r.matchesLabel(v, has)
		if !valid {
			return false
		}
		ok = ok && m
	}
	for _, r := range t.MatchFields {
		if (r.Operator != "In" && r.Operator != "NotIn") || len(r.Values) != 1 {
			return false
		}
		v := ""
		if r.Key == "metadata.name" {
			v = n.Name()
		}
		ok = ok && (v == r.Values[0]) == (r.Operator == "In")
	}
	return ok
}

// MatchNodeSelectorTerms reports whether any of the terms matches (terms
// are ORed), as requiredDuringSchedulingIgnoredDuringExecution evaluates
// them. No terms match nothing.
func MatchNodeSelectorTerms(terms []NodeSelectorTerm, nodeName string, labels map[string]string) bool {
	return MatchNodeSelectorTermsOn(terms, labelMap{nodeName, labels})
}

// MatchNodeSelectorTermsOn is MatchNodeSelectorTerms on a node read
// through n (see TermMatches).
func MatchNodeSelectorTermsOn[N NodeLabelReader](terms []NodeSelectorTerm, n N) bool {
	for _, t := range terms {
		if TermMatches(t, n) {
			return true
		}
	}
	return false
}

// matchesLabel evaluates one requirement on the label's value (has: the
// node has the label); valid is false when upstream would refuse it.
func (r NodeSelectorRequirement) matchesLabel(v string, has bool) (match, valid bool) {
	if !validRequirement(r.Key, r.Values) {
		return false, false
	}
	switch r.Operator {
	case "In":
		return has && contains(r.Values, v), len(r.Values) > 0
	case "NotIn":
		return !has || !contains(r.Values, v), len(r.Values) > 0
	case "Exists":
		return has, len(r.Values) == 0
	case "DoesNotExist":
		return !has, len(r.Values) == 0
	case "Gt", "Lt":
		if len(r.Values) != 1 {
			return false, false
		}
		want, ok := parseInt64(r.Values[0])
		if !ok {
			return false, false
		}
		got, ok := parseInt64(v)
		if !has || !ok {
			return false, true
		}
		if r.Operator == "Gt" {
			return got > want, true
		}
		return got < want, true
	}
	return false, false
}

// PreferredSchedulingTerm is a weighted node selector term of
// preferredDuringSchedulingIgnoredDuringExecution.
type PreferredSchedulingTerm struct {
	Weight     int32
	Preference NodeSelectorTerm
}

// PodAffinityTerm is v1.PodAffinityTerm. Its LabelSelector,
// NamespaceSelector and TopologyKey can go straight into a CountTerm
// (CountTerm of a term), which counts with upstream's namespace rules.
type PodAffinityTerm struct {
	LabelSelector     *LabelSelector
	Namespaces        []string
	NamespaceSelector *LabelSelector
	TopologyKey       string
	MatchLabelKeys    []string
	MismatchLabelKeys []string
}

// WeightedPodAffinityTerm is a preferred pod (anti-)affinity term.
type WeightedPodAffinityTerm struct {
	Weight int32
	PodAffinityTerm
}

// TopologySpreadConstraint is v1.TopologySpreadConstraint. MinDomains is 0
// when unset; NodeAffinityPolicy and NodeTaintsPolicy are "" when unset
// (the scheduler then uses Honor and Ignore).
type TopologySpreadConstraint struct {
	MaxSkew            int32
	TopologyKey        string
	WhenUnsatisfiable  string
	LabelSelector      *LabelSelector
	MinDomains         int32
	NodeAffinityPolicy string
	NodeTaintsPolicy   string
	MatchLabelKeys     []string
}

// Affinity is spec.affinity as PodData gives it natively (and case tables
// spell it).
type Affinity struct {
	NodeAffinityRequired     []NodeSelectorTerm
	NodeAffinityPreferred    []PreferredSchedulingTerm
	PodAffinityRequired      []PodAffinityTerm
	PodAffinityPreferred     []WeightedPodAffinityTerm
	PodAntiAffinityRequired  []PodAffinityTerm
	PodAntiAffinityPreferred []WeightedPodAffinityTerm
}

// parseInt64 parses a decimal int64 as strconv.ParseInt(s, 10, 64) does:
// an optional sign, then digits, no overflow.
func parseInt64(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	neg := false
	if s[0] == '+' || s[0] == '-' {
		neg = s[0] == '-'
		s = s[1:]
		if s == "" {
			return 0, false
		}
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > (1<<63)/10 {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
		if n > 1<<63 {
			return 0, false
		}
	}
	if neg {
		return -int64(n), true // -(1<<63) wraps to itself, which is right
	}
	if n > 1<<63-1 {
		return 0, false
	}
	return int64(n), true
}

// validLabelValue is apimachinery's IsValidLabelValue and validLabelKey
// its IsQualifiedName, as the ABI package checks them (the host's patch
// checks use the same functions).
func validLabelValue(v string) bool { return abi.CheckLabelValue(v) }

func validLabelKey(k string) bool { return abi.QualifiedName(k) }

// validRequirement is what labels.NewRequirement checks besides the
// operator: the key, and every value as a label value.
func validRequirement(key string, values []string) bool {
	if !validLabelKey(key) {
		return false
	}
	for _, v := range values {
		if !validLabelValue(v) {
			return false
		}
	}
	return true
}

// equal is sdk.Equal for the model's own matching (LabelSelector.Matches
// runs in guests' loops): one string compare that reads eight bytes at a
// time. It is a copy, not a call: with sdk.Equal a wrapper around it, the
// Go-built team-isolation Filter went from 158 to 186 ns per node
// (docs/abi.md RATIONALE); TestEqual here and in sdk check both.
func equal(a, b string) bool {
	n := len(a)
	if n != len(b) {
		return false
	}
	if n == 0 {
		return true
	}
	pa, pb := unsafe.Pointer(unsafe.StringData(a)), unsafe.Pointer(unsafe.StringData(b))
	if pa == pb {
		return true
	}
	i := 0
	// Up to 16 bytes (most label values) without a loop.
	if n >= 8 {
		if *(*uint64)(pa) != *(*uint64)(pb) {
			return false
		}
		i = 8
		if n >= 16 {
			if *(*uint64)(unsafe.Add(pa, 8)) != *(*uint64)(unsafe.Add(pb, 8)) {
				return false
			}
			for i = 16; i+8 <= n; i += 8 {
				if *(*uint64)(unsafe.Add(pa, i)) != *(*uint64)(unsafe.Add(pb, i)) {
					return false
				}
			}
		}
	}
	// The tail, without a loop.
	if n-i >= 4 {
		if *(*uint32)(unsafe.Add(pa, i)) != *(*uint32)(unsafe.Add(pb, i)) {
			return false
		}
		i += 4
	}
	if n-i >= 2 {
		if *(*uint16)(unsafe.Add(pa, i)) != *(*uint16)(unsafe.Add(pb, i)) {
			return false
		}
		i += 2
	}
	if n-i == 1 {
		return *(*byte)(unsafe.Add(pa, i)) == *(*byte)(unsafe.Add(pb, i))
	}
	return true
}
