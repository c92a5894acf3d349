//go:build k8s_1_35

package framework

import (
	"k8s.io/client-go/tools/events"
	fwk "k8s.io/kube-scheduler/framework"
)

// The plugin API from k8s.io/kube-scheduler/framework (Kubernetes v1.35).
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

// EventRecorder is what Handle.EventRecorder returns on this line (an
// EventRecorderLogger from v1.36 on).
type EventRecorder = events.EventRecorder

// The range of a normalized node score (MinScore and MaxScore come in v1.36).
const (
	MinNodeScore = fwk.MinNodeScore
	MaxNodeScore = fwk.MaxNodeScore
)
