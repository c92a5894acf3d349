// Command nodename is kube-scheduler's NodeName plugin as a wasmsched
// policy: a pod with spec.nodeName may only run on that node. Its PreFilter
// names the node (prefilter_nodes), as upstream returns a PreFilterResult,
// so the scheduler does not filter the other nodes at all; its Filter
// rejects any other node as UnschedulableAndUnresolvable.
package main

import sdk "github.com/wasmsched/wasmsched/guest-sdk"

func init() {
	sdk.RegisterPreFilter(preFilter)
	sdk.RegisterFilter(filter)
}

func preFilter(pod sdk.Pod) sdk.Status {
	if name := pod.NodeName(); name != "" {
		sdk.PreFilterNodes(name)
	}
	return sdk.Success()
}

func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
	if name := pod.NodeName(); name != "" && !sdk.Equal(name, node.Name()) {
		return sdk.UnschedulableAndUnresolvable("node(s) didn't match the requested node name")
	}
	return sdk.Success()
}

func main() {}
