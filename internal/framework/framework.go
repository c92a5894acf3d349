// Package framework names the parts of the kube-scheduler framework API that
// wasmsched uses, wherever the build line's Kubernetes keeps them. Up to
// v1.34 the plugin interfaces live in k8s.io/kubernetes/pkg/scheduler/framework;
// from v1.35 on they live in the staging module k8s.io/kube-scheduler/framework,
// and since v1.36 Handle.EventRecorder returns an EventRecorderLogger. Code in this repository
// imports this package instead of either, so one source builds every line
// (docs/kubernetes.md): api_k8s137.go for main, api_k8s134.go under the
// k8s_1_34 build tag.
package framework

import (
	v1 "k8s.io/api/core/v1"
	k8sframework "k8s.io/kubernetes/pkg/scheduler/framework"
)

// Framework is the scheduler framework that runs a profile's plugins.
type Framework = k8sframework.Framework

// NewCycleState returns the state of one scheduling cycle, as the scheduler creates it.
func NewCycleState() *k8sframework.CycleState { return k8sframework.NewCycleState() }

// NewNodeInfo returns a NodeInfo holding pods, as the scheduler's cache builds it.
func NewNodeInfo(pods ...*v1.Pod) *k8sframework.NodeInfo { return k8sframework.NewNodeInfo(pods...) }
