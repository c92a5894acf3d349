package host

import (
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
)

// termRows builds one pod_list term kind (docs/abi.md §4.2.1): rows of
// term index, weight, part, key, operator and values.
type termRows struct {
	b []byte
	n int
}

func (r *termRows) add(term int, weight, part, key, op, values string) {
	r.b = appendStrings(r.b, strconv.Itoa(term), weight, part, key, op, values)
	r.n++
}

// valueList is a requirement's values as a term row carries them: each
// value followed by a comma, so that no values ("") and one empty value
// (",") differ. Label values and node names cannot contain a comma.
func valueList(values []string) string {
	var b strings.Builder
	for _, v := range values {
		b.WriteString(v)
		b.WriteByte(',')
	}
	return b.String()
}

func (r *termRows) bytes() []byte {
	return append(abi.AppendListHeader(nil, 6*r.n), r.b...)
}

func (r *termRows) nodeTerm(i int, weight string, t *v1.NodeSelectorTerm) {
	r.add(i, weight, abi.TermStart, "", "", "")
	for _, e := range t.MatchExpressions {
		r.add(i, "", abi.TermMatchExpressions, e.Key, string(e.Operator), valueList(e.Values))
	}
	for _, e := range t.MatchFields {
		r.add(i, "", abi.TermMatchFields, e.Key, string(e.Operator), valueList(e.Values))
	}
}

func (r *termRows) selector(i int, part string, s *metav1.LabelSelector) {
	if s == nil {
		return
	}
	r.add(i, "", part, "", "", "")
	keys := make([]string, 0, len(s.MatchLabels))
	for k := range s.MatchLabels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		r.add(i, "", part, k, "=", s.MatchLabels[k])
	}
	for _, e := range s.MatchExpressions {
		r.add(i, "", part, e.Key, string(e.Operator), valueList(e.Values))
	}
}

func (r *termRows) podTerm(i int, weight string, t *v1.PodAffinityTerm) {
	r.add(i, weight, abi.TermStart, t.TopologyKey, "", "")
	r.selector(i, abi.TermLabelSelector, t.LabelSelector)
	for _, ns := range t.Namespaces {
		r.add(i, "", abi.TermNamespaces, ns, "", "")
	}
	r.selector(i, abi.TermNamespaceSelector, t.NamespaceSelector)
	for _, k := range t.MatchLabelKeys {
		r.add(i, "", abi.TermMatchLabelKeys, k, "", "")
	}
	for _, k := range t.MismatchLabelKeys {
		r.add(i, "", abi.TermMismatchLabelKeys, k, "", "")
	}
}

// encodeTerms encodes the pod's affinity or spread terms of one kind.
func encodeTerms(pod *v1.Pod, kind int32) []byte {
	var r termRows
	a := pod.Spec.Affinity
	if a == nil {
		a = &v1.Affinity{}
	}
	var na v1.NodeAffinity
	if a.NodeAffinity != nil {
		na = *a.NodeAffinity
	}
	pa, anti := a.PodAffinity, a.PodAntiAffinity
	if pa == nil {
		pa = &v1.PodAffinity{}
	}
	if anti == nil {
		anti = &v1.PodAntiAffinity{}
	}
	switch kind {
	case abi.PodNodeAffinityRequired:
		if na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			for i := range na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
				r.nodeTerm(i, "", &na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[i])
			}
		}
	case abi.PodNodeAffinityPreferred:
		for i, t := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			r.nodeTerm(i, strconv.Itoa(int(t.Weight)), &t.Preference)
		}
	case abi.PodAffinityRequired, abi.PodAntiAffinityRequired:
		ts := pa.RequiredDuringSchedulingIgnoredDuringExecution
		if kind == abi.PodAntiAffinityRequired {
			ts = anti.RequiredDuringSchedulingIgnoredDuringExecution
		}
		for i := range ts {
			r.podTerm(i, "", &ts[i])
		}
	case abi.PodAffinityPreferred, abi.PodAntiAffinityPreferred:
		ts := pa.PreferredDuringSchedulingIgnoredDuringExecution
		if kind == abi.PodAntiAffinityPreferred {
			ts = anti.PreferredDuringSchedulingIgnoredDuringExecution
		}
		for i := range ts {
			r.podTerm(i, strconv.Itoa(int(ts[i].Weight)), &ts[i].PodAffinityTerm)
		}
	case abi.PodTopologySpread:
		for i, c := range pod.Spec.TopologySpreadConstraints {
			r.add(i, "", abi.TermStart, c.TopologyKey, string(c.WhenUnsatisfiable), strconv.Itoa(int(c.MaxSkew)))
			r.selector(i, abi.TermLabelSelector, c.LabelSelector)
			if c.MinDomains != nil {
				r.add(i, "", abi.TermMinDomains, strconv.Itoa(int(*c.MinDomains)), "", "")
			}
			if c.NodeAffinityPolicy != nil {
				r.add(i, "", abi.TermNodeAffinityPolicy, string(*c.NodeAffinityPolicy), "", "")
			}
			if c.NodeTaintsPolicy != nil {
				r.add(i, "", abi.TermNodeTaintsPolicy, string(*c.NodeTaintsPolicy), "", "")
			}
			for _, k := range c.MatchLabelKeys {
				r.add(i, "", abi.TermMatchLabelKeys, k, "", "")
			}
		}
	}
	return r.bytes()
}
