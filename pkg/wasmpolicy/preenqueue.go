package wasmpolicy

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/verdict"
)

// PreEnqueue implements framework.PreEnqueuePlugin: it asks the preenqueue
// of each policy whose scope takes the pod (docs/abi.md §3.3), in order,
// and gates the pod at the first that rejects it. kube-scheduler calls it
// with its scheduling queue locked, so each call runs under the policy's
// preEnqueueTimeout, and a policy without a module, or without a
// preenqueue, costs nothing.
func (w *WasmPolicy) PreEnqueue(ctx context.Context, pod *v1.Pod) *fwk.Status {
	var ps *host.PodState
	var audits auditNotes
	defer func() { audits.report(w, pod, "PreEnqueue") }()
	policies := w.current().forPod(pod, w.nsLabels)
	if d, why := w.shareHeld(pod, policies, true); d > 0 {
		// Held without calling any guest, and rechecked by its timer only
		// once the share has refilled (cluster events would requeue it
		// under the queue's lock for nothing).
		if !w.gates.gatedBy(pod.UID, shareGate) {
			// One Event per wait, not per recheck: a held pod is
			// checked again at its turn, and may wait again.
			w.shareEvent(pod, "PreEnqueue", why)
		}
		w.gates.gateBy(pod, shareGate, host.Recheck{After: d})
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, why)
	}
	for _, p := range policies {
		m := p.runtime.Current()
		if m == nil || !m.Exports().Has(host.CallPreEnqueue) {
			// A policy still loading its first module holds the pod at
			// PreFilter, which retries it when the load ends.
			continue
		}
		if ps == nil {
			ps = host.NewPodState(pod)
		}
		v, recheck := w.preEnqueuePolicy(ctx, p, m, ps, &audits)
		if !v.Rejects() {
			continue
		}
		w.gates.gate(pod, p, recheck)
		p.remember(pod) // a new module or config rechecks it
		msg := p.status(host.CallPreEnqueue, v).Message()
		w.gatedEvent(pod, p, msg)
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	w.gates.release(pod.UID)
	return nil
}

// preEnqueuePolicy runs one policy's preenqueue for pod and returns its
// verdict (a rejection gates the pod) and when to check a gated pod again.
// An audited policy's rejection is reported and passes.
func (w *WasmPolicy) preEnqueuePolicy(ctx context.Context, p *policy, m module, ps *host.PodState, audits *auditNotes) (verdict.Verdict, host.Recheck) {
	enforce := !p.audit()
	pod := ps.Pod
	if why, until := p.quarantine.holds(pod); why != "" {
		p.m.evaluated(host.CallPreEnqueue, rNotCalled)
		p.m.stoppedCycle(reasonQuarantined)
		v := p.onFailure(host.CallPreEnqueue, why+"; fix the policy for pods like this one, or raise its preEnqueueTimeout; the pod is checked again when the quarantine ends or a new module loads", enforce)
		return v, host.Recheck{Events: abi.RecheckAll, After: max(time.Second, time.Until(until))}
	}
	pc := &host.PolicyCycle{}
	// The queue is locked: waiting for a CPU or an instance counts
	// against the call's timeout too.
	callCtx, cancel := context.WithTimeout(ctx, p.preEnqueueTimeout())
	start := time.Now()
	_, res, cerr := m.Call(callCtx, host.CallPreEnqueue, ps, nil, pc, nil)
	cancel()
	p.m.observe(host.CallPreEnqueue, start)
	if ns := p.cfg.Scope.Namespace; ns != "" && w.shares != nil {
		w.shares.of(ns).chargeGate(time.Since(start))
	}
	if cerr != nil {
		if v, ok := p.notStarted(ctx, host.CallPreEnqueue, cerr, enforce); ok {
			return v, busyRecheck
		}
		v, _ := p.outOfCycleFailure(ctx, pod, host.CallPreEnqueue, cerr, enforce)
		return v, failureRecheck
	}
	recheck := host.DefaultRecheck
	if pc.RecheckSet {
		recheck = pc.Recheck
	}
	v := p.read(ctx, host.CallPreEnqueue, res, enforce, func(reason string) {
		audits.add(ctx, pod, p, "would have gated the pod: "+orUnspecified(reason))
	})
	if v.Failure {
		recheck = failureRecheck
	}
	return v, recheck
}

// failureRecheck is when a pod that a failed preenqueue call gated (under
// failurePolicy Fail) is checked again: on any event, and after a few
// seconds, as kube-scheduler backs off a pod whose plugin failed.
var failureRecheck = host.Recheck{Events: abi.RecheckAll, After: 5 * time.Second}

// busyRecheck is when a pod whose preenqueue could not start (no CPU free
// within preEnqueueTimeout: a gate has a CPU of its own, so only when
// gates overlap) is checked again: after a second, since nothing failed,
// and not on cluster events, which do not free a CPU and would requeue
// it, under the queue's lock, once for every pod bound meanwhile. A pod a
// scheduling cycle could not evaluate is retried after the same delay.
var busyRecheck = host.Recheck{After: time.Second}

// outOfCycleFailure handles a failed call at PreEnqueue or PreBind, which
// belong to no scheduling cycle's budget: it is counted and logged, the
// pod is quarantined, and the policy's failurePolicy decides. It returns that verdict and why the call
// failed (which an ignored failure's verdict does not carry). The circuit
// breaker is the scheduling cycle's: a gate's or a patch's calls neither
// open it nor close it (a gate passing pods whose Filter loops would close
// it after every probe), and each of their failures costs at most its
// timeout.
func (p *policy) outOfCycleFailure(ctx context.Context, pod *v1.Pod, point host.CallKind, cerr *host.CallError, enforce bool) (verdict.Verdict, string) {
	p.m.evaluated(point, resultOfOutcome(cerr.Outcome))
	if cerr.Outcome == host.OutcomeUnavailable {
		klog.FromContext(ctx).Error(cerr.Err, "Policy call failed", "pod", klog.KObj(pod), "policy", p.cfg.Name, "extensionPoint", point.String(), "outcome", cerr.Outcome.String(), "failurePolicy", p.cfg.FailurePolicy, "mode", modeOf(enforce))
		return p.onFailure(point, cerr.Error(), enforce), cerr.Error()
	}
	if cerr.Outcome == host.OutcomeTimeout {
		p.m.overrun.Observe(cerr.Late.Seconds())
	}
	what, fix := cerr.Error(), "fix the policy"
	if cerr.Outcome == host.OutcomeTimeout {
		limit := p.cfg.Timeout
		field := "timeout"
		if point == host.CallPreEnqueue {
			limit, field = p.preEnqueueTimeout(), "preEnqueueTimeout"
		}
		what, fix = fmt.Sprintf("policy call exceeded its %s of %s", field, limit), "fix the policy or raise its "+field
	}
	why := what + "; " + fix
	if cerr.Outcome != host.OutcomeStopped {
		// Quarantined, so the pod's next PreEnqueue, or its next cycle,
		// does not pay the failure again; not counted by the breaker.
		period := p.quarantine.add(pod, inputOf(pod), what)
		p.m.setQuarantined(p.quarantine.size())
		why = fmt.Sprintf("%s; the pod (and pods like it) is quarantined for %s: the policy is not called for it until then or until a new module loads; %s", what, period, fix)
	}
	klog.FromContext(ctx).Error(cerr.Err, "Policy call failed", "pod", klog.KObj(pod), "policy", p.cfg.Name, "extensionPoint", point.String(), "outcome", cerr.Outcome.String(), "failurePolicy", p.cfg.FailurePolicy, "mode", modeOf(enforce), "reason", why)
	return p.onFailure(point, why, enforce), why
}

// preEnqueueTimeout is the policy's preenqueue timeout, defaulted.
func (p *policy) preEnqueueTimeout() time.Duration {
	return host.PreEnqueueTimeout(p.cfg.Timeout, p.cfg.PreEnqueueTimeout)
}

// gatedEvent tells the pod's owner why it waits: an Event on the pod, as
// kube-scheduler reports FailedScheduling. The event recorder aggregates
// repeats of the same message.
func (w *WasmPolicy) gatedEvent(pod *v1.Pod, p *policy, msg string) {
	if w.handle == nil || w.handle.EventRecorder() == nil {
		return
	}
	w.handle.EventRecorder().Eventf(pod, nil, v1.EventTypeNormal, "WasmPolicyGated", "PreEnqueue", "%s; the pod stays pending until the policy lets it in", msg)
}

// auditNotes collects what the audited policies of one extension point
// would have done to one pod, reported as one Event. kube-scheduler's
// event recorder folds the Events of one object with the same reason and
// action into a series that keeps the first note, so an Event per policy
// would show only the first policy's verdict.
type auditNotes []string

// add logs an audited policy's verdict and keeps it for the Event.
func (a *auditNotes) add(ctx context.Context, pod *v1.Pod, p *policy, msg string) {
	klog.FromContext(ctx).Info("Audited policy verdict", "policy", p.cfg.Name, "pod", klog.KObj(pod), "verdict", msg)
	*a = append(*a, fmt.Sprintf("WasmPolicy/%s (Audit) %s", p.cfg.Name, msg))
}

// maxEventNote is the longest note events.k8s.io/v1 accepts (1 kB).
const maxEventNote = 1000

// report emits the notes as one Normal WasmPolicyAudit Event on the pod.
func (a auditNotes) report(w *WasmPolicy, pod *v1.Pod, action string) {
	if len(a) == 0 || w.handle == nil || w.handle.EventRecorder() == nil {
		return
	}
	note := strings.Join(a, "; ")
	if len(note) > maxEventNote {
		note = strings.ToValidUTF8(note[:maxEventNote-3], "") + "…"
	}
	w.handle.EventRecorder().Eventf(pod, nil, v1.EventTypeNormal, "WasmPolicyAudit", action, "%s", note)
}
