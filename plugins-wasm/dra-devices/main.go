// Command dra-devices is a wasmsched Score policy for pods that ask for
// devices through Dynamic Resource Allocation (resource.k8s.io/v1
// ResourceClaims). kube-scheduler's DynamicResources plugin already keeps
// such a pod off nodes without a free device of its claim's DeviceClass;
// among the nodes that have one, it has no preference. This policy ranks
// them by how many devices of the class each node's ResourceSlices leave
// free once the pod's request is taken:
//
//   - mode=spread (the default) prefers the node with the largest share of
//     its devices still free, so that devices wear and fail evenly and a
//     node's loss takes few claims with it;
//   - mode=pack prefers the node with the smallest share still free, so
//     that whole nodes stay free for requests of many devices.
//
// It reads the Devices scope (policies[].reads: [Devices]): the pod's own
// claims, and per node the total and free devices of their classes as the
// DynamicResources plugin counts them, allocations the scheduler made and
// has not yet written included. A pod without claims, or whose claims are
// all allocated already (shared claims), scores 0 everywhere.
package main

import (
	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

type settings struct {
	pack bool
	bad  string
}

var cfg sdk.PerConfig[settings]

func parse(config string) settings {
	switch mode := sdk.ParseConfig(config)["mode"]; mode {
	case "", "spread":
		return settings{}
	case "pack":
		return settings{pack: true}
	default:
		return settings{bad: "config mode=" + mode + ": want spread or pack"}
	}
}

// need is one class the pod asks devices of, and how many.
type need struct {
	class string
	count int64
}

// cycle is what the policy reads once per scheduling cycle.
type cycle struct {
	needs []need
	// free and total by node, then class.
	devices map[string]map[string]sdk.NodeDevices
}

var perCycle sdk.PerCycle[cycle]

func read() cycle {
	var c cycle
	for _, r := range (sdk.Cluster{}).DeviceRequests() {
		if !r.Found || r.Allocated || r.DeviceClassName == "" {
			continue
		}
		c.needs = append(c.needs, need{r.DeviceClassName, max(r.Count, 1)})
	}
	if len(c.needs) == 0 {
		return c
	}
	c.devices = map[string]map[string]sdk.NodeDevices{}
	for _, d := range (sdk.Cluster{}).NodeDevices() {
		if c.devices[d.Node] == nil {
			c.devices[d.Node] = map[string]sdk.NodeDevices{}
		}
		c.devices[d.Node][d.DeviceClassName] = d
	}
	return c
}

func init() { sdk.RegisterScore(score) }

func score(_ sdk.Pod, node sdk.Node) (int64, sdk.Status) {
	s := cfg.Get(parse)
	if s.bad != "" {
		return 0, sdk.Error(s.bad)
	}
	c := perCycle.Get(read)
	if len(c.needs) == 0 {
		return 0, sdk.Success()
	}
	var sum int64
	for _, n := range c.needs {
		d := c.devices[node.Name()][n.class]
		if d.Total == 0 || d.Free < n.count {
			// DynamicResources refuses the node; if it is not in the
			// profile, this node is the worst choice.
			continue
		}
		left := (d.Free - n.count) * 100 / d.Total
		if s.pack {
			left = 100 - left
		}
		sum += left
	}
	return sum / int64(len(c.needs)), sdk.Success()
}

func main() {}
