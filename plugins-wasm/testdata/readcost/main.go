// Command readcost is a benchmark policy: its Filter makes one read, named
// by its config ("read=Node.Pods"), on every node it evaluates, and passes
// it. test/perf's BenchmarkReadCost loads it once per read and compares
// each with read=none: what each kind of read costs a Filter per node, the
// table in docs/performance.md.
package main

import (
	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

func init() { sdk.RegisterFilter(filter) }

var read sdk.PerConfig[string]

// teamCount is what a counting policy asks: the pod's team per node name.
var teamCount = sdk.CountTerm{
	LabelSelector: &sdk.LabelSelector{MatchLabels: map[string]string{"team": "payments"}},
	TopologyKey:   "",
}

func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
	n := 0
	which := read.Get(func(c string) string { return sdk.ParseConfig(c)["read"] })
	switch which {
	case "none":
	case "Pod.Name":
		n = len(pod.Name())
	case "Pod.Label":
		v, _ := pod.Label("team")
		n = len(v)
	case "Pod.Labels":
		n = len(pod.Labels())
	case "Pod.Request":
		n = int(pod.Request("cpu"))
	case "Pod.Requests":
		n = len(pod.Requests())
	case "Pod.Tolerations":
		n = len(pod.Tolerations())
	case "Pod.Containers":
		n = len(pod.Containers())
	case "Pod.NodeAffinityRequired":
		n = len(pod.NodeAffinityRequired())
	case "Pod.Object":
		n = len(pod.Object())
	case "Node.Name":
		n = len(node.Name())
	case "Node.Label":
		v, _ := node.Label("topology.kubernetes.io/zone")
		n = len(v)
	case "Node.Labels":
		n = len(node.Labels())
	case "Node.Annotations":
		n = len(node.Annotations())
	case "Node.Taints":
		n = len(node.Taints())
	case "Node.Allocatable":
		n = int(node.Allocatable("cpu"))
	case "Node.Requested":
		n = int(node.Requested("cpu"))
	case "Node.AllocatableAll":
		n = len(node.AllocatableAll())
	case "Node.Conditions":
		n = len(node.Conditions())
	case "Node.Images":
		n = len(node.Images())
	case "Node.KubeletVersion":
		n = len(node.KubeletVersion())
	case "Node.PodCount":
		n = node.PodCount()
	case "Node.Pods":
		n = len(node.Pods())
	case "Node.CountPodsWithLabel":
		n = node.CountPodsWithLabel("team", "payments")
	case "Node.UsedPorts":
		n = len(node.UsedPorts())
	case "Node.Object":
		n = len(node.Object())
	case "Cluster.NodeCount":
		n = sdk.Cluster{}.NodeCount()
	case "Cluster.NodeLabels":
		n = len(sdk.Cluster{}.NodeLabels(0))
	case "Cluster.CountPods":
		n = int(sdk.Cluster{}.CountPods(teamCount)[node.Name()])
	case "Cluster.NamespaceLabels":
		l, _ := sdk.Cluster{}.NamespaceLabels("payments")
		n = len(l)
	case "Cluster.VolumeClaims":
		n = len(sdk.Cluster{}.VolumeClaims())
	case "Cluster.DeviceRequests":
		n = len(sdk.Cluster{}.DeviceRequests())
	case "Cluster.NodeDevices":
		n = len(sdk.Cluster{}.NodeDevices())
	default:
		return sdk.Error("readcost: unknown read " + which)
	}
	if n < 0 {
		return sdk.Unschedulable("never")
	}
	return sdk.Success()
}

func main() {}
