// Command nodeunschedulable is kube-scheduler's NodeUnschedulable Filter as
// a wasmsched policy: a cordoned node (spec.unschedulable) refuses every pod
// that does not tolerate the node.kubernetes.io/unschedulable:NoSchedule
// taint, as UnschedulableAndUnresolvable (preemption cannot help).
package main

import sdk "github.com/wasmsched/wasmsched/guest-sdk"

var unschedulable = sdk.Taint{Key: "node.kubernetes.io/unschedulable", Effect: "NoSchedule"}

func init() { sdk.RegisterFilter(filter) }

func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
	if !node.Unschedulable() {
		return sdk.Success()
	}
	for _, t := range pod.Tolerations() {
		if t.Tolerates(unschedulable) {
			return sdk.Success()
		}
	}
	return sdk.UnschedulableAndUnresolvable("node(s) were unschedulable")
}

func main() {}
