package sdk

import (
	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

// NodeAffinityRequired returns the node selector terms of
// spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
// (ORed), nil when the pod has none.
func (Pod) NodeAffinityRequired() []NodeSelectorTerm {
	var out []NodeSelectorTerm
	eachTermRow(podList(model.PodNodeAffinityRequired), func(i int, weight string, row []string) {
		out = growTo(out, i)
		addNodeTermRow(&out[i], row)
	})
	return out
}

// NodeAffinityPreferred returns spec.affinity.nodeAffinity's preferred
// terms.
func (Pod) NodeAffinityPreferred() []PreferredSchedulingTerm {
	var out []PreferredSchedulingTerm
	eachTermRow(podList(model.PodNodeAffinityPreferred), func(i int, weight string, row []string) {
		out = growTo(out, i)
		if row[0] == abi.TermStart {
			out[i].Weight = int32(parseInt([]byte(weight)))
			return
		}
		addNodeTermRow(&out[i].Preference, row)
	})
	return out
}

// PodAffinityRequired returns spec.affinity.podAffinity's required terms.
func (Pod) PodAffinityRequired() []PodAffinityTerm { return podTerms(model.PodAffinityRequired) }

// PodAffinityPreferred returns spec.affinity.podAffinity's preferred terms.
func (Pod) PodAffinityPreferred() []WeightedPodAffinityTerm {
	return weightedPodTerms(model.PodAffinityPreferred)
}

// PodAntiAffinityRequired returns spec.affinity.podAntiAffinity's required terms.
func (Pod) PodAntiAffinityRequired() []PodAffinityTerm {
	return podTerms(model.PodAntiAffinityRequired)
}

// PodAntiAffinityPreferred returns spec.affinity.podAntiAffinity's
// preferred terms.
func (Pod) PodAntiAffinityPreferred() []WeightedPodAffinityTerm {
	return weightedPodTerms(model.PodAntiAffinityPreferred)
}

// TopologySpreadConstraints returns spec.topologySpreadConstraints (not the
// scheduler's default constraints, which apply when the pod has none).
func (Pod) TopologySpreadConstraints() []TopologySpreadConstraint {
	var out []TopologySpreadConstraint
	eachTermRow(podList(model.PodTopologySpread), func(i int, weight string, row []string) {
		out = growTo(out, i)
		c := &out[i]
		switch row[0] {
		case abi.TermStart:
			c.TopologyKey, c.WhenUnsatisfiable, c.MaxSkew = row[1], row[2], int32(parseInt([]byte(row[3])))
		case abi.TermMinDomains:
			c.MinDomains = int32(parseInt([]byte(row[1])))
		case abi.TermNodeAffinityPolicy:
			c.NodeAffinityPolicy = row[1]
		case abi.TermNodeTaintsPolicy:
			c.NodeTaintsPolicy = row[1]
		case abi.TermMatchLabelKeys:
			c.MatchLabelKeys = append(c.MatchLabelKeys, row[1])
		case abi.TermLabelSelector:
			c.LabelSelector = addSelectorRow(c.LabelSelector, row)
		}
	})
	return out
}

// DefaultSpreadSelector returns the label selector PodTopologySpread's
// default constraints count the pod's peers with: what the Services that
// select the pod and its controlling ReplicationController, ReplicaSet or
// StatefulSet select. nil when nothing selects the pod, and then the
// default constraints do not apply. Needs `reads: [Cluster]`; natively it
// is PodData.DefaultSpreadSelector.
func (Pod) DefaultSpreadSelector() *LabelSelector {
	ts := podTerms(model.PodDefaultSpreadSelector)
	if len(ts) == 0 {
		return nil
	}
	return ts[0].LabelSelector
}

func podTerms(kind int32) []PodAffinityTerm {
	var out []PodAffinityTerm
	eachTermRow(podList(kind), func(i int, weight string, row []string) {
		out = growTo(out, i)
		addPodTermRow(&out[i], row)
	})
	return out
}

func weightedPodTerms(kind int32) []WeightedPodAffinityTerm {
	var out []WeightedPodAffinityTerm
	eachTermRow(podList(kind), func(i int, weight string, row []string) {
		out = growTo(out, i)
		if row[0] == abi.TermStart {
			out[i].Weight = int32(parseInt([]byte(weight)))
		}
		addPodTermRow(&out[i].PodAffinityTerm, row)
	})
	return out
}

func addNodeTermRow(t *NodeSelectorTerm, row []string) {
	r := NodeSelectorRequirement{Key: row[1], Operator: row[2], Values: splitValues(row[3])}
	switch row[0] {
	case abi.TermMatchExpressions:
		t.MatchExpressions = append(t.MatchExpressions, r)
	case abi.TermMatchFields:
		t.MatchFields = append(t.MatchFields, r)
	}
}

func addPodTermRow(t *PodAffinityTerm, row []string) {
	switch row[0] {
	case abi.TermStart:
		t.TopologyKey = row[1]
	case abi.TermLabelSelector:
		t.LabelSelector = addSelectorRow(t.LabelSelector, row)
	case abi.TermNamespaceSelector:
		t.NamespaceSelector = addSelectorRow(t.NamespaceSelector, row)
	case abi.TermNamespaces:
		t.Namespaces = append(t.Namespaces, row[1])
	case abi.TermMatchLabelKeys:
		t.MatchLabelKeys = append(t.MatchLabelKeys, row[1])
	case abi.TermMismatchLabelKeys:
		t.MismatchLabelKeys = append(t.MismatchLabelKeys, row[1])
	}
}

// addSelectorRow applies one selector row (part, key, operator, values).
func addSelectorRow(s *LabelSelector, row []string) *LabelSelector {
	if s == nil {
		s = &LabelSelector{}
	}
	switch {
	case row[1] == "" && row[2] == "": // the selector is present
	case row[2] == "=":
		if s.MatchLabels == nil {
			s.MatchLabels = map[string]string{}
		}
		s.MatchLabels[row[1]] = row[3]
	default:
		s.MatchExpressions = append(s.MatchExpressions, LabelSelectorRequirement{Key: row[1], Operator: row[2], Values: splitValues(row[3])})
	}
	return s
}

// eachTermRow walks a term list: 6 strings per row (term, weight, part,
// key, operator, values); f gets the term index, the weight and the row
// from part on.
func eachTermRow(b []byte, f func(i int, weight string, row []string)) {
	r := abi.NewListReader(b)
	for r.Len() >= 6 {
		fs := next(&r, 6)
		i := int(parseInt([]byte(fs[0])))
		if i < 0 || i > 1<<16 {
			return
		}
		f(i, fs[1], fs[2:])
	}
}

// growTo makes s long enough to hold index i.
func growTo[T any](s []T, i int) []T {
	for len(s) <= i {
		var zero T
		s = append(s, zero)
	}
	return s
}

// splitValues splits a requirement's values as term rows carry them: each
// value followed by a comma ("" is no values, "," one empty value), a comma
// or backslash inside a value escaped with a backslash (docs/abi.md
// §4.2.1). Values without either, all valid label values, are substrings
// of s, not copies.
func splitValues(s string) []string {
	var out []string
	start, escaped := 0, false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			escaped = true
			i++ // the escaped byte
		case ',':
			v := s[start:i]
			if escaped {
				v = unescapeValue(v)
			}
			out = append(out, v)
			start, escaped = i+1, false
		}
	}
	return out
}

// unescapeValue drops the backslash before each escaped byte.
func unescapeValue(v string) string {
	b := make([]byte, 0, len(v))
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) {
			i++
		}
		b = append(b, v[i])
	}
	return string(b)
}

// itoaInt formats a non-negative int without strconv.
func itoaInt(n int) string {
	if n <= 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
