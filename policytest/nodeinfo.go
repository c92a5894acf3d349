package policytest

import (
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

func nodeInfos(nodes []*v1.Node, pods map[string][]*v1.Pod) []fwk.NodeInfo {
	out := make([]fwk.NodeInfo, len(nodes))
	for i, n := range nodes {
		ni := framework.NewNodeInfo(pods[n.Name]...)
		ni.SetNode(n)
		out[i] = ni
	}
	return out
}
