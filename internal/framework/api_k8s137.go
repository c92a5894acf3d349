//go:build !k8s_1_34 && !k8s_1_35

package framework

import (
	"k8s.io/client-go/tools/events"
	fwk "k8s.io/kube-scheduler/framework"
)

// The plugin API from k8s.io/kube-scheduler/framework (Kubernetes v1.36 and
// later; api_k8s135.go is v1.35's).
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
