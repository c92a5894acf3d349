//go:build !k8s_1_34 && !k8s_1_35

package wasmpolicy

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// PreBindPreFlight implements framework.PreBindPlugin (v1.36 and later):
// Skip unless a policy of the pod's cycle has a prebind. No parallel run
// is offered (a nil result): the profile's preBind order decides, and
// WasmPolicy listed after VolumeBinding does not patch a pod whose volumes
// failed to bind.
func (w *WasmPolicy) PreBindPreFlight(_ context.Context, state fwk.CycleState, _ *v1.Pod, _ string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	return nil, w.preBindPreFlight(state)
}
