//go:build !k8s_1_34

package intree

import (
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// GetAffinityTerms parses a pod's affinity terms as InterPodAffinity does
// (k8s.io/kube-scheduler/framework from v1.35 on).
func GetAffinityTerms(pod *v1.Pod, terms []v1.PodAffinityTerm) ([]fwk.AffinityTerm, error) {
	return fwk.GetAffinityTerms(pod, terms)
}
