// Command team-isolation is a wasmsched Filter policy that keeps each team's
// pods on that team's nodes.
//
// Config: "key=<label key>" (default "team").
//   - A pod with the label runs only on nodes whose label has the same value.
//   - A pod without the label runs only on nodes without the label (the shared pool).
package main

import sdk "github.com/wasmsched/wasmsched/guest-sdk"

var key string

func init() {
	sdk.RegisterFilter(filter)
}

func labelKey() string {
	if key == "" {
		key = sdk.ParseConfig(sdk.Config())["key"]
		if key == "" {
			key = "team"
		}
	}
	return key
}

func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
	k := labelKey()
	podTeam, podHas := pod.Label(k)
	nodeTeam, nodeHas := node.Label(k)
	switch {
	case podHas && !nodeHas:
		return sdk.Unschedulable("node has no " + k + " label (shared pool), pod belongs to " + k + " " + podTeam)
	case podHas && !sdk.Equal(nodeTeam, podTeam): // Equal: cheaper than != per node
		return sdk.Unschedulable(k + " label mismatch")
	case !podHas && nodeHas:
		return sdk.Unschedulable("node is dedicated to " + k + " " + nodeTeam)
	}
	return sdk.Success()
}

func main() {}
