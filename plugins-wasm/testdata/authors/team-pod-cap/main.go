// Command team-pod-cap is a Filter policy: a pod labelled team=X cannot go
// to a node that already runs max or more (non-terminating) pods of team X,
// in any namespace. reads: [NodePods].
//
// Config: max=<n> (required, 1..1000).
package main

import (
	"strconv"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

const teamKey = "team"

var (
	seen   string
	loaded bool
	limit  int
	bad    string
)

func init() { sdk.RegisterFilter(filter) }

func load() {
	c := sdk.Config()
	if loaded && c == seen {
		return
	}
	// Natively, case tables with different configs share these globals, so
	// re-parse when the config changes (in wasm it never does).
	loaded, seen, bad = true, c, ""
	v, ok := sdk.ParseConfig(c)["max"]
	if !ok {
		bad = "config max=<n> is required"
		return
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1000 {
		bad = "config max=" + v + " is not a number from 1 to 1000"
		return
	}
	limit = n
}

func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
	load()
	if bad != "" {
		return sdk.Error(bad)
	}
	team, ok := pod.Label(teamKey)
	if !ok {
		return sdk.Success()
	}
	n := 0
	for _, p := range node.Pods() {
		if v, has := p.Labels[teamKey]; has && !p.Terminating && sdk.Equal(v, team) {
			n++
		}
	}
	if n >= limit {
		return sdk.Unschedulable("node already runs " + strconv.Itoa(n) + " pods of team " + team + " (cap " + strconv.Itoa(limit) + ")")
	}
	return sdk.Success()
}

func main() {}
