// Command node-health is a Filter policy: it rejects nodes whose conditions
// report MemoryPressure, DiskPressure or PIDPressure True, or whose Ready
// condition is not True (False, Unknown, or not reported at all).
// No config, no reads.
package main

import sdk "github.com/wasmsched/wasmsched/guest-sdk"

func init() { sdk.RegisterFilter(filter) }

var pressures = [...]string{"MemoryPressure", "DiskPressure", "PIDPressure"}

func filter(_ sdk.Pod, node sdk.Node) sdk.Status {
	ready, ok := node.Condition("Ready")
	if !ok {
		return sdk.UnschedulableAndUnresolvable("node reports no Ready condition")
	}
	if ready != "True" {
		return sdk.UnschedulableAndUnresolvable("node is not Ready (Ready=" + ready + ")")
	}
	for _, t := range pressures {
		if s, _ := node.Condition(t); s == "True" {
			return sdk.UnschedulableAndUnresolvable("node has " + t)
		}
	}
	return sdk.Success()
}

func main() {}
