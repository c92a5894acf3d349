//go:build !k8s_1_34 && !k8s_1_35 && !k8s_1_36

package framework

import fwk "k8s.io/kube-scheduler/framework"

// PodSelf is the event resource of an unscheduled pod's update of
// itself: TargetPod since v1.37, so a registration sees the pod's own
// updates and not those of every pod in the cluster.
const PodSelf = fwk.TargetPod
