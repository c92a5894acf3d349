//go:build k8s_1_34

package intree

import (
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	k8sframework "k8s.io/kubernetes/pkg/scheduler/framework"
)

// GetAffinityTerms parses a pod's affinity terms as InterPodAffinity does
// (k8s.io/kubernetes/pkg/scheduler/framework on v1.34).
func GetAffinityTerms(pod *v1.Pod, terms []v1.PodAffinityTerm) ([]fwk.AffinityTerm, error) {
	return k8sframework.GetAffinityTerms(pod, terms)
}
