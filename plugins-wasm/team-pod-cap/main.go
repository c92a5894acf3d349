// Command team-pod-cap is a wasmsched Filter policy that caps how many pods
// of one team run on one node, so a single node failure cannot take out
// most of a team's capacity. It counts the pods on the node (Node.Pods),
// so its args must declare reads: [NodePods].
//
// Config (all optional):
//
//	key=<label key>   the team label (default team)
//	max=<n>           pods of one team per node (default 3; 1 to 1000)
//
// A pod without the label is not capped. Terminating pods do not count.
package main

import (
	"strconv"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

var (
	loaded bool
	key    string
	limit  int
	bad    string
)

func init() { sdk.RegisterFilter(filter) }

func load() {
	if loaded {
		return
	}
	loaded = true
	cfg := sdk.ParseConfig(sdk.Config())
	key = cfg["key"]
	if key == "" {
		key = "team"
	}
	limit = 3
	if m, ok := cfg["max"]; ok {
		n, err := strconv.Atoi(m)
		if err != nil || n < 1 || n > 1000 {
			bad = "config max=" + m + " is not a number from 1 to 1000"
		}
		limit = n
	}
}

func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
	load()
	if bad != "" {
		return sdk.Error(bad)
	}
	team, ok := pod.Label(key)
	if !ok {
		return sdk.Success()
	}
	n := 0
	for _, p := range node.Pods() {
		if v, has := p.Labels[key]; has && v == team && !p.Terminating {
			n++
		}
	}
	if n >= limit {
		return sdk.Unschedulable("node already runs " + strconv.Itoa(n) + " pods of " + key + " " + team + " (at most " + strconv.Itoa(limit) + " per node)")
	}
	return sdk.Success()
}

func main() {}
