//go:build !k8s_1_34

package wasmpolicy

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

// SignFragmentKey is the key of WasmPolicy's fragment of a pod signature.
const SignFragmentKey = "wasmsched.io/WasmPolicy.Policies()"

var _ fwk.SignPlugin = (*WasmPolicy)(nil)

// SignPod implements fwk.SignPlugin, so that a profile with WasmPolicy keeps
// kube-scheduler's opportunistic batching (KEP-5598, on by default since
// 1.35): a plugin that filters or scores and cannot sign turns it off for
// every pod of the profile. Two pods whose signatures are equal get the
// same verdicts from every policy in their scope on a node in one state:
// the fragment holds the pod's key (everything a policy can read of the
// pod but its name, UID and creation time: host.PodState.Key) and, for each
// policy that filters or scores the pod, its name, settings and module
// version. This is the contract of verdict reuse (docs/abi.md §3.4).
//
// It refuses (Unschedulable, which only means "not batched") while a
// policy in the pod's scope could answer two such pods differently or
// must see each pod: no module loaded yet, reuse turned off, a guest that
// keeps state, reads the pod's identity or the cluster (declared Cluster
// or Namespaces reads, or seen reading them), draws random bytes or has
// the real clock; a policy in Audit mode (its report covers every pod's
// nodes); an open breaker or pods held in quarantine.
func (w *WasmPolicy) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	policies := w.current().forPod(pod, w.nsLabels)
	var parts []string
	for _, p := range policies {
		if why := p.unsignable(); why != "" {
			return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("policy %q: %s", p.cfg.Name, why))
		}
		m := p.runtime.Current()
		ex := m.Exports()
		if !ex.Has(host.CallPreFilter) && !ex.Has(host.CallFilter) && !ex.Has(host.CallPreScore) && !ex.Has(host.CallScore) {
			continue // a gate or prebind only: no verdict on a node
		}
		sig, ok := m.Signature()
		if !ok {
			return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("policy %q: its verdicts are not a function of the pod's key and the node (docs/abi.md §3.4)", p.cfg.Name))
		}
		parts = append(parts, fmt.Sprintf("%s#%d@%s", p.cfg.Name, p.serial, sig))
	}
	value := "none"
	if len(parts) > 0 {
		key := host.NewPodState(pod).Key()
		value = hex.EncodeToString(key[:]) + ";" + strings.Join(parts, ";")
	}
	return []fwk.SignFragment{{Key: SignFragmentKey, Value: value}}, nil
}

// unsignable says why the policy's verdicts for a pod may not be taken for
// another pod's, or "".
func (p *policy) unsignable() string {
	switch {
	case !p.settled.Load() || p.runtime.Current() == nil:
		return "no module loaded yet"
	case p.cfg.VerdictReuse == config.VerdictReuseDisabled:
		return "verdictReuse is Disabled"
	case p.cfg.Mode == config.ModeAudit:
		return "Audit mode evaluates every pod"
	case p.clusterReads:
		return "it reads the cluster"
	case !p.breaker.clean.Load():
		return "its circuit breaker is not closed"
	case p.quarantine.size() > 0:
		return "pods are in its quarantine"
	}
	return ""
}
