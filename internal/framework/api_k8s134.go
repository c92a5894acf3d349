//go:build k8s_1_34

package framework

import (
	"k8s.io/client-go/tools/events"
	sfwk "k8s.io/kube-scheduler/framework"
	fwk "k8s.io/kubernetes/pkg/scheduler/framework"
)

// The plugin API from k8s.io/kubernetes/pkg/scheduler/framework (Kubernetes v1.34).
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

// EventRecorder is what Handle.EventRecorder returns on this line.
type EventRecorder = events.EventRecorder

// The range of a normalized node score.
const (
	MinNodeScore = fwk.MinNodeScore
	MaxNodeScore = fwk.MaxNodeScore
)

// PodSelf is the event resource of an unscheduled pod's update of
// itself: on v1.34 there is no TargetPod, and Pod matches every pod's
// update (queueing hints tell the pod's own apart).
const PodSelf = sfwk.Pod
