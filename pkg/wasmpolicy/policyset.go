package wasmpolicy

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

// policySet is the list of policies new scheduling cycles run: the args'
// policies in their order, then the object policies by name. It is never
// changed once published; a change publishes a new set, and a cycle keeps
// the one it started with.
type policySet struct {
	all []*policy
	// scoped is set when some policy has a scope: only then is a pod's
	// list filtered.
	scoped bool
}

func newPolicySet(all []*policy) *policySet {
	s := &policySet{all: all}
	for _, p := range all {
		s.scoped = s.scoped || p.scope != nil
	}
	return s
}

// forPod returns the policies whose scope takes pod. A policy outside the
// pod's scope costs its cycle nothing: it is not in the cycle at all.
func (s *policySet) forPod(pod *v1.Pod, nsLabels func(string) (map[string]string, bool)) []*policy {
	if !s.scoped {
		return s.all
	}
	out := make([]*policy, 0, len(s.all))
	for _, p := range s.all {
		if p.scope.matches(pod, nsLabels) {
			out = append(out, p)
		}
	}
	return out
}

// scope is a policy's config.Scope, compiled; a nil *scope takes every pod.
type scope struct {
	namespace string
	nsSel     labels.Selector
	podSel    labels.Selector
	profiles  sets.Set[string]
}

// compileScope compiles sc; it returns nil when sc takes every pod.
func compileScope(sc config.Scope) (*scope, error) {
	if sc.Namespace == "" && sc.NamespaceSelector == nil && sc.PodSelector == nil && len(sc.Profiles) == 0 {
		return nil, nil
	}
	out := &scope{namespace: sc.Namespace}
	var err error
	if sc.NamespaceSelector != nil {
		if out.nsSel, err = metav1.LabelSelectorAsSelector(sc.NamespaceSelector); err != nil {
			return nil, fmt.Errorf("scope.namespaceSelector: %w", err)
		}
	}
	if sc.PodSelector != nil {
		if out.podSel, err = metav1.LabelSelectorAsSelector(sc.PodSelector); err != nil {
			return nil, fmt.Errorf("scope.podSelector: %w", err)
		}
	}
	if len(sc.Profiles) > 0 {
		out.profiles = sets.New(sc.Profiles...)
	}
	return out, nil
}

// matches reports whether the scope takes pod. nsLabels looks up a
// namespace's labels; a pod whose namespace is unknown (no lister, or not
// yet in its cache) is outside a namespace selector.
func (s *scope) matches(pod *v1.Pod, nsLabels func(string) (map[string]string, bool)) bool {
	if s == nil {
		return true
	}
	if s.namespace != "" && pod.Namespace != s.namespace {
		return false
	}
	if s.profiles != nil && !s.profiles.Has(pod.Spec.SchedulerName) {
		return false
	}
	if s.podSel != nil && !s.podSel.Matches(labels.Set(pod.Labels)) {
		return false
	}
	if s.nsSel != nil {
		if nsLabels == nil {
			return false
		}
		l, ok := nsLabels(pod.Namespace)
		if !ok || !s.nsSel.Matches(labels.Set(l)) {
			return false
		}
	}
	return true
}
