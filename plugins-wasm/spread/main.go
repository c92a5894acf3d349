// Command spread is a wasmsched Score policy that spreads pods onto the
// emptiest nodes (LeastAllocated): the opposite of bin-packing, for
// workloads where headroom and blast radius matter more than node count.
//
// Config: resource weights, default "cpu=1,memory=1", as in bin-packing, so
// the two modules can replace each other under one policy name.
//
// Score = sum over resources of weight × (allocatable - requested - pod
// request) × 100 / allocatable, divided by the sum of weights (0 when full).
package main

import sdk "github.com/wasmsched/wasmsched/guest-sdk"

var resources []sdk.ResourceWeight

func init() {
	sdk.RegisterScore(score)
}

// weights reads the config once per instance.
func weights() []sdk.ResourceWeight {
	if resources == nil {
		resources = sdk.ResourceWeights(sdk.Config())
	}
	return resources
}

// noWeights is the error of a config without one valid weight: every
// node's score fails, so the policy's failurePolicy applies and the reason
// reaches the pod's events, instead of every node silently scoring 0.
const noWeights = "config has no valid resource weight: give name=weight pairs with integer weights from 1 to 100, for example cpu=1,memory=1"

func score(pod sdk.Pod, node sdk.Node) (int64, sdk.Status) {
	ws := weights()
	if len(ws) == 0 {
		return 0, sdk.Error(noWeights)
	}
	var sum, total int64
	for _, r := range ws {
		alloc := node.Allocatable(r.Name)
		if alloc <= 0 {
			continue
		}
		free := alloc - node.Requested(r.Name) - pod.Request(r.Name)
		if free < 0 {
			free = 0
		}
		sum += r.Weight * free * 100 / alloc
		total += r.Weight
	}
	if total == 0 {
		return 0, sdk.Success()
	}
	return sum / total, sdk.Success()
}

func main() {}
