package policyobjects

import (
	"context"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

// Policy is one policy the plugin built from an object's spec. It loads
// its module in the background (Run) and serves once published.
type Policy interface {
	// Name is the policy's name in reasons, logs, events and metrics.
	Name() string
	// Run reads the policy's module from its source and loads each
	// version until ctx ends, calling loaded after every load attempt.
	Run(ctx context.Context, loaded func())
	// Load is what loading has reached, for the object's status.
	Load() Load
	// Settled reports whether the first load has ended, in a module or in
	// a failure.
	Settled() bool
	// Retire stops the policy deciding (its breaker's timers) and sends
	// the pods it rejected or gated back to the scheduling queue: the
	// policy that replaces it, or none, may admit them.
	Retire()
	// Superseded is told that by now serves in the policy's place: the
	// series of a module that no longer serves go.
	Superseded(by Policy)
	// Close frees the policy's instances and compiled code; forget also
	// deletes its metric series (the object is gone).
	Close(forget bool)
	// Canary is what a canary policy (built with a canaryOf) judged so
	// far; zero for other policies.
	Canary() CanaryCounts
}

// CanaryCounts are what a canary judged beside its primary: scheduling
// cycles, cycles whose verdicts changed on some node, pods bound to a node
// it rejects, pods with no node it would have admitted somewhere, and the
// latest disagreements, newest first.
type CanaryCounts struct {
	Cycles, Changed, RejectedRunning, Unblocked int64
	// Failed cycles (counted in Changed too): the candidate's call
	// failed, or it was stopped (breaker, quarantine), or had no module.
	Failed   int64
	Examples []string
}

// Load is what a policy's loading has reached.
type Load struct {
	// Source is where the module comes from, for messages.
	Source string
	// SHA256 is the module the policy serves, "" before one loads.
	SHA256 string
	// Exports lists the extension points the serving module exports.
	Exports string
	// FailureReason and FailureMessage say why the last load or source
	// read failed; both are "" after a success. FailureReason is the
	// host's load reason or SourceError.
	FailureReason, FailureMessage string
}

// Plugin is the scheduler plugin that runs the objects' policies: one per
// scheduler profile that enables policy objects.
type Plugin interface {
	// Profile is the plugin's scheduler profile ("" outside a scheduler).
	Profile() string
	// Build makes a policy of spec, not started. spec passed the args'
	// validation. canaryOf, when set, makes it the canary of the serving
	// policy of that name: it runs in Audit right before it and compares
	// their verdicts (Policy.Canary).
	Build(ctx context.Context, spec config.Policy, canaryOf string) (Policy, error)
	// CanaryTransition counts a canary's transition (started, promoted,
	// dropped) in the plugin's metrics.
	CanaryTransition(policy, phase string)
	// HasArgsPolicy reports whether the plugin's args declare a policy
	// named name: a cluster policy may not take that name.
	HasArgsPolicy(name string) bool
	// Publish makes the args' policies followed by serving (ordered by
	// name) the set new scheduling cycles run.
	Publish(serving []Policy)
}
