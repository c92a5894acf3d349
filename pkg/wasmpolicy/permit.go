package wasmpolicy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework"
)

// Permit for guests (ABI v4, docs/abi.md §3.7). A policy's permit allows
// the reserved pod, refuses it, or makes it wait until the policy allows
// it from a later call (another pod's permit: a gang that is complete).
// kube-scheduler knows one plugin, WasmPolicy, so WasmPolicy keeps which
// of its policies each waiting pod still waits for and allows the pod
// once all of them have; any of them rejecting it rejects it.

// defaultMaxPermitWait bounds a permit's wait when the policy's args do
// not (args built in Go without defaulting); configv1 defaults the same.
const defaultMaxPermitWait = time.Minute

// waitingPods are the pods WasmPolicy made wait, by UID.
type waitingPods struct {
	mu sync.Mutex
	m  map[types.UID]*waitEntry
}

// waitEntry is one waiting pod: where it waits, and the policies it
// still waits for.
type waitEntry struct {
	pod      *v1.Pod
	node     string
	policies []string
}

func (wp *waitingPods) add(pod *v1.Pod, node string, policies []string) {
	wp.mu.Lock()
	defer wp.mu.Unlock()
	if wp.m == nil {
		wp.m = map[types.UID]*waitEntry{}
	}
	wp.m[pod.UID] = &waitEntry{pod: pod, node: node, policies: policies}
}

// forget drops pod: it no longer waits (bound, rejected, timed out).
func (wp *waitingPods) forget(uid types.UID) {
	wp.mu.Lock()
	delete(wp.m, uid)
	wp.mu.Unlock()
}

// waits reports whether pod uid has an entry: its permit said Wait and no
// decision has been made about that wait.
func (wp *waitingPods) waits(uid types.UID) bool {
	wp.mu.Lock()
	defer wp.mu.Unlock()
	return wp.m[uid] != nil
}

// Permit implements framework.PermitPlugin.
func (w *WasmPolicy) Permit(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) (*fwk.Status, time.Duration) {
	c := readCycle(state)
	// A pod-group cycle on v1.36 runs Permit for each member inside its
	// simulation: nothing waits there, and the member's own Permit comes
	// once the group's placement stands.
	if c == nil || !c.has(host.CallPermit) || framework.InPodGroupCycle(state) {
		return nil, 0
	}
	node := w.nodeNamed(c, nodeName)
	if node == nil {
		return fwk.AsStatus(errNodeGone(nodeName)), 0
	}
	var waits, reasons []string
	var timeout time.Duration
	for i, p := range c.policies {
		m := c.runs[i].module
		if m == nil || !m.Exports().Has(host.CallPermit) || c.stopReason(i) != "" {
			continue
		}
		enforce := !p.audit()
		c.runs[i].pc.Waiting = w.waitingAt(ctx, p, host.CallPermit)
		ms, res, cerr := p.call(ctx, m, host.CallPermit, c, i, node, nil)
		c.runs[i].pc.Waiting = nil
		if cerr != nil {
			if v := p.callFailed(ctx, c, i, host.CallPermit, cerr, enforce); v.Rejects() {
				return p.status(host.CallPermit, v), 0
			}
			continue
		}
		a := c.auditFor(i)
		if res.Code == abi.CodeWait {
			d, why := p.permitWait(ms)
			if why != "" {
				if v := p.policyError(ctx, host.CallPermit, why, enforce); v.Rejects() {
					return p.status(host.CallPermit, v), 0
				}
				continue
			}
			if !enforce {
				p.m.evaluated(host.CallPermit, resultOf(res.Code))
				p.m.audited(host.CallPermit, "Wait")
				a.refuse(nodeName, fmt.Sprintf("would have made the pod wait at Permit (up to %s): %s", d, orUnspecified(res.Reason)))
				continue
			}
			p.m.evaluated(host.CallPermit, resultOf(res.Code))
			waits, reasons = append(waits, p.cfg.Name), append(reasons, Name+"/"+p.cfg.Name+": "+orUnspecified(res.Reason))
			if timeout == 0 || d < timeout {
				timeout = d
			}
			continue
		}
		v := p.read(ctx, host.CallPermit, res, enforce, func(reason string) {
			a.refuse(nodeName, "would have refused the pod at Permit: "+orUnspecified(reason))
		})
		if v.Rejects() {
			if v.Code != fwk.Error {
				p.remember(pod)
			}
			return p.status(host.CallPermit, v), 0
		}
	}
	if len(waits) == 0 {
		return nil, 0
	}
	w.waiting.add(pod, nodeName, waits)
	klog.FromContext(ctx).V(2).Info("Pod waits at Permit for its policies", "pod", klog.KObj(pod), "node", nodeName, "policies", waits, "timeout", timeout)
	return fwk.NewStatus(fwk.Wait, strings.Join(reasons, "; ")), timeout
}

// permitWait is how long a permit that returned Wait with result ms makes
// its pod wait, or why the wait is the policy's error.
func (p *policy) permitWait(ms int64) (time.Duration, string) {
	limit := p.cfg.MaxPermitWait
	if limit <= 0 {
		limit = defaultMaxPermitWait
	}
	if ms <= 0 {
		return 0, fmt.Sprintf("permit returned Wait with a wait of %d ms: return how long the pod may wait, in milliseconds (at most policies[].maxPermitWait, %s)", ms, limit)
	}
	d := time.Duration(min(ms, abi.MaxPermitWaitMillis+1)) * time.Millisecond
	if d > limit {
		return 0, fmt.Sprintf("permit asked to wait %s, more than policies[].maxPermitWait (%s) of policy %q allows: wait less, or raise maxPermitWait (at most 15m)", d, limit, p.cfg.Name)
	}
	return d, ""
}

// waitingAt is what policy p's call at point reaches of the waiting pods:
// those p made wait.
func (w *WasmPolicy) waitingAt(ctx context.Context, p *policy, point host.CallKind) host.Waiting {
	return &policyWaiting{w: w, p: p, point: point, logger: klog.FromContext(ctx)}
}

// policyWaiting implements host.Waiting for one policy's call.
type policyWaiting struct {
	w      *WasmPolicy
	p      *policy
	point  host.CallKind
	logger klog.Logger
}

func (v *policyWaiting) List(sel labels.Selector) [][4]string {
	wp := &v.w.waiting
	wp.mu.Lock()
	var out [][4]string
	for uid, e := range wp.m {
		if slices.Contains(e.policies, v.p.cfg.Name) && sel.Matches(labels.Set(e.pod.Labels)) {
			out = append(out, [4]string{string(uid), e.pod.Namespace, e.pod.Name, e.node})
		}
	}
	wp.mu.Unlock()
	slices.SortFunc(out, func(a, b [4]string) int {
		if c := strings.Compare(a[1], b[1]); c != 0 {
			return c
		}
		return strings.Compare(a[2], b[2])
	})
	return out
}

// take finds pod uid waiting at the policy and, under the lock, lets
// settle change its entry; settle reports whether the pod's wait is over
// (its entry is then removed). take reports whether the pod was waiting
// at the policy, and whether its wait is over.
func (v *policyWaiting) take(what, uid string, settle func(*waitEntry) bool) (found, over bool) {
	wp := &v.w.waiting
	wp.mu.Lock()
	e := wp.m[types.UID(uid)]
	if e == nil || !slices.Contains(e.policies, v.p.cfg.Name) {
		wp.mu.Unlock()
		v.notWaiting(what, uid)
		return false, false
	}
	if over = settle(e); over {
		delete(wp.m, types.UID(uid))
	}
	wp.mu.Unlock()
	return true, over
}

func (v *policyWaiting) Allow(uid string) bool {
	found, over := v.take("allowed", uid, func(e *waitEntry) bool {
		e.policies = slices.DeleteFunc(slices.Clone(e.policies), func(n string) bool { return n == v.p.cfg.Name })
		return len(e.policies) == 0
	})
	if over {
		v.w.decide(types.UID(uid), func(pod framework.WaitingPod) { pod.Allow(Name) })
	}
	return found
}

func (v *policyWaiting) Reject(uid, msg string) bool {
	found, _ := v.take("rejected", uid, func(*waitEntry) bool { return true })
	if found {
		why := fmt.Sprintf("%s/%s: %s", Name, v.p.cfg.Name, orUnspecified(msg))
		v.w.decide(types.UID(uid), func(pod framework.WaitingPod) { pod.Reject(Name, why) })
	}
	return found
}

// decideWithin bounds how long decide waits for a pod to be waiting.
const decideWithin = 2 * time.Second

// decide applies an allow or a reject, which the caller has taken out of
// w.waiting, to the framework's waiting pod uid. A pod whose permit just
// said Wait is added to the framework's waiting pods right after Permit
// returns, on the scheduling goroutine, while an unreserve or a postfilter
// may decide about it from another: decide then waits for it to appear
// (briefly), so the decision is not lost and the pod does not wait out its
// timeout. The decision was about that wait only: if the pod waits again
// (a new entry, which Permit makes before the framework adds the pod), it
// is dropped.
func (w *WasmPolicy) decide(uid types.UID, apply func(framework.WaitingPod)) {
	if w.handle == nil {
		return
	}
	if pod := w.handle.GetWaitingPod(uid); pod != nil {
		apply(pod)
		return
	}
	go func() {
		for deadline := time.Now().Add(decideWithin); time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
			if w.waiting.waits(uid) {
				return // a new wait: not the one decided about
			}
			if pod := w.handle.GetWaitingPod(uid); pod != nil {
				if !w.waiting.waits(uid) {
					apply(pod)
				}
				return
			}
		}
	}()
}

// notWaiting logs, at most once a minute per policy, an allow or reject
// of a pod that is not waiting at the policy: the guest only sees -1.
func (v *policyWaiting) notWaiting(what, uid string) {
	if !v.p.logRefusal() {
		return
	}
	v.logger.Error(nil, "Policy "+what+" a pod that is not waiting at it; nothing changed", "policy", v.p.cfg.Name, "extensionPoint", v.point.String(), "podUID", truncate(uid, 64),
		"fix", "allow or reject only the pods permit_waiting (sdk.WaitingPods) lists: a pod waits at a policy from its permit's Wait until the policy allows it, a policy rejects it, or its wait times out")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
