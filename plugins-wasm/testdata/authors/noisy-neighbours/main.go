// Command noisy-neighbours keeps pods annotated noisy=true apart: such a pod
// cannot go to a node that already runs another noisy pod (Filter).
//
// The SDK cannot see the annotations of the pods already on a node
// (Node.Pods carries their labels and owner references only), so the policy
// marks noisy pods with a label as it places them: its PreBind copies the
// annotation noisy=true to the label noisy.example.com/noisy=true, and its
// Filter counts pods on the node labelled so (or labelled noisy=true by
// hand, for pods this scheduler did not place).
//
// reads: [NodePods]; patchPrefixes: [noisy.example.com/].
package main

import sdk "github.com/wasmsched/wasmsched/guest-sdk"

const (
	annotation = "noisy"
	markLabel  = "noisy.example.com/noisy"
	handLabel  = "noisy"
)

func init() {
	sdk.RegisterFilter(filter)
	sdk.RegisterPreBind(preBind)
}

func isNoisy(pod sdk.Pod) bool {
	v, _ := pod.Annotation(annotation)
	return v == "true"
}

func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
	if !isNoisy(pod) {
		return sdk.Success()
	}
	for _, p := range node.Pods() {
		if p.Terminating {
			continue
		}
		if p.Labels[markLabel] == "true" || p.Labels[handLabel] == "true" {
			return sdk.Unschedulable("node already runs noisy pod " + p.Namespace + "/" + p.Name)
		}
	}
	return sdk.Success()
}

func preBind(pod sdk.Pod, _ sdk.Node) sdk.Status {
	if !isNoisy(pod) {
		return sdk.Success()
	}
	if err := sdk.SetPodLabel(markLabel, "true"); err != nil {
		return sdk.Error("cannot mark the pod noisy: " + err.Error())
	}
	return sdk.Success()
}

func main() {}
