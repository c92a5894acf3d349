//go:build !k8s_1_34

package kubemodel_test

import (
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/pkg/nodeinfo"
)

// lineNodeInfos: on the lines pkg/nodeinfo builds for, the round trip
// holds it too.
var lineNodeInfos = map[string]func(nodes []*v1.Node, pods [][]*v1.Pod) []fwk.NodeInfo{
	"pkg/nodeinfo": func(nodes []*v1.Node, pods [][]*v1.Pod) []fwk.NodeInfo {
		var all []*v1.Pod
		for _, ps := range pods {
			all = append(all, ps...)
		}
		return nodeinfo.List(nodes, all)
	},
}
