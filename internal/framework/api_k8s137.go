//go:build !k8s_1_34 && !k8s_1_35

package framework

import (
	"k8s.io/client-go/tools/events"
	fwk "k8s.io/kube-scheduler/framework"
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
