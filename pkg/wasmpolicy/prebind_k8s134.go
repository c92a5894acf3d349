//go:build k8s_1_34 || k8s_1_35

package wasmpolicy

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// PreBindPreFlight implements framework.PreBindPlugin (v1.34 and v1.35): Skip unless
// a policy of the pod's cycle has a prebind.
func (w *WasmPolicy) PreBindPreFlight(_ context.Context, state fwk.CycleState, _ *v1.Pod, _ string) *fwk.Status {
	return w.preBindPreFlight(state)
}
