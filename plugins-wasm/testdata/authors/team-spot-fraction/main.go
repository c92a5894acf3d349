// Command team-spot-fraction is a Filter policy: at most maxPercent percent
// (default 50) of a team's pods may run on spot nodes (lifecycle=spot).
// A spot node is rejected for a pod labelled team=X when, with this pod on
// it, more than maxPercent% of team X's pods (every namespace,
// terminating pods left out) would run on spot nodes. Other nodes, and pods
// without the team label, pass. reads: [Cluster].
//
// Config: maxPercent=<0..100> (default 50).
package main

import (
	"strconv"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

const (
	teamKey      = "team"
	lifecycleKey = "lifecycle"
)

var (
	seen       string
	loaded     bool
	maxPercent int64
	bad        string
)

func init() { sdk.RegisterFilter(filter) }

func load() {
	c := sdk.Config()
	if loaded && c == seen {
		return
	}
	loaded, seen, bad, maxPercent = true, c, "", 50
	if v, ok := sdk.ParseConfig(c)["maxPercent"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 100 {
			bad = "config maxPercent=" + v + " is not a number from 0 to 100"
			return
		}
		maxPercent = int64(n)
	}
}

type counts struct{ spot, total int64 }

var perCycle sdk.PerCycle[counts]

func teamCounts(team string) counts {
	return perCycle.Get(func() counts {
		sel := &sdk.LabelSelector{MatchLabels: map[string]string{teamKey: team}}
		all := &sdk.LabelSelector{}
		var c counts
		// Per node name (TopologyKey ""): every node counts, labelled or not.
		perNode := sdk.Cluster{}.DomainCounts(sdk.CountTerm{LabelSelector: sel, NamespaceSelector: all, TopologyKey: ""})
		for i := 0; i < perNode.Len(); i++ {
			_, n := perNode.At(i)
			c.total += n
		}
		c.spot = sdk.Cluster{}.DomainCounts(sdk.CountTerm{LabelSelector: sel, NamespaceSelector: all, TopologyKey: lifecycleKey}).Get("spot")
		return c
	})
}

func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
	load()
	if bad != "" {
		return sdk.Error(bad)
	}
	if v, _ := node.Label(lifecycleKey); !sdk.Equal(v, "spot") {
		return sdk.Success()
	}
	team, ok := pod.Label(teamKey)
	if !ok {
		return sdk.Success()
	}
	c := teamCounts(team)
	if (c.spot+1)*100 > maxPercent*(c.total+1) {
		return sdk.Unschedulable("team " + team + " would run " + strconv.FormatInt(c.spot+1, 10) + " of " +
			strconv.FormatInt(c.total+1, 10) + " pods on spot nodes, more than " + strconv.FormatInt(maxPercent, 10) + "%")
	}
	return sdk.Success()
}

func main() {}
