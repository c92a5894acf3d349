package framework

import fwk "k8s.io/kube-scheduler/framework"

// placementLister is what kube-scheduler's snapshot answers from v1.36 on:
// the nodes of the placement a pod-group cycle is trying (topology-aware
// workload scheduling). It is not part of the SharedLister interface, so it is
// asked for by method.
type placementLister interface {
	ListNodesInPlacement() ([]fwk.NodeInfo, error)
}

// PlacementNodes is the node list the scheduler filters in this cycle: the
// placement's nodes while a pod-group cycle tries one, else the snapshot's
// whole list. Nil when l is not kube-scheduler's snapshot or the line has
// no placements. PreFilter is given every node even in a placement, while
// Filter and Score see only the placement's.
func PlacementNodes(l SharedLister) []fwk.NodeInfo {
	pl, ok := l.(placementLister)
	if !ok {
		return nil
	}
	nodes, err := pl.ListNodesInPlacement()
	if err != nil {
		return nil
	}
	return nodes
}
