//go:build !k8s_1_34

package framework

import (
	fwk "k8s.io/kube-scheduler/framework"
)

// The plugin API from k8s.io/kube-scheduler/framework (Kubernetes v1.35 and
// later; what changed since is in api_k8s135.go and api_k8s137.go).
type (
	Handle              = fwk.Handle
	Plugin              = fwk.Plugin
	PreFilterPlugin     = fwk.PreFilterPlugin
	PreFilterResult     = fwk.PreFilterResult
	PreFilterExtensions = fwk.PreFilterExtensions
	FilterPlugin        = fwk.FilterPlugin
	PostFilterPlugin    = fwk.PostFilterPlugin
	PostFilterResult    = fwk.PostFilterResult
	PreScorePlugin      = fwk.PreScorePlugin
	ScorePlugin         = fwk.ScorePlugin
	ScoreExtensions     = fwk.ScoreExtensions
	ReservePlugin       = fwk.ReservePlugin
	PreEnqueuePlugin    = fwk.PreEnqueuePlugin
	PreBindPlugin       = fwk.PreBindPlugin
	PostBindPlugin      = fwk.PostBindPlugin
	PermitPlugin        = fwk.PermitPlugin
	WaitingPod          = fwk.WaitingPod
	QueueSortPlugin     = fwk.QueueSortPlugin
	EnqueueExtensions   = fwk.EnqueueExtensions
	NodeScore           = fwk.NodeScore
	NodeScoreList       = fwk.NodeScoreList
	NodeToStatusReader  = fwk.NodeToStatusReader
	SharedLister        = fwk.SharedLister
	NodeInfoLister      = fwk.NodeInfoLister
	SharedDRAManager    = fwk.SharedDRAManager
)
