// Package rollout answers, before a policy version goes live, what it would
// change: on one snapshot of the cluster it runs the scheduler profile's
// framework twice, once with the policy set the scheduler runs and once
// with one policy replaced by its candidate, and reports the running pods
// the candidate rejects where they run, the pending pods whose verdicts
// change, where a sample of bound pods would be placed by each set, and
// what the policy costs per node in each version.
//
// The report's JSON is a stable interface (apiVersion rollout.wasmsched.io/v1alpha1,
// documented field by field in docs/rollout.md): CI pipelines read it.
// Fields are only ever added.
package rollout

// APIVersion and Kind identify the report's JSON.
const (
	APIVersion = "rollout.wasmsched.io/v1alpha1"
	Kind       = "RolloutReport"
)

// Report is what replacing one policy by its candidate would change on one
// snapshot of the cluster.
type Report struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Policy is the policy the candidate replaces; Profile the scheduler
	// profile (schedulerName) whose framework ran.
	Policy  string `json:"policy"`
	Profile string `json:"profile"`
	// Current and Candidate are the two versions of the policy.
	Current   Version `json:"current"`
	Candidate Version `json:"candidate"`
	// Snapshot is the state of the cluster the report is about.
	Snapshot SnapshotInfo `json:"snapshot"`
	// NotEvaluated names the profile's plugins this tool does not have
	// (out-of-tree plugins other than WasmPolicy): placements and
	// feasibility are computed without them.
	NotEvaluated []string `json:"notEvaluated,omitempty"`
	// Summary counts what the sections below list.
	Summary Summary `json:"summary"`
	// RejectedRunning are the running pods the candidate rejects on the
	// node they run on, ordered by namespace and name.
	RejectedRunning []RunningPod `json:"rejectedRunning"`
	// RejectedRunningGroups count RejectedRunning by namespace, team and
	// reason, largest first.
	RejectedRunningGroups []Group `json:"rejectedRunningGroups"`
	// Pending are the pending pods whose verdicts change, ordered by
	// namespace and name.
	Pending []PendingPod `json:"pending"`
	// Placements compares where each set would place a sample of the
	// most recently bound pods.
	Placements Placements `json:"placements"`
	// Cost is the policy's guest time per node in each version.
	Cost Cost `json:"cost"`
	// DurationSeconds is how long the report took, snapshot excluded, to
	// the millisecond.
	DurationSeconds float64 `json:"durationSeconds"`
}

// Version is one version of the policy.
type Version struct {
	// SHA256 is the module's digest.
	SHA256 string `json:"sha256"`
	// Source is where the module came from.
	Source string `json:"source"`
	// Config is the policy's config string.
	Config string `json:"config"`
	// Mode is Enforce or Audit.
	Mode string `json:"mode"`
}

// SnapshotInfo describes the snapshot.
type SnapshotInfo struct {
	// ResourceVersion is the apiserver's resourceVersion every list was
	// read at ("" for a snapshot read from files).
	ResourceVersion string `json:"resourceVersion,omitempty"`
	// TakenAt is when it was read, RFC 3339.
	TakenAt string `json:"takenAt"`
	Nodes   int    `json:"nodes"`
	// RunningPods and PendingPods are the profile's pods: bound and not
	// ended, and not bound. Pods of other schedulers and pods being
	// deleted are not counted.
	RunningPods int `json:"runningPods"`
	PendingPods int `json:"pendingPods"`
}

// Summary counts the report's findings; --fail-on gates read these names.
type Summary struct {
	// RejectedRunning: running pods the candidate rejects where they run.
	RejectedRunning int `json:"rejectedRunning"`
	// RejectedRunningAlready: of those, the ones the current version
	// rejects too (placed before it, or by another path).
	RejectedRunningAlready int `json:"rejectedRunningAlready"`
	// NewlySchedulable: pending pods with no feasible node now and some
	// with the candidate.
	NewlySchedulable int `json:"newlySchedulable"`
	// NewlyStranded: pending pods with feasible nodes now and none with
	// the candidate.
	NewlyStranded int `json:"newlyStranded"`
	// ChangedPending: pending pods whose verdicts change in any way
	// (these two included).
	ChangedPending int `json:"changedPending"`
	// SampledPlacements and MovedPlacements: bound pods placed again by
	// both sets, and those the candidate would place elsewhere.
	SampledPlacements int `json:"sampledPlacements"`
	MovedPlacements   int `json:"movedPlacements"`
}

// RunningPod is a running pod the candidate rejects on its node.
type RunningPod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Node      string `json:"node"`
	// Team is the pod's value of the team label ("" without one).
	Team string `json:"team"`
	// Verdict and Reason are the candidate's: Unschedulable or
	// UnschedulableAndUnresolvable, and why.
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
	// Current is the current version's verdict there: Pass, or its own
	// rejection (the pod already breaks the current version).
	Current string `json:"current"`
}

// Group counts rejected running pods of one namespace, team and reason.
type Group struct {
	Namespace string `json:"namespace"`
	Team      string `json:"team"`
	Reason    string `json:"reason"`
	Pods      int    `json:"pods"`
}

// Change kinds of a pending pod.
const (
	ChangeNewlySchedulable = "NewlySchedulable"
	ChangeNewlyStranded    = "NewlyStranded"
	ChangeMoreNodes        = "MoreNodes"
	ChangeFewerNodes       = "FewerNodes"
	ChangeReasons          = "ReasonsChanged"
)

// PendingPod is a pending pod whose verdicts change.
type PendingPod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Team      string `json:"team"`
	// Change is NewlySchedulable, NewlyStranded, MoreNodes, FewerNodes or
	// ReasonsChanged (same feasible nodes, other reasons).
	Change    string      `json:"change"`
	Current   Feasibility `json:"current"`
	Candidate Feasibility `json:"candidate"`
}

// Feasibility is one set's verdict on a pending pod over every node.
type Feasibility struct {
	// FeasibleNodes pass every filter of the profile.
	FeasibleNodes int `json:"feasibleNodes"`
	// Message is what FailedScheduling would say when no node is
	// feasible ("0/6 nodes are available: …"), else "".
	Message string `json:"message,omitempty"`
	// PolicyRejects are the policy's own rejections, by reason, with
	// the number of nodes; empty when it rejects no node.
	PolicyRejects []ReasonCount `json:"policyRejects"`
}

// ReasonCount is a reason and how many nodes gave it.
type ReasonCount struct {
	Reason string `json:"reason"`
	Nodes  int    `json:"nodes"`
}

// Placements compares where each set would place bound pods.
type Placements struct {
	// Eligible are the running pods that could be sampled; Sampled were
	// placed again, the most recently bound first.
	Eligible int `json:"eligible"`
	Sampled  int `json:"sampled"`
	Moved    int `json:"moved"`
	// Truncated is true when the time bound (--placement-time) stopped
	// the sampling before the sample size.
	Truncated bool `json:"truncated"`
	// Pods are the sampled pods, ordered by namespace and name.
	Pods []Placement `json:"pods"`
}

// Placement is where each set would place one bound pod, taken off its
// node, with every other pod where it is.
type Placement struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// BoundNode is where the pod runs.
	BoundNode string `json:"boundNode"`
	Current   Choice `json:"current"`
	Candidate Choice `json:"candidate"`
	// Moved is true when the candidate's best nodes are not the current
	// set's: the pod would be placed among other nodes.
	Moved bool `json:"moved"`
	// ScoreDelta is the candidate's total score of the current set's best
	// nodes minus the current set's (the least over them when they tie):
	// how far the current choice's score moved. Absent when the current
	// set finds no feasible node or the candidate rejects one of them.
	ScoreDelta *int64 `json:"scoreDelta,omitempty"`
}

// Choice is one set's placement of a pod: the nodes with the highest total
// score. The scheduler picks one of them at random.
type Choice struct {
	// Nodes are the best nodes, by name; empty when no node is feasible.
	Nodes []string `json:"nodes"`
	// Score is their total score (all score plugins, weighted).
	Score         int64 `json:"score"`
	FeasibleNodes int   `json:"feasibleNodes"`
}

// Cost is the policy's guest time per node, in each version, over every
// node evaluation of the report (running pods on their nodes, pending and
// sampled pods on every node), verdict reuse included as the scheduler has
// it.
type Cost struct {
	Current   PolicyCost `json:"current"`
	Candidate PolicyCost `json:"candidate"`
	// FilterRatio is the candidate's filter time per node over the
	// current's (0 when either is not measured).
	FilterRatio float64 `json:"filterRatio"`
}

// PolicyCost is one version's time per node.
type PolicyCost struct {
	// FilterCalls is how many node evaluations the mean is over.
	FilterCalls        int     `json:"filterCalls"`
	FilterNanosPerNode float64 `json:"filterNanosPerNode"`
	ScoreCalls         int     `json:"scoreCalls"`
	ScoreNanosPerNode  float64 `json:"scoreNanosPerNode"`
}
