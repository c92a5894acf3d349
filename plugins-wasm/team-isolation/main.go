// Command team-isolation is a wasmsched Filter policy that keeps each team's
// pods on that team's nodes.
//
// Config: "key=<label key>" (default "team"), and optionally "spill=true"
// and "require=true".
//   - A pod with the label runs only on nodes whose label has the same value
//     (with spill=true: or on nodes without the label, the shared pool).
//   - A pod without the label runs only on nodes without the label (the
//     shared pool); with require=true it runs nowhere.
package main

import sdk "github.com/wasmsched/wasmsched/guest-sdk"

var (
	key        string
	configRead bool
	// spill lets a team's pods also run in the shared pool; require
	// rejects pods that name no team.
	spill, require bool
)

func init() {
	sdk.RegisterFilter(filter)
}

func labelKey() string {
	if !configRead {
		cfg := sdk.ParseConfig(sdk.Config())
		key = cfg["key"]
		if key == "" {
			key = "team"
		}
		spill, require = cfg["spill"] == "true", cfg["require"] == "true"
		configRead = true
	}
	return key
}

// Reasons are built once per distinct team and reused: in a guest, building
// a string on every node (an allocation and a copy) costs more than the
// filter itself.
var (
	sharedPoolReason, sharedPoolTeam string
	dedicatedReason, dedicatedTeam   string
	mismatchReason, requiredReason   string
)

func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
	k := labelKey()
	podTeam, podHas := pod.Label(k)
	nodeTeam, nodeHas := node.Label(k)
	switch {
	case !podHas && require:
		if requiredReason == "" {
			requiredReason = "pod has no " + k + " label, and every pod must name its " + k + " (require=true)"
		}
		return sdk.Unschedulable(requiredReason)
	case podHas && !nodeHas && spill:
		return sdk.Success() // the shared pool takes every team's overflow
	case podHas && !nodeHas:
		if sharedPoolReason == "" || !sdk.Equal(sharedPoolTeam, podTeam) {
			sharedPoolReason, sharedPoolTeam = "node has no "+k+" label (shared pool), pod belongs to "+k+" "+podTeam, podTeam
		}
		return sdk.Unschedulable(sharedPoolReason)
	case podHas && !sdk.Equal(nodeTeam, podTeam): // Equal: cheaper than != per node
		if mismatchReason == "" {
			mismatchReason = k + " label mismatch"
		}
		return sdk.Unschedulable(mismatchReason)
	case !podHas && nodeHas:
		if dedicatedReason == "" || !sdk.Equal(dedicatedTeam, nodeTeam) {
			dedicatedReason, dedicatedTeam = "node is dedicated to "+k+" "+nodeTeam, nodeTeam
		}
		return sdk.Unschedulable(dedicatedReason)
	}
	return sdk.Success()
}

func main() {}
