// Command bin-packing is a wasmsched Score policy that packs pods onto the
// fullest nodes (MostAllocated), so whole nodes stay free for large pods and
// the cluster autoscaler can remove empty ones.
//
// Config: resource weights, default "cpu=1,memory=1". Any resource name may
// be listed, for example "cpu=1,memory=1,nvidia.com/gpu=3".
//
// Score = sum over resources of weight × (requested + pod request) × 100 /
// allocatable, divided by the sum of weights; a resource the node does not
// offer is left out. This is NodeResourcesFit's MostAllocated strategy, except
// that it counts the pod's actual requests (not the non-zero defaults for pods
// that request nothing).
package main

import sdk "github.com/wasmsched/wasmsched/guest-sdk"

var resources []sdk.ResourceWeight

func init() {
	sdk.RegisterScore(score)
}

// weights reads the config once per instance. Its work is in readWeights,
// so that what runs per node is a check a Go build inlines (every call of
// a GOOS=wasip1 build costs a frame in linear memory).
func weights() []sdk.ResourceWeight {
	if resources == nil {
		readWeights()
	}
	return resources
}

func readWeights() { resources = sdk.ResourceWeights(sdk.Config()) }

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
		used := min(max(node.Requested(r.Name)+pod.Request(r.Name), 0), alloc)
		sum += div(r.Weight*used*100, alloc)
		total += r.Weight
	}
	if total <= 0 {
		return 0, sdk.Success()
	}
	return div(sum, total), sdk.Success()
}

// div divides two quantities that are never negative here. As uint64 it is
// one wasm instruction; Go's int64 division calls runtime.wasmDiv in
// GOOS=wasip1 builds (it must catch MinInt64 / -1), a call per division
// that was a tenth of this Score per node (docs/performance.md).
func div(a, b int64) int64 {
	return int64(uint64(a) / uint64(b))
}

func main() {}
