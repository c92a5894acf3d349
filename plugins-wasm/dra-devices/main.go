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
// has not yet written included. A firstAvailable request counts its first
// alternative the node can satisfy; requests of one class add up. A pod
// without claims, or whose claims are all allocated already (shared
// claims), scores 0 everywhere.
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

// alternative is one way to satisfy a request: a class and a count (0:
// all of the node's devices of the class).
type alternative struct {
	class string
	count int64
}

// cycle is what the policy reads once per scheduling cycle.
type cycle struct {
	// requests are the pod's unallocated requests, each with its
	// alternatives in order (one, or a firstAvailable list's).
	requests [][]alternative
	// devices are the nodes' devices by node, then class.
	devices map[string]map[string]sdk.NodeDevices
}

var perCycle sdk.PerCycle[cycle]

func read() cycle {
	var c cycle
	index := map[string]int{}
	for _, r := range (sdk.Cluster{}).DeviceRequests() {
		if !r.Found || r.Allocated || r.DeviceClassName == "" {
			continue
		}
		// "request/subrequest" entries are the alternatives of request.
		name := r.PodClaim + "/" + r.Request
		for k := 0; k < len(r.Request); k++ {
			if r.Request[k] == '/' {
				name = r.PodClaim + "/" + r.Request[:k]
				break
			}
		}
		at, ok := index[name]
		if !ok {
			at = len(c.requests)
			index[name] = at
			c.requests = append(c.requests, nil)
		}
		c.requests[at] = append(c.requests[at], alternative{r.DeviceClassName, r.Count})
	}
	if len(c.requests) == 0 {
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

// score takes each request's first alternative that the node's free
// devices still satisfy (the requests before it took theirs) and averages
// the share of the class's devices left free after it (spread) or taken
// (pack); a request no alternative satisfies adds 0.
func score(_ sdk.Pod, node sdk.Node) (int64, sdk.Status) {
	s := cfg.Get(parse)
	if s.bad != "" {
		return 0, sdk.Error(s.bad)
	}
	c := perCycle.Get(read)
	if len(c.requests) == 0 {
		return 0, sdk.Success()
	}
	devices := c.devices[node.Name()]
	used := map[string]int64{}
	var sum int64
	for _, alts := range c.requests {
		for _, a := range alts {
			d := devices[a.class]
			free := d.Free - used[a.class]
			need := a.count
			if need == 0 { // allocationMode All: every device of the class, all free
				if d.Total == 0 || free != d.Total {
					continue
				}
				need = d.Total
			}
			if d.Total == 0 || free < need {
				continue
			}
			used[a.class] += need
			left := (free - need) * 100 / d.Total
			if s.pack {
				left = 100 - left
			}
			sum += left
			break
		}
	}
	return sum / int64(len(c.requests)), sdk.Success()
}

func main() {}
