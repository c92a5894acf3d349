//go:build k8s_1_35 || k8s_1_36

package framework

import fwk "k8s.io/kube-scheduler/framework"

// PodSelf is the event resource of a pod's update of itself: Pod on
// v1.35 and v1.36, which have no TargetPod, so the registration also sees
// other pods' updates (its queueing hint skips them).
const PodSelf = fwk.Pod
