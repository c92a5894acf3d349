// Command spot-for-batch is a Filter and Score policy for spot capacity:
//
//   - Filter: a pod that is not labelled workload=batch cannot go to a node
//     labelled lifecycle=spot.
//   - Score: a workload=batch pod scores 100 on spot nodes and 0 elsewhere;
//     other pods score 0 everywhere.
//
// No config, no reads.
package main

import sdk "github.com/wasmsched/wasmsched/guest-sdk"

func init() {
	sdk.RegisterFilter(filter)
	sdk.RegisterScore(score)
}

func isBatch(pod sdk.Pod) bool {
	v, _ := pod.Label("workload")
	return v == "batch"
}

func isSpot(node sdk.Node) bool {
	v, _ := node.Label("lifecycle")
	return sdk.Equal(v, "spot")
}

func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
	if !isBatch(pod) && isSpot(node) {
		return sdk.Unschedulable("spot nodes take only workload=batch pods")
	}
	return sdk.Success()
}

func score(pod sdk.Pod, node sdk.Node) (int64, sdk.Status) {
	if isBatch(pod) && isSpot(node) {
		return 100, sdk.Success()
	}
	return 0, sdk.Success()
}

func main() {}
