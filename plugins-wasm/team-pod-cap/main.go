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

// settings are the policy's config, parsed once (sdk.PerConfig).
type settings struct {
	key   string
	limit int
	bad   string // why the config is refused, "" when it is not
}

var cfg sdk.PerConfig[settings]

func init() { sdk.RegisterFilter(filter) }

func parse(config string) settings {
	c := sdk.ParseConfig(config)
	s := settings{key: c["key"], limit: 3}
	if s.key == "" {
		s.key = "team"
	}
	if m, ok := c["max"]; ok {
		n, err := strconv.Atoi(m)
		if err != nil || n < 1 || n > 1000 {
			s.bad = "config max=" + m + " is not a number from 1 to 1000"
		}
		s.limit = n
	}
	return s
}

func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
	s := cfg.Get(parse)
	if s.bad != "" {
		return sdk.Error(s.bad)
	}
	team, ok := pod.Label(s.key)
	if !ok {
		return sdk.Success()
	}
	// A count, not the pods: CountPodsWithLabel reads the node's pod
	// lists without decoding them (Node.Pods costs far more per node).
	n := node.CountPodsWithLabel(s.key, team)
	if n >= s.limit {
		return sdk.Unschedulable("node already runs " + strconv.Itoa(n) + " pods of " + s.key + " " + team + " (at most " + strconv.Itoa(s.limit) + " per node)")
	}
	return sdk.Success()
}

func main() {}
