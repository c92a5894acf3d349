// Command labelgate is a test policy whose reads of the pod depend on the
// node: a node labelled gate=<key> admits a pod whose label <key> is "yes",
// and a node without that label admits every pod. Which of the pod's
// labels its guests have read therefore grows with the nodes they meet,
// and the verdicts the host remembers across cycles must be keyed on every
// label read, including one first read in the middle of a cycle (the
// host's hostabi.PodReads).
package main

import sdk "github.com/wasmsched/wasmsched/guest-sdk"

func init() {
	sdk.RegisterFilter(func(pod sdk.Pod, node sdk.Node) sdk.Status {
		key, ok := node.Label("gate")
		if !ok {
			return sdk.Success()
		}
		if v, _ := pod.Label(key); v == "yes" {
			return sdk.Success()
		}
		return sdk.Unschedulable("pod label " + key + " is not yes")
	})
}

func main() {}
