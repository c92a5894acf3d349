// Command gpu-fit is a wasmsched Filter and Score policy for an extended
// resource such as GPUs:
//   - a pod that requests the resource fits only nodes with enough free units;
//   - a pod that does not request it stays off nodes that offer it, so
//     expensive GPU nodes stay available for GPU work;
//   - among feasible GPU nodes it scores the node with the fewest free units
//     highest, so partially used GPU nodes fill up before fresh ones.
//
// Config: "resource=<name>" (default nvidia.com/gpu).
package main

import sdk "github.com/wasmsched/wasmsched/guest-sdk"

var resource string

func init() {
	sdk.RegisterFilter(filter)
	sdk.RegisterScore(score)
}

func name() string {
	if resource == "" {
		resource = sdk.ParseConfig(sdk.Config())["resource"]
		if resource == "" {
			resource = "nvidia.com/gpu"
		}
	}
	return resource
}

func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
	r := name()
	want := pod.Request(r)
	alloc := node.Allocatable(r)
	if want == 0 {
		if alloc > 0 {
			return sdk.Unschedulable("node is reserved for " + r + " workloads")
		}
		return sdk.Success()
	}
	if alloc <= 0 {
		return sdk.UnschedulableAndUnresolvable("node has no " + r)
	}
	if free := alloc - node.Requested(r); free < want {
		return sdk.Unschedulable("insufficient free " + r)
	}
	return sdk.Success()
}

func score(pod sdk.Pod, node sdk.Node) (int64, sdk.Status) {
	r := name()
	alloc := node.Allocatable(r)
	if pod.Request(r) == 0 || alloc <= 0 {
		return 0, sdk.Success()
	}
	free := alloc - node.Requested(r) - pod.Request(r)
	if free < 0 {
		free = 0
	}
	return 100 - free*100/alloc, sdk.Success()
}

func main() {}
