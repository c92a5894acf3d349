// Package spread computes the label selector that PodTopologySpread's
// default constraints use for a pod: what the Services selecting the pod
// and its controlling ReplicationController, ReplicaSet or StatefulSet
// select. WasmPolicy hands it to policies (pod_list kind
// PodDefaultSpreadSelector) so that a port of PodTopologySpread can apply
// the cluster's default constraints, which a guest cannot derive itself:
// it sees no Services or controllers.
//
// kube-scheduler's own helper (DefaultSelector in
// pkg/scheduler/framework/plugins/helper) lives in k8s.io/kubernetes, which
// the plugin does not import (docs/architecture.md); this is the same
// computation on the same listers, and test/ports holds it to the helper.
package spread

import (
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// Listers are what the default selector reads, from the scheduler's
// informer factory.
type Listers struct {
	Services               corelisters.ServiceLister
	ReplicationControllers corelisters.ReplicationControllerLister
	ReplicaSets            appslisters.ReplicaSetLister
	StatefulSets           appslisters.StatefulSetLister
}

var (
	rcKind = v1.SchemeGroupVersion.WithKind("ReplicationController")
	rsKind = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")
	ssKind = appsv1.SchemeGroupVersion.WithKind("StatefulSet")
)

// DefaultSelector returns the selector PodTopologySpread's default
// constraints count the pod's peers with: the union of the selectors of the
// pod's namespace's Services that select it (a Service without a selector
// selects nothing), and of its controller when that is a
// ReplicationController, ReplicaSet or StatefulSet the listers know. An
// empty selector means the default constraints do not apply.
func (l Listers) DefaultSelector(pod *v1.Pod) labels.Selector {
	set := labels.Set{}
	if services, err := l.Services.Services(pod.Namespace).List(labels.Everything()); err == nil {
		for _, s := range services {
			if s.Spec.Selector != nil && labels.Set(s.Spec.Selector).AsSelectorPreValidated().Matches(labels.Set(pod.Labels)) {
				set = labels.Merge(set, s.Spec.Selector)
			}
		}
	}
	selector := set.AsSelector()
	owner := metav1.GetControllerOfNoCopy(pod)
	if owner == nil {
		return selector
	}
	gv, err := schema.ParseGroupVersion(owner.APIVersion)
	if err != nil {
		return selector
	}
	var other *metav1.LabelSelector
	switch gv.WithKind(owner.Kind) {
	case rcKind:
		if rc, err := l.ReplicationControllers.ReplicationControllers(pod.Namespace).Get(owner.Name); err == nil {
			return labels.Merge(set, rc.Spec.Selector).AsSelector()
		}
		return selector
	case rsKind:
		if rs, err := l.ReplicaSets.ReplicaSets(pod.Namespace).Get(owner.Name); err == nil {
			other = rs.Spec.Selector
		}
	case ssKind:
		if ss, err := l.StatefulSets.StatefulSets(pod.Namespace).Get(owner.Name); err == nil {
			other = ss.Spec.Selector
		}
	}
	if other != nil {
		if s, err := metav1.LabelSelectorAsSelector(other); err == nil {
			if reqs, ok := s.Requirements(); ok {
				selector = selector.Add(reqs...)
			}
		}
	}
	return selector
}

// Requirements turns a selector from DefaultSelector into label selector
// requirements with the operators of the Kubernetes API (In, NotIn,
// Exists, DoesNotExist; an equality becomes In with one value), in the
// selector's order. A selector with no requirements gives none.
func Requirements(s labels.Selector) []metav1.LabelSelectorRequirement {
	reqs, _ := s.Requirements()
	out := make([]metav1.LabelSelectorRequirement, 0, len(reqs))
	for _, r := range reqs {
		e := metav1.LabelSelectorRequirement{Key: r.Key(), Values: r.ValuesUnsorted()}
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			e.Operator = metav1.LabelSelectorOpIn
		case selection.NotEquals, selection.NotIn:
			e.Operator = metav1.LabelSelectorOpNotIn
		case selection.Exists:
			e.Operator = metav1.LabelSelectorOpExists
		case selection.DoesNotExist:
			e.Operator = metav1.LabelSelectorOpDoesNotExist
		default:
			continue // Gt and Lt: no label selector built from the API has them
		}
		out = append(out, e)
	}
	return out
}
