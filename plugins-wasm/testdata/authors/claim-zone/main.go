// Command claim-zone is a Score policy: a pod that mounts a
// PersistentVolumeClaim prefers nodes in the zone (topology.kubernetes.io/zone)
// where its data lives. reads: [Volumes].
//
// For each of the pod's claims:
//   - bound to a PersistentVolume that exists: the volume's zones are the
//     values of In requirements on topology.kubernetes.io/zone in its
//     spec.nodeAffinity.required terms (ORed; a term without such a
//     requirement allows every zone), or, when it has no node affinity, its
//     topology.kubernetes.io/zone label (zones may be joined by "__");
//   - unbound, with a WaitForFirstConsumer StorageClass: the zones its
//     allowedTopologies permit; none listed means no preference;
//   - missing, unbound with another binding mode, or bound to a missing
//     volume: no preference.
//
// Score: 100 on a node whose zone every constraining claim allows, 0
// elsewhere (and on nodes without the zone label). With no constraining
// claim every node scores 0 (no preference). It never rejects a node.
package main

import (
	"strings"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

const zoneKey = "topology.kubernetes.io/zone"

func init() {
	sdk.RegisterPreScore(preScore)
	sdk.RegisterScore(score)
}

// prefs are the zone sets of the claims that constrain the pod; a node
// must be in every set to score 100.
type prefs struct {
	sets [][]string
}

var perCycle sdk.PerCycle[prefs]

func load() prefs {
	return perCycle.Get(func() prefs {
		var p prefs
		for _, c := range (sdk.Cluster{}).VolumeClaims() {
			if zones, ok := claimZones(c); ok {
				p.sets = append(p.sets, zones)
			}
		}
		return p
	})
}

// claimZones returns the zones claim c prefers and whether it has a
// preference at all.
func claimZones(c sdk.VolumeClaim) ([]string, bool) {
	if !c.Found {
		return nil, false
	}
	if c.VolumeName != "" {
		if c.Volume == nil {
			return nil, false
		}
		if len(c.Volume.NodeAffinity) > 0 {
			return termZones(c.Volume.NodeAffinity)
		}
		if v, ok := c.Volume.Labels[zoneKey]; ok {
			var zones []string
			for _, z := range strings.Split(v, "__") {
				if z = strings.TrimSpace(z); z != "" {
					zones = append(zones, z)
				}
			}
			return zones, len(zones) > 0
		}
		return nil, false
	}
	if c.Class != nil && c.Class.VolumeBindingMode == sdk.VolumeBindingWaitForFirstConsumer &&
		len(c.Class.AllowedTopologies) > 0 {
		return termZones(c.Class.AllowedTopologies)
	}
	return nil, false
}

// termZones is the union of the zones ORed terms allow through In
// requirements on zoneKey; a term without one allows every zone, so the
// terms then express no zone preference.
func termZones(terms []sdk.NodeSelectorTerm) ([]string, bool) {
	var zones []string
	for _, t := range terms {
		found := false
		for _, r := range t.MatchExpressions {
			if r.Key == zoneKey && r.Operator == "In" {
				found = true
				zones = append(zones, r.Values...)
			}
		}
		if !found {
			return nil, false
		}
	}
	return zones, len(zones) > 0
}

func preScore(pod sdk.Pod) sdk.Status {
	load()
	return sdk.Success()
}

func score(pod sdk.Pod, node sdk.Node) (int64, sdk.Status) {
	p := load()
	if len(p.sets) == 0 {
		return 0, sdk.Success()
	}
	zone, ok := node.Label(zoneKey)
	if !ok {
		return 0, sdk.Success()
	}
	for _, set := range p.sets {
		if !contains(set, zone) {
			return 0, sdk.Success()
		}
	}
	return 100, sdk.Success()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if sdk.Equal(x, s) {
			return true
		}
	}
	return false
}

func main() {}
