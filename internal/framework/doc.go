// Package framework names the parts of the kube-scheduler framework API that
// wasmsched uses, wherever the build line's Kubernetes keeps them. Up to
// v1.34 the plugin interfaces live in k8s.io/kubernetes/pkg/scheduler/framework;
// from v1.35 on they live in the staging module k8s.io/kube-scheduler/framework,
// and since v1.36 Handle.EventRecorder returns an EventRecorderLogger. Code in this repository
// imports this package instead of either, so one source builds every line
// (docs/kubernetes.md, Adding a line, has the table): api.go from v1.35
// on, with what changed in v1.36 in api_k8s137.go (main and the 1.36 line)
// and api_k8s135.go; api_k8s134.go under its line's tag; and PodSelf per
// line in podself_*.go. On the main line it
// imports no k8s.io/kubernetes
// package; the in-tree implementation (NodeInfo, CycleState) is in
// internal/framework/intree.
package framework

import fwk "k8s.io/kube-scheduler/framework"

// StateStore is where a plugin keeps data for a scope longer than one
// pod's cycle (PodGroupState).
type StateStore interface {
	Read(key fwk.StateKey) (fwk.StateData, error)
	Write(key fwk.StateKey, val fwk.StateData)
}
