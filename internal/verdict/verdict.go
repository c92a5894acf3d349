// Package verdict is the one reading of what a policy returned. It turns a
// guest's status at an extension point, or a failed call, into the
// framework status kube-scheduler acts on, with the policy's failurePolicy
// applied and the wording the FailedScheduling event shows. The scheduler
// plugin's extension points, Explain, case tables and the extender all read
// results through it, so a status code means the same thing everywhere.
//
// What each guest code means at each point is ABI (abi.Points' OnSkip and
// OnReject, and the result table of docs/abi.md generated from them); how
// the plugin words a verdict and what a failure becomes is the table Points
// here.
package verdict

import (
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
)

// Plugin is the framework plugin's name, which every status names as
// "WasmPolicy/<policy>".
const Plugin = "WasmPolicy"

// Verdict is one policy's decision at one extension point, before it is
// phrased as a framework status: the code and the policy's own reason (or
// why its call failed) without the "WasmPolicy/<policy>" wording Status
// adds. Tools show verdicts as they are; the plugin returns statuses.
type Verdict struct {
	Code   fwk.Code
	Reason string
	// Failure is true when the verdict is what the failurePolicy made of a
	// failed call or an Error status, rather than the policy's decision.
	Failure bool
}

// Pass lets the pod through: Success, or a failure that the failurePolicy
// (or Audit mode) ignores.
var Pass = Verdict{Code: fwk.Success}

// Skip is a policy sitting out the point that follows (its filter after a
// prefilter's Skip, its score after a prescore's).
var Skip = Verdict{Code: fwk.Skip}

// OK is true for Pass.
func (v Verdict) OK() bool { return v.Code == fwk.Success }

// Rejects is true for a verdict that stops the pod: anything but Pass and Skip.
func (v Verdict) Rejects() bool { return v.Code != fwk.Success && v.Code != fwk.Skip }

// Point is how the plugin phrases and fails verdicts at one extension point.
type Point struct {
	// Prefix and Suffix frame "WasmPolicy/<policy>" in a rejection's
	// message, which then gives the reason after ": ".
	Prefix, Suffix string
	// FailCode is what a failure becomes under failurePolicy Fail:
	// UnschedulableAndUnresolvable where a rejection keeps the pod from a
	// node, Error (the attempt fails and is retried) where none can.
	FailCode fwk.Code
	// FailPrefix frames a failure's message as Prefix frames a
	// rejection's; FailNote follows the failure's reason.
	FailPrefix, FailNote string
	// SaysNoReason gives a rejection without a reason "(no reason given)"
	// instead of leaving the reason out.
	SaysNoReason bool
}

// Points is the table of Point, indexed by extension point; batch forms
// read as the point they batch.
var Points = [abi.NumPoints]Point{
	abi.PreFilter:      {Prefix: "rejected by ", FailCode: fwk.UnschedulableAndUnresolvable, FailPrefix: "rejected by "},
	abi.Filter:         {Prefix: "node(s) rejected by ", FailCode: fwk.UnschedulableAndUnresolvable, FailPrefix: "node(s) rejected by "},
	abi.PreScore:       {FailCode: fwk.Error},
	abi.Score:          {FailCode: fwk.Error},
	abi.NormalizeScore: {FailCode: fwk.Error},
	abi.FilterNodes:    {Prefix: "node(s) rejected by ", FailCode: fwk.UnschedulableAndUnresolvable, FailPrefix: "node(s) rejected by "},
	abi.ScoreNodes:     {FailCode: fwk.Error},
	abi.PreEnqueue:     {Prefix: "gated by ", FailCode: fwk.UnschedulableAndUnresolvable, FailPrefix: "gated by "},
	// A failed prebind fails the binding, which kube-scheduler retries.
	abi.PreBind: {Suffix: " refused the binding to this node", SaysNoReason: true, FailCode: fwk.Error,
		FailNote: "; the pod is not bound and will be retried (failurePolicy Fail)"},
	// No node fit already: a rejection is a message added to the pod's,
	// and so is a failure under failurePolicy Fail.
	abi.PostFilter: {FailCode: fwk.Unschedulable},
	// The pod is bound: nothing can change, and a failure is only logged.
	abi.PostBind: {FailCode: fwk.Error},
	// A refused reservation undoes the placement; the pod is retried.
	abi.Reserve: {Suffix: " refused the placement on this node", SaysNoReason: true, FailCode: fwk.Error,
		FailNote: "; the placement is undone and the pod will be retried (failurePolicy Fail)"},
	// The placement is being undone already: a failure is only logged.
	abi.Unreserve: {FailCode: fwk.Error},
	// A refusal undoes the placement; so does a failure under Fail.
	abi.Permit: {SaysNoReason: true, FailCode: fwk.Error,
		FailNote: "; the placement is undone and the pod will be retried (failurePolicy Fail)"},
}

// Read turns a guest's status code and reason at point into a verdict.
// ok is false when the status is the policy's error (Error, an unknown
// code, or a code the point does not accept): the verdict is then Error
// with the reason "policy error: <reason>", which the caller logs and hands
// to Fail.
func Read(point abi.Point, code int32, reason string) (v Verdict, ok bool) {
	switch point.Read(code) {
	case abi.Passes:
		return Pass, true
	case abi.Skips:
		return Skip, true
	case abi.Rejects:
		if code == abi.CodeUnschedulable {
			return Verdict{Code: fwk.Unschedulable, Reason: reason}, true
		}
		return Verdict{Code: fwk.UnschedulableAndUnresolvable, Reason: reason}, true
	case abi.Informs:
		return Verdict{Code: fwk.Unschedulable, Reason: reason}, true
	case abi.Waits:
		return Verdict{Code: fwk.Wait, Reason: reason}, true
	case abi.RejectsUnresolvable:
		// Before any node (prefilter), out of the queue (preenqueue) or
		// after the node was chosen (prebind): preemption cannot help.
		return Verdict{Code: fwk.UnschedulableAndUnresolvable, Reason: reason}, true
	}
	if reason == "" {
		reason = "(no reason given)"
	}
	if code == abi.CodeWait {
		reason = "status Wait (4) is Permit's alone: " + reason
	}
	return Verdict{Code: fwk.Error, Reason: "policy error: " + reason}, false
}

// Fail applies a failurePolicy to a failure at point (a failed call, or
// the policy's error), why saying what failed: Ignore (ignore) passes the
// pod, Fail gives the point's FailCode.
func Fail(point abi.Point, ignore bool, why string) Verdict {
	if ignore {
		return Pass
	}
	return Verdict{Code: Points[point].FailCode, Reason: why, Failure: true}
}

// Status phrases v as policy's framework status at point, as the in-tree
// plugins phrase their reasons, so that the FailedScheduling event reads
// "3 node(s) rejected by WasmPolicy/<policy>: <reason>". A verdict that
// does not reject has no status (nil).
func Status(point abi.Point, policy string, v Verdict) *fwk.Status {
	if !v.Rejects() {
		return nil
	}
	return fwk.NewStatus(v.Code, Message(point, policy, v))
}

// Message is Status's message.
func Message(point abi.Point, policy string, v Verdict) string {
	pt := &Points[point]
	name := Plugin + "/" + policy
	if v.Failure {
		return pt.FailPrefix + name + ": " + v.Reason + pt.FailNote
	}
	msg := pt.Prefix + name + pt.Suffix
	switch {
	case v.Reason != "":
		msg += ": " + v.Reason
	case pt.SaysNoReason:
		msg += ": (no reason given)"
	}
	return msg
}
