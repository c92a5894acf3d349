// Command counter is a test policy whose verdicts depend on state it keeps
// across calls: it counts the nodes it evaluates and rejects every second
// one, whatever the node. It reads the node's "pool" label, so that its
// batches run from a node table, and ignores it.
//
// Config "declare=true" makes it say so (sdk.KeepsState): then the host
// must evaluate every node itself. Without it, nodes with the same pool
// may share one verdict, which is what a policy that keeps state and does
// not declare it gets (docs/abi.md §3.4).
package main

import sdk "github.com/wasmsched/wasmsched/guest-sdk"

var evaluated int

func init() {
	if sdk.ParseConfig(sdk.Config())["declare"] == "true" {
		sdk.KeepsState()
	}
	sdk.RegisterFilter(func(_ sdk.Pod, node sdk.Node) sdk.Status {
		node.Label("pool")
		evaluated++
		if evaluated%2 == 0 {
			return sdk.Unschedulable("every second node")
		}
		return sdk.Success()
	})
}

func main() {}
