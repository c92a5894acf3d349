//go:build k8s_1_34

package kubemodel_test

import (
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// lineNodeInfos: pkg/nodeinfo does not build for the 1.34 line.
var lineNodeInfos = map[string]func(nodes []*v1.Node, pods [][]*v1.Pod) []fwk.NodeInfo{}
