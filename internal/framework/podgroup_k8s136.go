//go:build !k8s_1_34 && !k8s_1_35

package framework

import fwk "k8s.io/kube-scheduler/framework"

// InPodGroupCycle reports whether state is a pod-group cycle's (the
// GenericWorkload gate, v1.36 on): one whose Reserve follows a placement
// into the snapshot that the cycle may undo, and whose Unreserve precedes
// that undoing.
func InPodGroupCycle(state fwk.CycleState) bool {
	return state != nil && state.IsPodGroupSchedulingCycle()
}

// PodGroupState is the state of the pod-group cycle that state belongs
// to, shared by every placement and member the cycle tries; nil outside
// a pod-group cycle.
func PodGroupState(state fwk.CycleState) StateStore {
	if !InPodGroupCycle(state) {
		return nil
	}
	if pg := state.GetPodGroupSchedulingCycle(); pg != nil {
		return pg
	}
	return nil
}
