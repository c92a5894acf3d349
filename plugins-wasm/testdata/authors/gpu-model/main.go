// Command gpu-model is a Filter policy: a pod that requests nvidia.com/gpu
// and is labelled gpu-model=M may only land on nodes labelled
// nvidia.com/gpu.product=M. Pods without the label, and pods that request no
// GPU, are unaffected. No config, no reads.
package main

import sdk "github.com/wasmsched/wasmsched/guest-sdk"

const (
	gpuResource = "nvidia.com/gpu"
	podLabel    = "gpu-model"
	nodeLabel   = "nvidia.com/gpu.product"
)

func init() { sdk.RegisterFilter(filter) }

func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
	model, ok := pod.Label(podLabel)
	if !ok || pod.Request(gpuResource) <= 0 {
		return sdk.Success()
	}
	got, has := node.Label(nodeLabel)
	if !has {
		return sdk.UnschedulableAndUnresolvable("node has no " + nodeLabel + " label, pod needs GPU model " + model)
	}
	if !sdk.Equal(got, model) {
		return sdk.UnschedulableAndUnresolvable("node's GPU model " + got + " is not " + model)
	}
	return sdk.Success()
}

func main() {}
