// Command counter is a test policy whose verdicts depend on state it keeps
// across calls: it counts the nodes it evaluates and rejects every second
// one, whatever the node. It reads the node's "pool" label, so that its
// batches run from a node table, and ignores it.
//
// Config "declare=true" makes it say so (sdk.KeepsState): then the host
// must evaluate every node itself. Without it, nodes with the same pool
// may share one verdict, which is what a policy that keeps state and does
// not declare it gets (docs/abi.md §3.4). Config "via=cycle" keeps the
// count in the cycle state instead (sdk.SetCycleState from Filter), which
// the host sees: each node is then evaluated on its own, declared or not.
package main

import sdk "github.com/wasmsched/wasmsched/guest-sdk"

var evaluated int

func init() {
	config := sdk.ParseConfig(sdk.Config())
	if config["declare"] == "true" {
		sdk.KeepsState()
	}
	viaCycle := config["via"] == "cycle"
	sdk.RegisterFilter(func(_ sdk.Pod, node sdk.Node) sdk.Status {
		node.Label("pool")
		if viaCycle {
			n := len(sdk.CycleState())
			evaluated = n + 1
			sdk.SetCycleState(make([]byte, evaluated))
		} else {
			evaluated++
		}
		if evaluated%2 == 0 {
			return sdk.Unschedulable("every second node")
		}
		return sdk.Success()
	})
}

func main() {}
