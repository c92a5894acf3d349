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

import (
	"sort"
	"strconv"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

type weighted struct {
	name   string
	weight int64
}

var resources []weighted

func init() {
	sdk.RegisterScore(score)
}

func weights() []weighted {
	if resources != nil {
		return resources
	}
	cfg := sdk.ParseConfig(sdk.Config())
	if len(cfg) == 0 {
		cfg = map[string]string{"cpu": "1", "memory": "1"}
	}
	for name, w := range cfg {
		n, err := strconv.ParseInt(w, 10, 64)
		if err != nil || n <= 0 {
			sdk.Log("ignoring resource with an invalid weight", "resource", name, "weight", w)
			continue
		}
		resources = append(resources, weighted{name, n})
	}
	sort.Slice(resources, func(i, j int) bool { return resources[i].name < resources[j].name })
	return resources
}

func score(pod sdk.Pod, node sdk.Node) (int64, sdk.Status) {
	var sum, total int64
	for _, r := range weights() {
		alloc := node.Allocatable(r.name)
		if alloc <= 0 {
			continue
		}
		used := node.Requested(r.name) + pod.Request(r.name)
		if used > alloc {
			used = alloc
		}
		sum += r.weight * used * 100 / alloc
		total += r.weight
	}
	if total == 0 {
		return 0, sdk.Success()
	}
	return sum / total, sdk.Success()
}

func main() {}
