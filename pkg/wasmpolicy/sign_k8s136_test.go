//go:build !k8s_1_34 && !k8s_1_35

package wasmpolicy

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// signPod is the framework's SignPod.
func signPod(c *cluster, ctx context.Context, pod *v1.Pod) fwk.PodSignature {
	return c.fw.SignPod(ctx, pod)
}
