// Command host-port-conflict is a Filter policy: a pod cannot go to a node
// where a pod already uses a hostPort it asks for with the same protocol
// (TCP when unset). Host IPs are honoured as kube-scheduler's NodePorts does:
// two specific, different IPs do not conflict; 0.0.0.0 (or unset) conflicts
// with every IP. Ports of init containers count only for sidecars
// (restartPolicy Always). reads: [NodePods].
package main

import (
	"strconv"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

func init() {
	sdk.RegisterPreFilter(preFilter)
	sdk.RegisterFilter(filter)
}

var wanted sdk.PerCycle[[]sdk.HostPort]

func hostPorts(pod sdk.Pod) []sdk.HostPort {
	return wanted.Get(func() []sdk.HostPort {
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
	})
}

func preFilter(pod sdk.Pod) sdk.Status {
	if len(hostPorts(pod)) == 0 {
		return sdk.Skip()
	}
	return sdk.Success()
}

func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
	want := hostPorts(pod)
	if len(want) == 0 {
		return sdk.Success()
	}
	used := node.UsedPorts()
	for _, w := range want {
		for _, u := range used {
			if u.Port == w.Port && sdk.Equal(u.Protocol, w.Protocol) &&
				(w.IP == "0.0.0.0" || u.IP == "0.0.0.0" || sdk.Equal(u.IP, w.IP)) {
				return sdk.Unschedulable("host port " + w.Protocol + "/" + strconv.Itoa(int(w.Port)) + " is already in use on the node")
			}
		}
	}
	return sdk.Success()
}

func main() {}
