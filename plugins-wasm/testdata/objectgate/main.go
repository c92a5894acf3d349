// Command objectgate is a test policy whose verdict depends on a granted
// object and on a node label: the object default/gate (its objects[0],
// field spec.team) names a team, and only nodes labelled team=<that team>
// admit pods. It reads no node's identity, so nodes with equal rows share
// its verdicts, and the host may remember them across cycles only while
// the objects it read are unchanged.
package main

import sdk "github.com/wasmsched/wasmsched/guest-sdk"

var gate = sdk.ObjectsOf(0)

func init() {
	sdk.RegisterFilter(func(_ sdk.Pod, node sdk.Node) sdk.Status {
		f, ok := gate.Get("default", "gate")
		if !ok {
			return sdk.Unschedulable("no gate")
		}
		if team, _ := node.Label("team"); team != f[0] {
			return sdk.Unschedulable("the gate is open to team " + f[0])
		}
		return sdk.Success()
	})
}

func main() {}
