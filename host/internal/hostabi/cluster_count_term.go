package hostabi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

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
