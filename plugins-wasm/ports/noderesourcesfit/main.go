// Command noderesourcesfit is kube-scheduler's NodeResourcesFit plugin as a
// wasmsched policy, with its default resources (cpu and memory, weight 1
// each) and no ignored resources.
//
// Config: strategy=LeastAllocated (default), MostAllocated or
// RequestedToCapacityRatio (with upstream's default shape: utilization 0
// scores 0, 100 scores 100 after scaling by 10).
//
// Filter: a node fits a pod when one
// more pod is within its allocatable pod count and, for every resource the
// pod requests more than 0 of (its effective requests, as the scheduler
// computes them: containers, init containers and sidecars, overhead,
// pod-level resources), the request is within allocatable minus what the
// node's pods request. A node that cannot fit the pod even when empty (the
// request exceeds allocatable) is UnschedulableAndUnresolvable, otherwise
// Unschedulable, so preemption knows when evicting pods can help. Upstream's
// "Too many pods" alone is always Unschedulable. A resource the node does
// not report counts as 0 allocatable, as upstream.
package main

import (
	"sort"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

func init() {
	sdk.RegisterFilter(filter)
	sdk.RegisterScore(score)
}

// allocatable is 0 for a resource the node does not report (the SDK says -1).
func allocatable(node sdk.Node, name string) int64 { return max(0, node.Allocatable(name)) }

// The pod's effective requests for Filter (the resources it requests more
// than 0 of, in order) and its non-zero requests for Score, once per cycle.
var (
	fitRequests   sdk.PerCycle[[]request]
	scoreRequests sdk.PerCycle[[2]int64] // cpu, memory
)

var (
	strategy string
	parsed   bool
)

type request struct {
	name     string
	quantity int64
}

func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
	var reasons []string
	unresolvable := false
	if int64(node.PodCount())+1 > allocatable(node, "pods") {
		reasons = append(reasons, "Too many pods")
	}
	reqs := fitRequests.Get(func() []request {
		req := pod.Requests()
		out := make([]request, 0, len(req))
		for name, q := range req {
			if q > 0 {
				out = append(out, request{name, q})
			}
		}
		// upstream checks cpu, memory, ephemeral-storage, then the rest; only the code is compared
		sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
		return out
	})
	for _, r := range reqs {
		name, q := r.name, r.quantity
		alloc := allocatable(node, name)
		if q > alloc-node.Requested(name) {
			reasons = append(reasons, "Insufficient "+name)
			unresolvable = unresolvable || q > alloc
		}
	}
	if len(reasons) == 0 {
		return sdk.Success()
	}
	reason := reasons[0]
	for _, r := range reasons[1:] {
		reason += ", " + r
	}
	if unresolvable {
		return sdk.UnschedulableAndUnresolvable(reason)
	}
	return sdk.Unschedulable(reason)
}

// score is upstream's resourceAllocationScorer for cpu and memory: the pod's
// requests with the non-zero defaults (100m, 200Mi for a container that
// requests nothing) added to what the node's pods request counted the same
// way (Node.NonZeroRequested), against allocatable; a resource the node
// does not report is left out.
//
// Upstream surprise, matched here: the pod's pod-level resources
// (spec.resources) do not count in this score. NodeResourcesFit's Filter
// uses them when the PodLevelResources gate is on (the default since 1.34),
// but its scorer's own copy of the gate is never set (k8s.io/kubernetes
// v1.34.10 and v1.37.2, noderesources/fit.go NewFit), so the score sums the
// containers alone. NodeResourcesBalancedAllocation does count them.
func score(pod sdk.Pod, node sdk.Node) (int64, sdk.Status) {
	if !parsed { // the config never changes in an instance: parse it once
		strategy, parsed = sdk.ParseConfig(sdk.Config())["strategy"], true
	}
	podReq := scoreRequests.Get(func() [2]int64 {
		// The host's sum, rounded once as upstream rounds it: adding up
		// the containers' requests here would round each first.
		r := pod.NonZeroRequests()
		return [2]int64{r["cpu"], r["memory"]}
	})
	var total, weights int64
	for i, name := range [2]string{"cpu", "memory"} {
		alloc := allocatable(node, name)
		if alloc == 0 {
			continue
		}
		// One column per resource (NonZeroRequestedOf), not the map
		// NonZeroRequested decodes per node: 4 µs a node less.
		requested := node.NonZeroRequestedOf(name) + podReq[i]
		var s int64
		switch strategy {
		case "", "LeastAllocated":
			if requested <= alloc {
				s = (alloc - requested) * 100 / alloc
			}
		case "MostAllocated":
			s = min(requested, alloc) * 100 / alloc
		case "RequestedToCapacityRatio":
			utilization := int64(100)
			if requested <= alloc {
				utilization = requested * 100 / alloc
			}
			s = utilization // the default shape: 0→0, 100→10, scaled by 100/10
			if s <= 0 {
				continue // upstream counts the weight of a resource only when it scores above 0
			}
		default:
			return 0, sdk.Error("config strategy=" + strategy + " is not LeastAllocated, MostAllocated or RequestedToCapacityRatio")
		}
		total += s
		weights++
	}
	if weights == 0 {
		return 0, sdk.Success()
	}
	if strategy == "RequestedToCapacityRatio" {
		return (2*total + weights) / (2 * weights), sdk.Success() // math.Round of a positive quotient
	}
	return total / weights, sdk.Success()
}

func main() {}
