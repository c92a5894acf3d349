//go:build k8s_1_34

package hostabi

import (
	v1 "k8s.io/api/core/v1"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/helper"
)

// untoleratedTaint is upstream's check of PodTopologySpread's
// nodeTaintsPolicy Honor (v1.34 has no comparison operators).
func untoleratedTaint(taints []v1.Taint, tolerations []v1.Toleration) bool {
	_, untolerated := v1helper.FindMatchingUntoleratedTaint(taints, tolerations, helper.DoNotScheduleTaintsFilterFunc())
	return untolerated
}
