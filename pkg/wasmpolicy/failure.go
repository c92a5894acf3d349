package wasmpolicy

import (
	"context"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/verdict"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

// status phrases a verdict of policy p at point as its framework status
// (nil for a verdict that does not reject); verdict.Points has the wording.
func (p *policy) status(point host.CallKind, v verdict.Verdict) *fwk.Status {
	if !v.Rejects() {
		return nil
	}
	return fwk.NewStatus(v.Code, p.message(point, v))
}

// messageKey is what a status message is made of besides the policy.
type messageKey struct {
	point   host.CallKind
	failure bool
	reason  string
}

// messageEntry is one kept message.
type messageEntry struct {
	key messageKey
	msg string
}

// maxMessages bounds the messages a policy keeps: a guest's reasons are a
// few fixed strings, or strings of their own per node, which are not kept.
const maxMessages = 64

// message is verdict.Message for the policy, kept per reason: a Filter
// that rejects most of 1000 nodes for one reason built the same three
// concatenations for each (BenchmarkCycle: a third of WasmPolicy.Filter).
// The kept messages are a list replaced as a whole, scanned without a
// lock: a policy has a few, and the reason strings of one guest's
// verdicts share their bytes, so a compare is a pointer compare. A
// sync.Map hashed the key's interface on every node (6% of a 1000-node
// cycle).
func (p *policy) message(point host.CallKind, v verdict.Verdict) string {
	k := messageKey{point, v.Failure, v.Reason}
	kept := p.messages.Load()
	if kept != nil {
		for i := range *kept {
			if e := &(*kept)[i]; e.key == k {
				return e.msg
			}
		}
	}
	m := verdict.Message(point, p.cfg.Name, v)
	if kept == nil || len(*kept) < maxMessages {
		p.messagesMu.Lock()
		cur := p.messages.Load()
		if cur == nil || len(*cur) < maxMessages && !slices.ContainsFunc(*cur, func(e messageEntry) bool { return e.key == k }) {
			var next []messageEntry
			if cur != nil {
				next = append(next, *cur...)
			}
			next = append(next, messageEntry{k, m})
			p.messages.Store(&next)
		}
		p.messagesMu.Unlock()
	}
	return m
}

// onFailure applies the failurePolicy to a failed call or an Error status.
// enforce is false for a policy in Audit mode: then nothing fails, and the
// failure is counted as an audited verdict.
func (p *policy) onFailure(point host.CallKind, why string, enforce bool) verdict.Verdict {
	if !enforce {
		p.m.ignoredCall(point)
		p.m.audited(point, "Failure")
		return verdict.Pass
	}
	v := verdict.Fail(point, p.cfg.FailurePolicy == config.FailurePolicyIgnore, why)
	if v.OK() {
		p.m.ignoredCall(point)
	}
	return v
}

// read counts a guest's result at point and reads it (readCounted).
func (p *policy) read(ctx context.Context, point host.CallKind, res host.Result, enforce bool, audit func(reason string)) verdict.Verdict {
	p.m.evaluated(point, resultOf(res.Code))
	return p.readCounted(ctx, point, res, enforce, audit)
}

// readCounted reads a guest's result at point that was counted already (a
// batch counts its nodes' results once: countBatch) with verdict.Read: a
// rejection by a policy in Audit mode is handed to audit (when not nil)
// and passes; the policy's error goes to its failurePolicy.
func (p *policy) readCounted(ctx context.Context, point host.CallKind, res host.Result, enforce bool, audit func(reason string)) verdict.Verdict {
	v, ok := verdict.Read(point, res.Code, res.Reason)
	if !ok {
		if !enforce && p.canary != nil && audit != nil {
			// A canary's error is a verdict against it: it would fail
			// the node once it enforces.
			audit("policy error: " + v.Reason)
		}
		return p.policyError(ctx, point, v.Reason, enforce)
	}
	if v.Rejects() && !enforce {
		p.m.audited(point, resultName(res.Code))
		if audit != nil {
			audit(res.Reason)
		}
		return verdict.Pass
	}
	return v
}

// callFailed counts, logs and applies the failurePolicy to a failed call of
// policy p (index i) in cycle c. The first failure of the cycle (a timeout,
// trap, exit or spent budget) stops the policy for the rest of it: it is
// logged once, counted once by the breaker, and its reason, with the
// breaker's state and the fix, becomes the one every node left gets.
func (p *policy) callFailed(ctx context.Context, c *cycleData, i int, point host.CallKind, err *host.CallError, enforce bool) verdict.Verdict {
	// A call stopped because another of the cycle's calls failed reports
	// that call's cause: the machine's overload is nobody's failure.
	starved := err
	if first, ok := err.Err.(*host.CallError); ok && err.Outcome == host.OutcomeStopped {
		starved = first
	}
	if v, ok := p.notStarted(ctx, point, starved, enforce); ok {
		if v.Rejects() {
			c.notEvaluated.Store(true)
		}
		if p.canary != nil {
			c.canaryIncomplete(i) // a node it did not judge
		}
		return v
	}
	if err.Outcome == host.OutcomeUnavailable {
		// No instance or no such export: not the guest's doing, not counted.
		p.m.evaluated(point, resultOfOutcome(err.Outcome))
		klog.FromContext(ctx).Error(err.Err, "Policy call failed", "policy", p.cfg.Name, "extensionPoint", point.String(), "outcome", err.Outcome.String(), "failurePolicy", p.cfg.FailurePolicy, "mode", modeOf(enforce))
		return p.onFailure(point, err.Error(), enforce)
	}
	cause := err
	if err.Outcome == host.OutcomeStopped {
		p.m.evaluated(point, rNotCalled)
		if first, ok := err.Err.(*host.CallError); ok {
			cause = first
		}
	} else {
		p.m.evaluated(point, resultOfOutcome(err.Outcome))
	}
	c.mu.Lock()
	why := c.runs[i].stopped
	first := why == ""
	if first {
		why = p.stopReason(cause, c.pod.Pod, p.replacedSince(c, i))
		c.runs[i].stopped = why
	}
	c.mu.Unlock()
	if first {
		p.m.stoppedCycle(results[resultOfOutcome(cause.Outcome)])
		klog.FromContext(ctx).Error(cause.Err, "Policy call failed; not calling the policy again in this scheduling cycle", "pod", klog.KObj(c.pod.Pod), "policy", p.cfg.Name, "extensionPoint", point.String(), "outcome", cause.Outcome.String(), "failurePolicy", p.cfg.FailurePolicy, "mode", modeOf(enforce), "reason", why)
	}
	return p.onFailure(point, why, enforce)
}

// stopReason phrases the failure that stopped the policy in a cycle,
// quarantines the pod, records the failure with the breaker, and says how
// to fix it. A failure of a module that a new one replaced while the call
// ran quarantines nothing and counts nothing: the load ended every
// quarantine and reset the breaker, and the old module's failure must not
// hold a pod against the new one.
func (p *policy) stopReason(cause *host.CallError, pod *v1.Pod, replaced bool) string {
	what, fix := cause.Error(), "fix the policy"
	switch cause.Outcome {
	case host.OutcomeTimeout:
		what, fix = fmt.Sprintf("policy call exceeded its timeout of %s", p.cfg.Timeout), "fix the policy or raise its timeout"
	case host.OutcomeBudget:
		fix = "fix the policy or raise its cycleBudget"
	}
	if replaced {
		return what + "; the module was replaced while the call ran: the next cycle calls the new one"
	}
	return what + "; " + p.quarantineFor(pod, what) + "; " + fix
}

// replacedSince reports whether policy i's module is no longer the one
// cycle c runs.
func (p *policy) replacedSince(c *cycleData, i int) bool {
	cur := p.runtime.Current()
	return c.runs[i].module != nil && cur != nil && c.runs[i].module.SHA256() != cur.SHA256()
}

// quarantineFor quarantines pod after the policy failed on it with what,
// counts the failure with the breaker, and says both for the pod's status.
func (p *policy) quarantineFor(pod *v1.Pod, what string) string {
	in := inputOf(pod)
	period := p.quarantine.add(pod, in, what)
	p.m.setQuarantined(p.quarantine.size())
	why := fmt.Sprintf("the pod (and pods like it) is quarantined for %s: the policy is not called for it until then or until a new module loads", period)
	if note := p.breaker.failed(what, pod, in); note != "" {
		why += "; " + note
	}
	return why
}

// policyError handles a guest's status that is the policy's error at point
// (verdict.Read's "policy error: …" why). The evaluation was already counted.
func (p *policy) policyError(ctx context.Context, point host.CallKind, why string, enforce bool) verdict.Verdict {
	klog.FromContext(ctx).Error(nil, "Policy returned an error", "policy", p.cfg.Name, "extensionPoint", point.String(), "reason", why, "failurePolicy", p.cfg.FailurePolicy, "mode", modeOf(enforce))
	return p.onFailure(point, why, enforce)
}

func modeOf(enforce bool) config.Mode {
	if enforce {
		return config.ModeEnforce
	}
	return config.ModeAudit
}

func notLoaded(p *policy) string {
	if why := p.loadError.Load(); why != nil {
		return "policy has no module loaded (" + p.source.String() + "): " + *why
	}
	return "policy has no module loaded (" + p.source.String() + ")"
}

func loading(p *policy) string {
	return "policy is loading its module (" + p.source.String() + "); the pod is retried when it has loaded"
}

// notStarted handles a call that never started because its context ended
// while it waited for a CPU or an instance (host.ErrNotStarted), or that
// reached its deadline with almost no CPU (host.ErrStarved): the
// scheduler's overload, or a cycle that no longer needs the answer, never
// the policy's failure. It is counted as NotCalled, neither the
// failurePolicy nor the breaker nor the quarantine sees it, and the
// verdict holds only where a verdict is needed: a Filter node not
// evaluated is Unschedulable (kube-scheduler cancels the Filter calls
// still waiting once it has found enough nodes, and ignores their
// statuses), and a pod not let in by a gate waits for its recheck. A
// policy in Audit mode lets the pod through, as always.
// notStartedVerdict rejects a node (or the pod) whose call got no CPU in
// time: not the policy's decision, so a canary does not compare it.
var notStartedVerdict = verdict.Verdict{Code: fwk.Unschedulable, Reason: "not evaluated: the policy's call got no CPU in time (scheduler overload, not the policy's failure); retried"}

func (p *policy) notStarted(ctx context.Context, point host.CallKind, err *host.CallError, enforce bool) (verdict.Verdict, bool) {
	if err.Outcome != host.OutcomeUnavailable || !errors.Is(err.Err, host.ErrNotStarted) && !errors.Is(err.Err, host.ErrStarved) {
		return verdict.Verdict{}, false
	}
	p.m.evaluated(point, rNotCalled)
	klog.FromContext(ctx).V(4).Info("Policy call not started before its context ended", "policy", p.cfg.Name, "extensionPoint", point.String(), "reason", err.Err.Error())
	switch {
	case !enforce:
		return verdict.Pass, true
	case point == host.CallFilter, point == host.CallPreFilter, point == host.CallPreEnqueue:
		return notStartedVerdict, true
	}
	return verdict.Pass, true
}
