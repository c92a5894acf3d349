//go:build k8s_1_35

package framework

import (
	"k8s.io/client-go/tools/events"
	fwk "k8s.io/kube-scheduler/framework"
)

// EventRecorder is what Handle.EventRecorder returns on this line (an
// EventRecorderLogger from v1.36 on).
type EventRecorder = events.EventRecorder

// The range of a normalized node score (MinScore and MaxScore come in v1.36).
const (
	MinNodeScore = fwk.MinNodeScore
	MaxNodeScore = fwk.MaxNodeScore
)
