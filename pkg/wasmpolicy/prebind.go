package wasmpolicy

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/verdict"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

// hasPreBind reports whether a policy of the cycle implements prebind.
func (c *cycleData) hasPreBind() bool { return c.has(host.CallPreBind) }

// has reports whether a policy of the cycle exports point.
func (c *cycleData) has(point host.CallKind) bool {
	for i := range c.policies {
		if m := c.runs[i].module; m != nil && m.Exports().Has(point) {
			return true
		}
	}
	return false
}

// preBindPreFlight tells the framework whether PreBind has anything to do
// for the pod: Skip unless a policy of its cycle has a prebind.
func (w *WasmPolicy) preBindPreFlight(state fwk.CycleState) *fwk.Status {
	if c := readCycle(state); c != nil && c.hasPreBind() {
		return nil
	}
	return fwk.NewStatus(fwk.Skip)
}

// keepBindNode keeps, at Reserve, a copy of the chosen node for prebind,
// postbind and unreserve: the binding cycle runs beside the next
// scheduling cycles, which update the snapshot's NodeInfos in place.
func (w *WasmPolicy) keepBindNode(c *cycleData, nodeName string) {
	if !c.hasPreBind() && !c.has(host.CallPostBind) && !c.has(host.CallUnreserve) {
		return
	}
	var ni fwk.NodeInfo
	if w.handle != nil {
		if l := w.handle.SnapshotSharedLister(); l != nil {
			if n, err := l.NodeInfos().Get(nodeName); err == nil && n != nil {
				ni = n.Snapshot()
			}
		}
	}
	if ni == nil { // outside a scheduler: the nodes PreFilter was given
		for _, n := range c.nodes {
			if n.Node() != nil && n.Node().Name == nodeName {
				ni = n.Snapshot()
				break
			}
		}
	}
	c.mu.Lock()
	c.bindNode, c.bindNodeName = ni, nodeName
	c.mu.Unlock()
}

// podPatch is the patch of every enforced policy's prebind for one pod,
// and which policy set each key.
type podPatch struct {
	labels, annotations map[string]string
	// by names the policy that set each key ("label:" or "annotation:"
	// then the key), for logs and conflicts.
	by map[string]string
	// fail lists the policies with failurePolicy Fail that wrote to it: a
	// failed request keeps the pod from being bound if any did.
	fail []string
	// audits are what the audited policies would have done.
	audits auditNotes
}

func (pp *podPatch) add(p *policy, patch *host.Patch) {
	if patch.Empty() {
		return
	}
	if pp.by == nil {
		pp.labels, pp.annotations, pp.by = map[string]string{}, map[string]string{}, map[string]string{}
	}
	merge := func(kind string, dst, src map[string]string) {
		for k, v := range src {
			if prev, ok := pp.by[kind+k]; ok && prev != p.cfg.Name && dst[k] != v {
				klog.V(2).InfoS("Two policies set the same key on a pod; the later policy's value wins", "key", kind+k, "first", prev, "then", p.cfg.Name)
			}
			dst[k] = v
			pp.by[kind+k] = p.cfg.Name
		}
	}
	merge("label:", pp.labels, patch.Labels)
	merge("annotation:", pp.annotations, patch.Annotations)
	if p.cfg.FailurePolicy != config.FailurePolicyIgnore && !slices.Contains(pp.fail, p.cfg.Name) {
		pp.fail = append(pp.fail, p.cfg.Name)
	}
}

func (pp *podPatch) empty() bool { return pp == nil || len(pp.labels)+len(pp.annotations) == 0 }

// body is the JSON merge patch: only the keys the policies set.
func (pp *podPatch) body() ([]byte, error) {
	meta := map[string]map[string]string{}
	if len(pp.labels) > 0 {
		meta["labels"] = pp.labels
	}
	if len(pp.annotations) > 0 {
		meta["annotations"] = pp.annotations
	}
	return json.Marshal(map[string]any{"metadata": meta})
}

// describe lists the keys and values of a patch for events.
func describePatch(labels, annotations map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, fmt.Sprintf("label %s=%q", k, labels[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(annotations)) {
		v := annotations[k]
		if len(v) > 120 {
			v = v[:120] + "…"
		}
		parts = append(parts, fmt.Sprintf("annotation %s=%q", k, v))
	}
	return strings.Join(parts, ", ")
}

// PreBind implements framework.PreBindPlugin: it calls the prebind of each
// policy of the pod's cycle, with the chosen node (docs/abi.md §3.3), and
// applies what the enforced policies wrote as one merge patch of the pod.
func (w *WasmPolicy) PreBind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	c := readCycle(state)
	if c == nil || !c.hasPreBind() {
		return nil
	}
	pp, st := w.collectPatch(ctx, c, nodeName)
	if st != nil || pp.empty() {
		return st
	}
	start := time.Now()
	err := w.patchPod(ctx, pod, pp)
	patchDuration.Observe(time.Since(start).Seconds())
	if err == nil {
		podPatches.WithLabelValues("Success").Inc()
		klog.FromContext(ctx).V(2).Info("Patched the pod for its policies", "pod", klog.KObj(pod), "node", nodeName, "patch", describePatch(pp.labels, pp.annotations))
		return nil
	}
	podPatches.WithLabelValues("Failed").Inc()
	what := fmt.Sprintf("patching the pod's labels and annotations for policies %s failed: %v", strings.Join(slices.Sorted(maps.Keys(invert(pp.by))), ", "), err)
	if len(pp.fail) > 0 {
		klog.FromContext(ctx).Error(err, "Pod patch failed; the pod is not bound and will be retried", "pod", klog.KObj(pod), "node", nodeName, "failurePolicyFail", pp.fail)
		return fwk.AsStatus(fmt.Errorf("%s: %s (failurePolicy Fail: %s)", Name, what, strings.Join(pp.fail, ", ")))
	}
	klog.FromContext(ctx).Error(err, "Pod patch failed; binding the pod without it (failurePolicy Ignore)", "pod", klog.KObj(pod), "node", nodeName)
	w.podEvent(pod, v1.EventTypeWarning, "WasmPolicyPatchFailed", "PreBind", fmt.Sprintf("%s: %s; bound without the patch (failurePolicy Ignore)", Name, what))
	return nil
}

// PreBindPatch is what PreBind would send for the pod of state's cycle,
// bound to the node Reserve was given: the merge patch (nil when no
// enforced policy writes anything), or the status that keeps the pod from
// being bound. Nothing is written: for tools and benchmarks.
func (w *WasmPolicy) PreBindPatch(ctx context.Context, state fwk.CycleState, nodeName string) ([]byte, *fwk.Status) {
	c := readCycle(state)
	if c == nil || !c.hasPreBind() {
		return nil, nil
	}
	pp, st := w.collectPatch(ctx, c, nodeName)
	if st != nil || pp.empty() {
		return nil, st
	}
	b, err := pp.body()
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	return b, nil
}

// collectPatch runs the prebind of the cycle's policies on the node kept
// at Reserve and merges what the enforced ones wrote.
func (w *WasmPolicy) collectPatch(ctx context.Context, c *cycleData, nodeName string) (*podPatch, *fwk.Status) {
	c.mu.Lock()
	node := c.bindNode
	c.mu.Unlock()
	if node == nil {
		return nil, fwk.AsStatus(fmt.Errorf("%s: the chosen node %s is not in the scheduler's snapshot", Name, nodeName))
	}
	var records [][3]string
	for i, p := range c.policies {
		if m := c.runs[i].module; m != nil {
			records = append(records, [3]string{p.cfg.Name, m.SHA256(), string(p.mode())})
		}
	}
	policies := host.EncodeCyclePolicies(records)
	pp := &podPatch{}
	defer func() { pp.audits.report(w, c.pod.Pod, "PreBind") }()
	for i, p := range c.policies {
		m := c.runs[i].module
		if m == nil || !m.Exports().Has(host.CallPreBind) {
			continue
		}
		pc := &host.PolicyCycle{}
		pc.State, pc.Policies = c.runs[i].pc.State, policies
		if st := w.preBindPolicy(ctx, p, m, c.pod, node, pc, pp); st != nil {
			return nil, st
		}
	}
	return pp, nil
}

func invert(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[v] = k
	}
	return out
}

// preBindPolicy runs one policy's prebind and adds its patch to pp, or
// returns the status that keeps the pod from being bound.
func (w *WasmPolicy) preBindPolicy(ctx context.Context, p *policy, m module, ps *host.PodState, node fwk.NodeInfo, pc *host.PolicyCycle, pp *podPatch) *fwk.Status {
	pod := ps.Pod
	enforce := !p.audit()
	logger := klog.FromContext(ctx)
	fail := func(why string) *fwk.Status {
		v := p.onFailure(host.CallPreBind, why, enforce)
		if v.Rejects() {
			return p.status(host.CallPreBind, v)
		}
		if enforce {
			w.podEvent(pod, v1.EventTypeWarning, "WasmPolicyPatchSkipped", "PreBind", fmt.Sprintf("%s/%s: %s; bound without this policy's patch (failurePolicy Ignore)", Name, p.cfg.Name, why))
		}
		return nil
	}
	start := time.Now()
	_, res, cerr := m.Call(ctx, host.CallPreBind, ps, node, pc, nil)
	p.m.observe(host.CallPreBind, start)
	if ns := p.cfg.Scope.Namespace; ns != "" && w.shares != nil {
		w.shares.of(ns).chargeCycle(time.Since(start))
	}
	if pc.Patch.Refused != "" && p.logRefusal() {
		logger.Info("Policy wrote a pod key it may not write; the write was refused", "policy", p.cfg.Name, "pod", klog.KObj(pod), "reason", pc.Patch.Refused,
			"fix", fmt.Sprintf("write keys under the policy's patchPrefixes %q, or add the prefix to policies[].patchPrefixes of policy %q (at most %d keys and %d bytes per pod)", p.cfg.PatchPrefixes, p.cfg.Name, abi.MaxPatchKeys, abi.MaxPatchBytes))
	}
	if cerr != nil {
		if _, ok := p.notStarted(ctx, host.CallPreBind, cerr, enforce); ok {
			// Binding was cancelled while the call waited: nothing to patch.
			return fwk.NewStatus(fwk.Error, fmt.Sprintf("%s/%s: prebind not started before its context ended; the pod will be retried", Name, p.cfg.Name))
		}
		_, why := p.outOfCycleFailure(ctx, pod, host.CallPreBind, cerr, enforce)
		return fail(why)
	}
	p.m.evaluated(host.CallPreBind, resultOf(res.Code))
	v, ok := verdict.Read(host.CallPreBind, res.Code, res.Reason)
	switch {
	case ok && !v.Rejects():
		if !enforce {
			if !pc.Patch.Empty() {
				p.m.audited(host.CallPreBind, ResultSuccess)
				pp.audits.add(ctx, pod, p, "would have patched the pod: "+describePatch(pc.Patch.Labels, pc.Patch.Annotations))
			}
			return nil
		}
		pp.add(p, &pc.Patch)
		return nil
	case ok:
		if !enforce {
			p.m.audited(host.CallPreBind, resultName(res.Code))
			pp.audits.add(ctx, pod, p, "would have kept the pod from being bound: "+orUnspecified(res.Reason))
			return nil
		}
		// A refusal is the policy's verdict, not a failure: whatever its
		// failurePolicy, the pod is not bound and waits, as a pod a
		// filter rejected does, for a cluster event or a new module.
		p.remember(pod)
		return p.status(host.CallPreBind, v)
	}
	why := v.Reason
	if pc.Patch.Refused != "" && !strings.Contains(res.Reason, pc.Patch.Refused) {
		why += " (" + pc.Patch.Refused + ")"
	}
	logger.Error(nil, "Policy returned an error", "policy", p.cfg.Name, "extensionPoint", host.CallPreBind.String(), "reason", res.Reason, "failurePolicy", p.cfg.FailurePolicy, "mode", modeOf(enforce))
	if !enforce {
		p.m.audited(host.CallPreBind, "Failure")
		pp.audits.add(ctx, pod, p, "failed: "+why)
		return nil
	}
	return fail(why)
}

// logRefusal reports whether a refused write may be logged now: the first,
// then at most one a minute per policy (the policy's error, when it
// returns one, reaches every pod anyway).
func (p *policy) logRefusal() bool {
	now := time.Since(refusalClock).Nanoseconds() + 1
	last := p.refusalLogged.Load()
	return (last == 0 || now-last >= int64(time.Minute)) && p.refusalLogged.CompareAndSwap(last, now)
}

var refusalClock = time.Now()

// metav1PatchOptions names wasmsched as the manager of the keys it writes
// (metadata.managedFields), so an audit can tell them from other writers'.
var metav1PatchOptions = metav1.PatchOptions{FieldManager: "wasmsched"}

// patchBackoff retries a pod patch on conflicts and transient errors: five
// tries over about a second, within the binding's context.
var patchBackoff = wait.Backoff{Steps: 5, Duration: 50 * time.Millisecond, Factor: 2, Jitter: 0.1}

// patchPod applies the policies' patch to the pod with one merge-patch
// request (more only when the apiserver answers a conflict or a transient
// error).
func (w *WasmPolicy) patchPod(ctx context.Context, pod *v1.Pod, pp *podPatch) error {
	if w.handle == nil || w.handle.ClientSet() == nil {
		return fmt.Errorf("no Kubernetes client")
	}
	body, err := pp.body()
	if err != nil {
		return err
	}
	retriable := func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) ||
			apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsTimeout(err)
	}
	return retry.OnError(patchBackoff, func(err error) bool { return retriable(err) && ctx.Err() == nil }, func() error {
		_, err := w.handle.ClientSet().CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, body, metav1PatchOptions)
		return err
	})
}

// podEvent records an Event on a pod, when the plugin has a recorder.
func (w *WasmPolicy) podEvent(pod *v1.Pod, typ, reason, action, note string) {
	if w.handle == nil || w.handle.EventRecorder() == nil {
		return
	}
	w.handle.EventRecorder().Eventf(pod, nil, typ, reason, action, "%s", note)
}
