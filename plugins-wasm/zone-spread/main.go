// Command zone-spread is a wasmsched Filter and Score policy that spreads a
// team's pods across zones, the way a PodTopologySpread constraint does for
// one workload, but for every pod of a team without each workload
// declaring it. It counts the team's pods per zone with Cluster.CountPods,
// which the host computes once per scheduling cycle, so its args must
// declare reads: [Cluster].
//
// Config (all optional):
//
//	key=<label key>          the team label (default team)
//	topologyKey=<label key>  the node label of a zone (default topology.kubernetes.io/zone)
//	maxSkew=<n>              how many more pods of a team one zone may run than the emptiest (default 1; 1 to 1000)
//	namespaces=all           count the team's pods in every namespace (default: the pod's own namespace)
//
// Filter: a node in a zone that, with this pod, would run more than maxSkew
// pods of the team above the zone with the fewest is Unschedulable; a node
// without the zone label is UnschedulableAndUnresolvable. Score: 100 for a
// node in the zone with the fewest pods of the team, 0 for the most, linear
// between. A pod without the team label passes and scores 0 everywhere.
// Terminating pods do not count. The zones are those of every node in the
// cluster that has the zone label.
package main

import (
	"strconv"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

var (
	loaded        bool
	key, topology string
	maxSkew       int64
	allNamespaces bool
	bad           string
)

func init() {
	sdk.RegisterFilter(filter)
	sdk.RegisterScore(score)
}

func load() {
	if loaded {
		return
	}
	loaded = true
	cfg := sdk.ParseConfig(sdk.Config())
	key, topology, maxSkew = "team", "topology.kubernetes.io/zone", 1
	if v := cfg["key"]; v != "" {
		key = v
	}
	if v := cfg["topologyKey"]; v != "" {
		topology = v
	}
	if v, ok := cfg["maxSkew"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			bad = "config maxSkew=" + v + " is not a number from 1 to 1000"
		}
		maxSkew = int64(n)
	}
	if v, ok := cfg["namespaces"]; ok {
		if v != "all" {
			bad = "config namespaces=" + v + " is not \"all\" (leave it out to count the pod's own namespace)"
		}
		allNamespaces = true
	}
}

// zones returns the team's pod count per zone, and the smallest and
// largest count; ok is false for a pod without the team label.
func zones(pod sdk.Pod) (team string, counts map[string]int64, lo, hi int64, ok bool) {
	team, ok = pod.Label(key)
	if !ok {
		return "", nil, 0, 0, false
	}
	term := sdk.CountTerm{LabelSelector: &sdk.LabelSelector{MatchLabels: map[string]string{key: team}}, TopologyKey: topology}
	if allNamespaces {
		term.NamespaceSelector = &sdk.LabelSelector{}
	}
	counts = sdk.Cluster{}.CountPods(term)
	first := true
	for _, n := range counts {
		if first || n < lo {
			lo = n
		}
		if first || n > hi {
			hi = n
		}
		first = false
	}
	return team, counts, lo, hi, true
}

func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
	load()
	if bad != "" {
		return sdk.Error(bad)
	}
	team, counts, lo, _, ok := zones(pod)
	if !ok {
		return sdk.Success()
	}
	zone, has := node.Label(topology)
	if !has {
		return sdk.UnschedulableAndUnresolvable("node has no " + topology + " label")
	}
	if n := counts[zone] + 1; n-lo > maxSkew {
		return sdk.Unschedulable(topology + " " + zone + " would run " + strconv.FormatInt(n, 10) + " pods of " + key + " " + team +
			", more than " + strconv.FormatInt(maxSkew, 10) + " above the emptiest zone's " + strconv.FormatInt(lo, 10))
	}
	return sdk.Success()
}

func score(pod sdk.Pod, node sdk.Node) (int64, sdk.Status) {
	load()
	if bad != "" {
		return 0, sdk.Error(bad)
	}
	_, counts, lo, hi, ok := zones(pod)
	if !ok {
		return 0, sdk.Success()
	}
	zone, has := node.Label(topology)
	if !has {
		return 0, sdk.Success()
	}
	if hi == lo {
		return 100, sdk.Success()
	}
	return 100 * (hi - counts[zone]) / (hi - lo), sdk.Success()
}

func main() {}
