//go:build k8s_1_34 || k8s_1_35

package framework

import fwk "k8s.io/kube-scheduler/framework"

// InPodGroupCycle is false on this line: it has no pod-group cycle (v1.35
// has the GenericWorkload gate, but gangs there are only a plugin's
// Permit, and every cycle is one pod's).
func InPodGroupCycle(fwk.CycleState) bool { return false }

// PodGroupState is nil on this line: no cycle is a pod group's.
func PodGroupState(fwk.CycleState) StateStore { return nil }
