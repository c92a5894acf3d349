// Command balancedallocation is kube-scheduler's NodeResourcesBalancedAllocation
// plugin as a wasmsched policy (default resources: cpu and memory). It
// favours nodes whose cpu and memory are used in the same proportion, and
// since v1.34 scores the change in balance the pod brings: 50 + (50 +
// balance with the pod - balance without it) / 2, where balance is
// 100 × (1 - the standard deviation of the used fractions, each capped at
// 1). Unlike NodeResourcesFit it counts what pods request, without the
// non-zero defaults, and a pod that requests neither resource is skipped
// (PreScore Skip: upstream's guard against piling best-effort pods on one
// node).
package main

import (
	"math"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

func init() {
	sdk.RegisterPreScore(preScore)
	sdk.RegisterScore(score)
}

var resources = []string{"cpu", "memory"}

// requests is the pod's requests (no non-zero defaults), once per cycle.
var requests sdk.PerCycle[map[string]int64]

func podRequests(pod sdk.Pod) map[string]int64 {
	return requests.Get(func() map[string]int64 {
		// Upstream's own sum (pod-level resources and overhead included),
		// rounded once: the containers' requests added up here would each
		// be rounded first.
		return pod.Requests()
	})
}

func preScore(pod sdk.Pod) sdk.Status {
	req := podRequests(pod)
	for _, name := range resources {
		if req[name] != 0 {
			return sdk.Success()
		}
	}
	return sdk.Skip()
}

func score(pod sdk.Pod, node sdk.Node) (int64, sdk.Status) {
	req := podRequests(pod)
	var with, without, alloc []int64
	for _, name := range resources {
		a := max(0, node.Allocatable(name))
		if a == 0 {
			continue
		}
		used := node.Requested(name)
		alloc = append(alloc, a)
		without = append(without, used)
		with = append(with, used+req[name])
	}
	return 50 + (50+balance(with, alloc)-balance(without, alloc))/2, sdk.Success()
}

// balance is upstream's balancedResourceScore.
func balance(requested, alloc []int64) int64 {
	var fractions []float64
	var sum float64
	for i := range requested {
		f := float64(requested[i]) / float64(alloc[i])
		if f > 1 {
			f = 1
		}
		sum += f
		fractions = append(fractions, f)
	}
	std := 0.0
	switch {
	case len(fractions) == 2:
		std = math.Abs((fractions[0] - fractions[1]) / 2)
	case len(fractions) > 2:
		mean := sum / float64(len(fractions))
		var sq float64
		for _, f := range fractions {
			sq += (f - mean) * (f - mean)
		}
		std = math.Sqrt(sq / float64(len(fractions)))
	}
	return int64((1 - std) * 100)
}

func main() {}
