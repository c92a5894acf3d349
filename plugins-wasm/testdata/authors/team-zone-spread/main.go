// Command team-zone-spread is a Score policy: a pod labelled team=X prefers
// the zone (topology.kubernetes.io/zone) that runs the fewest pods of team X,
// counted across every namespace. reads: [Cluster].
//
// Score: 100 for a node in the emptiest zone of the team, 0 for the fullest,
// linear between; 100 everywhere when all zones are even. A node without the
// zone label scores 0. A pod without the team label scores 0 everywhere.
package main

import sdk "github.com/wasmsched/wasmsched/guest-sdk"

const (
	teamKey = "team"
	zoneKey = "topology.kubernetes.io/zone"
)

func init() { sdk.RegisterScore(score) }

type zones struct {
	ok     bool
	counts sdk.DomainCounts
	lo, hi int64
}

var perCycle sdk.PerCycle[zones]

func load(pod sdk.Pod) zones {
	return perCycle.Get(func() zones {
		team, ok := pod.Label(teamKey)
		if !ok {
			return zones{}
		}
		term := sdk.CountTerm{
			LabelSelector:     &sdk.LabelSelector{MatchLabels: map[string]string{teamKey: team}},
			NamespaceSelector: &sdk.LabelSelector{}, // every namespace: a team spans namespaces
			TopologyKey:       zoneKey,
		}
		z := zones{ok: true, counts: sdk.Cluster{}.DomainCounts(term)}
		for i := 0; i < z.counts.Len(); i++ {
			_, n := z.counts.At(i)
			if i == 0 || n < z.lo {
				z.lo = n
			}
			if i == 0 || n > z.hi {
				z.hi = n
			}
		}
		return z
	})
}

func score(pod sdk.Pod, node sdk.Node) (int64, sdk.Status) {
	z := load(pod)
	if !z.ok {
		return 0, sdk.Success()
	}
	zone, has := node.Label(zoneKey)
	if !has {
		return 0, sdk.Success()
	}
	if z.hi == z.lo {
		return 100, sdk.Success()
	}
	return 100 * (z.hi - z.counts.Get(zone)) / (z.hi - z.lo), sdk.Success()
}

func main() {}
