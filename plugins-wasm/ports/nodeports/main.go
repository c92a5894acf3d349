// Command nodeports is kube-scheduler's NodePorts plugin as a wasmsched
// policy: a pod whose containers (and sidecar init containers, which run
// for the pod's whole life; other init containers do not count) ask for a
// host port cannot go to a node where a pod already uses that port with the
// same protocol on the same IP, or where either side binds 0.0.0.0.
// PreFilter: Skip for a pod without host ports. Filter: Unschedulable (a
// preemption can free the port). It reads the node's used ports, so its
// args declare reads: [NodePods].
package main

import sdk "github.com/wasmsched/wasmsched/guest-sdk"

func init() {
	sdk.RegisterPreFilter(preFilter)
	sdk.RegisterFilter(filter)
}

// hostPorts are the pod's wanted host ports, with upstream's defaults
// (0.0.0.0 and TCP when unset), as util.GetHostPorts and HostPortInfo see
// them.
func hostPorts(pod sdk.Pod) []sdk.HostPort {
	var out []sdk.HostPort
	for _, c := range pod.Containers() {
		if c.Kind == sdk.ContainerInit && c.RestartPolicy != "Always" {
			continue
		}
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			hp := sdk.HostPort{IP: p.HostIP, Protocol: p.Protocol, Port: p.HostPort}
			if hp.IP == "" {
				hp.IP = "0.0.0.0"
			}
			if hp.Protocol == "" {
				hp.Protocol = "TCP"
			}
			out = append(out, hp)
		}
	}
	return out
}

func preFilter(pod sdk.Pod) sdk.Status {
	if len(hostPorts(pod)) == 0 {
		return sdk.Skip()
	}
	return sdk.Success()
}

// wanted is the pod's host ports, worked out once per cycle.
var wanted sdk.PerCycle[[]sdk.HostPort]

func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
	want := wanted.Get(func() []sdk.HostPort { return hostPorts(pod) })
	if len(want) == 0 {
		return sdk.Success()
	}
	used := node.UsedPorts()
	for _, w := range want {
		for _, u := range used {
			if u.Port == w.Port && sdk.Equal(u.Protocol, w.Protocol) && (w.IP == "0.0.0.0" || u.IP == "0.0.0.0" || sdk.Equal(u.IP, w.IP)) {
				return sdk.Unschedulable("node(s) didn't have free ports for the requested pod ports")
			}
		}
	}
	return sdk.Success()
}

func main() {}
