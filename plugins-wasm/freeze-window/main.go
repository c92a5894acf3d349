// Command freeze-window is a wasmsched PreEnqueue policy: a change freeze.
// During the window it keeps the pods in its scope out of the scheduling
// queue, pending, unless a pod carries the approving annotation; when the
// window ends the scheduler checks them again and they schedule.
//
// Config (sdk.ParseConfig syntax):
//
//	start=<RFC 3339>    the window's start, required
//	end=<RFC 3339>      its end, required, after start
//	approval=<key>      the annotation that lets a pod through with the value "true"
//	                    (default freeze.wasmsched.io/approved)
//	reason=<text>       what the freeze is for, shown in the pod's event
//
// Which pods are frozen is the policy's scope (namespaceSelector,
// podSelector), not its config. It reads the time, so its args must set
// realClock: true; without it the policy sees the deterministic clock of
// 2022 and never freezes.
package main

import (
	"time"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

func init() { sdk.RegisterPreEnqueue(preEnqueue) }

// window is the parsed config, once per instance: a config never changes
// for a loaded policy.
type window struct {
	start, end time.Time
	approval   string
	reason     string
	err        string
}

var (
	parsed bool
	w      window
)

func load() *window {
	if parsed {
		return &w
	}
	parsed = true
	cfg := sdk.ParseConfig(sdk.Config())
	w.approval, w.reason = cfg["approval"], cfg["reason"]
	if w.approval == "" {
		w.approval = "freeze.wasmsched.io/approved"
	}
	var err1, err2 error
	w.start, err1 = time.Parse(time.RFC3339, cfg["start"])
	w.end, err2 = time.Parse(time.RFC3339, cfg["end"])
	switch {
	case err1 != nil:
		w.err = "config start=" + cfg["start"] + " is not an RFC 3339 time such as 2026-12-20T00:00:00Z"
	case err2 != nil:
		w.err = "config end=" + cfg["end"] + " is not an RFC 3339 time such as 2027-01-04T00:00:00Z"
	case !w.end.After(w.start):
		w.err = "config end=" + cfg["end"] + " is not after start=" + cfg["start"]
	}
	return &w
}

func preEnqueue(pod sdk.Pod) sdk.Status {
	w := load()
	if w.err != "" {
		return sdk.Error(w.err)
	}
	now := sdk.Now()
	if now.Before(w.start) || !now.Before(w.end) {
		return sdk.Success()
	}
	if v, _ := pod.Annotation(w.approval); v == "true" {
		return sdk.Success()
	}
	// Checked again when the pod is annotated, and when the window ends.
	sdk.Recheck(sdk.OnPodUpdate, w.end.Sub(now))
	what := "change freeze"
	if w.reason != "" {
		what += " (" + w.reason + ")"
	}
	return sdk.UnschedulableAndUnresolvable(what + " until " + w.end.UTC().Format(time.RFC3339) + "; to schedule the pod now, annotate it " + w.approval + "=true")
}

func main() {}
