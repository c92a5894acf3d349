// Command volumezone is kube-scheduler's VolumeZone plugin as a wasmsched
// policy, reading the pod's claims through Cluster.VolumeClaims (args:
// reads [Volumes]).
//
// PreFilter collects the zone and region labels of the volumes the pod's
// claims are bound to. A claim that does not exist, a bound volume that
// does not exist, an unbound claim without a class, with a class that does
// not exist or has no volumeBindingMode, or with an Immediate class (the
// volume should have been bound already) fails the pod as
// UnschedulableAndUnresolvable, with upstream's message; an unbound claim
// of a WaitForFirstConsumer class is left out (it will be provisioned where
// the pod lands). No labels: Skip.
//
// Filter: a node without any of the four zone and region labels passes (a
// single-zone cluster); otherwise each volume label's key must be on the
// node (a beta key is also looked up under its GA name) with one of the
// label's values, else UnschedulableAndUnresolvable "node(s) had no
// available volume zone". A label value may list zones joined by "__";
// one that does not parse (an empty zone) is ignored, as upstream ignores
// it.
package main

import (
	"strings"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

func init() {
	sdk.RegisterPreFilter(preFilter)
	sdk.RegisterFilter(filter)
}

// topologyLabels are the volume labels VolumeZone checks, in upstream's
// order.
var topologyLabels = []string{
	"failure-domain.beta.kubernetes.io/zone",
	"failure-domain.beta.kubernetes.io/region",
	"topology.kubernetes.io/zone",
	"topology.kubernetes.io/region",
}

// gaLabel is the GA name of a beta zone or region label.
func gaLabel(key string) string {
	switch key {
	case "failure-domain.beta.kubernetes.io/zone":
		return "topology.kubernetes.io/zone"
	case "failure-domain.beta.kubernetes.io/region":
		return "topology.kubernetes.io/region"
	}
	return key
}

// topology is one volume label: its key and the zones it allows.
type topology struct {
	key    string
	values []string
}

// state is PreFilter's result for the cycle.
type state struct {
	topologies []topology
	status     sdk.Status
}

var cycle sdk.PerCycle[state]

func compute() state {
	var out []topology
	for _, c := range (sdk.Cluster{}).VolumeClaims() {
		if c.ClaimName == "" {
			return state{status: sdk.UnschedulableAndUnresolvable("PersistentVolumeClaim had no name")}
		}
		if !c.Found {
			return state{status: sdk.UnschedulableAndUnresolvable(`persistentvolumeclaim "` + c.ClaimName + `" not found`)}
		}
		if c.VolumeName == "" {
			switch {
			case c.StorageClassName == "":
				return state{status: sdk.UnschedulableAndUnresolvable("PersistentVolumeClaim had no pv name and storageClass name")}
			case c.Class == nil:
				return state{status: sdk.UnschedulableAndUnresolvable(`storageclass.storage.k8s.io "` + c.StorageClassName + `" not found`)}
			case c.Class.VolumeBindingMode == "":
				return state{status: sdk.UnschedulableAndUnresolvable(`VolumeBindingMode not set for StorageClass "` + c.StorageClassName + `"`)}
			case c.Class.VolumeBindingMode == sdk.VolumeBindingWaitForFirstConsumer:
				continue
			}
			return state{status: sdk.UnschedulableAndUnresolvable("PersistentVolume had no name")}
		}
		if c.Volume == nil {
			return state{status: sdk.UnschedulableAndUnresolvable(`persistentvolume "` + c.VolumeName + `" not found`)}
		}
		for _, key := range topologyLabels {
			if v, ok := c.Volume.Labels[key]; ok {
				if zones, ok := zonesOf(v); ok {
					out = append(out, topology{key, zones})
				}
			}
		}
	}
	if len(out) == 0 {
		return state{status: sdk.Skip()}
	}
	return state{topologies: out, status: sdk.Success()}
}

// zonesOf splits a zone label's value as upstream's LabelZonesToSet does:
// zones joined by "__", each trimmed; an empty one makes the whole value
// invalid.
func zonesOf(v string) ([]string, bool) {
	parts := strings.Split(v, "__")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			return nil, false
		}
		parts[i] = p
	}
	return parts, true
}

func preFilter(pod sdk.Pod) sdk.Status { return cycle.Get(compute).status }

func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
	st := cycle.Get(compute)
	if !st.status.IsSuccess() {
		return sdk.Success() // skipped (a failed PreFilter never reaches Filter)
	}
	constrained := false
	for _, key := range topologyLabels {
		if _, ok := node.Label(key); ok {
			constrained = true
			break
		}
	}
	if !constrained {
		return sdk.Success()
	}
	for _, t := range st.topologies {
		v, ok := node.Label(t.key)
		if !ok {
			v, ok = node.Label(gaLabel(t.key))
		}
		if !ok || !contains(t.values, v) {
			return sdk.UnschedulableAndUnresolvable("node(s) had no available volume zone")
		}
	}
	return sdk.Success()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func main() {}
