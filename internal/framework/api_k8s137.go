//go:build !k8s_1_34

package framework

import (
	"k8s.io/client-go/tools/events"
	fwk "k8s.io/kube-scheduler/framework"
)

// The plugin API from k8s.io/kube-scheduler/framework (Kubernetes v1.35 and later).
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
	QueueSortPlugin     = fwk.QueueSortPlugin
	EnqueueExtensions   = fwk.EnqueueExtensions
	NodeScore           = fwk.NodeScore
	NodeScoreList       = fwk.NodeScoreList
	NodeToStatusReader  = fwk.NodeToStatusReader
	SharedLister        = fwk.SharedLister
)

// EventRecorder is what Handle.EventRecorder returns on this line: an
// EventRecorderLogger since v1.36.
type EventRecorder = events.EventRecorderLogger

// The range of a normalized node score (MinNodeScore and MaxNodeScore are
// deprecated since v1.36 in favour of these names; same values).
const (
	MinNodeScore = fwk.MinScore
	MaxNodeScore = fwk.MaxScore
)

// PodSelf is the event resource of an unscheduled pod's update of
// itself: TargetPod since v1.35, so a registration sees the pod's own
// updates and not those of every pod in the cluster.
const PodSelf = fwk.TargetPod
