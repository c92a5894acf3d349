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
		if n, err := strconv.ParseInt(w, 10, 64); err == nil && n > 0 {
			resources = append(resources, weighted{name, n})
		}
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
		free := alloc - node.Requested(r.name) - pod.Request(r.name)
		if free < 0 {
			free = 0
		}
		sum += r.weight * free * 100 / alloc
		total += r.weight
	}
	if total == 0 {
		return 0, sdk.Success()
	}
	return sum / total, sdk.Success()
}

func main() {}
