// Package intree gives wasmsched's own programs and tests the parts of
// kube-scheduler's in-tree framework implementation they use: the framework
// runtime's Framework, a CycleState and the scheduler cache's NodeInfo.
// They live in k8s.io/kubernetes, so this package is kept apart from
// internal/framework: the plugin and policytest import only the latter,
// and a policy author's module can require wasmsched without Kubernetes'
// staging replace lines (docs/architecture.md).
package intree

import (
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	k8sframework "k8s.io/kubernetes/pkg/scheduler/framework"
)

// Framework is the scheduler framework that runs a profile's plugins.
type Framework = k8sframework.Framework

// NewCycleState returns the state of one scheduling cycle, as the scheduler creates it.
func NewCycleState() *k8sframework.CycleState { return k8sframework.NewCycleState() }

// NewNodeInfo returns a NodeInfo holding pods, as the scheduler's cache builds it.
func NewNodeInfo(pods ...*v1.Pod) *k8sframework.NodeInfo { return k8sframework.NewNodeInfo(pods...) }

// NodeInfos builds the scheduler's view of nodes outside a scheduler (the
// wasmsched CLI): each NodeInfo carries the pods bound to it (by
// spec.nodeName), leaving out pods that have finished.
func NodeInfos(nodes []*v1.Node, pods []*v1.Pod) []fwk.NodeInfo {
	byNode := map[string][]*v1.Pod{}
	for _, p := range pods {
		if p.Spec.NodeName != "" && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed {
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
		}
	}
	out := make([]fwk.NodeInfo, len(nodes))
	for i, n := range nodes {
		ni := NewNodeInfo(byNode[n.Name]...)
		ni.SetNode(n)
		out[i] = ni
	}
	SetImageStates(out, nodes)
	return out
}

// SetImageStates gives each of infos (built by NewNodeInfo) the image
// states a scheduler snapshot of cluster would give it (the scheduler's
// NewSnapshot), as ImageLocality reads them: per name of each of its node's
// images, the image's size and the number of cluster's nodes that list the
// name.
func SetImageStates(infos []fwk.NodeInfo, cluster []*v1.Node) {
	holders := map[string]map[string]bool{}
	for _, n := range cluster {
		for _, im := range n.Status.Images {
			for _, name := range im.Names {
				if holders[name] == nil {
					holders[name] = map[string]bool{}
				}
				holders[name][n.Name] = true
			}
		}
	}
	for _, info := range infos {
		ni, ok := info.(*k8sframework.NodeInfo)
		if !ok || ni.Node() == nil {
			continue
		}
		states := map[string]*fwk.ImageStateSummary{}
		for _, im := range ni.Node().Status.Images {
			for _, name := range im.Names {
				states[name] = &fwk.ImageStateSummary{Size: im.SizeBytes, NumNodes: len(holders[name])}
			}
		}
		ni.ImageStates = states
	}
}
