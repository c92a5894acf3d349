//go:build !k8s_1_34

package wasmpolicy

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// PreBindPreFlight implements framework.PreBindPlugin (v1.35 and later):
// Skip unless a policy of the pod's cycle has a prebind. The patch does not
// depend on other plugins' PreBind, but it runs after them (AllowParallel
// false) so that a pod whose volumes fail to bind is not patched first.
func (w *WasmPolicy) PreBindPreFlight(_ context.Context, state fwk.CycleState, _ *v1.Pod, _ string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	return nil, w.preBindPreFlight(state)
}
