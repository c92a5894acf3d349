package casetable

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host"
)

// Report is the outcome of running a case table against a module.
type Report struct {
	// Exports are the module's entry points.
	Exports string `json:"exports"`
	// FailurePolicy is the one the cases' statuses apply (the table's,
	// Fail when it names none).
	FailurePolicy string `json:"failurePolicy"`
	// Batches says which batch forms were checked against the single forms.
	Batches []string `json:"batches,omitempty"`
	Cases   []Case   `json:"cases"`
	// Disagreements are the (pod, node) pairs where a batch form and its
	// single form differ, over every case's pod on every case's node.
	Disagreements []string `json:"disagreements,omitempty"`
	// Size and LoadDuration describe the module RunModule loaded (zero
	// after Run).
	Size         int           `json:"-"`
	LoadDuration time.Duration `json:"-"`
	// TableBatches is how many batch calls RunModule's module served from
	// its node table (ABI v2).
	TableBatches int64 `json:"-"`
}

// Failed reports whether any case failed or any batch disagreed.
func (r *Report) Failed() bool {
	if len(r.Disagreements) > 0 {
		return true
	}
	for _, c := range r.Cases {
		if !c.Passed() {
			return true
		}
	}
	return false
}

// Case is one case's outcome on its own node.
type Case struct {
	Name string `json:"name"`
	Node string `json:"node"`
	// Filter is the verdict (prefilter, then filter), "" when the case
	// expects none; Score the raw score, when the case expects one.
	Filter string `json:"filter,omitempty"`
	Score  *int64 `json:"score,omitempty"`
	// Status is the case's node's status after a scheduling cycle of the
	// case's pod through the WasmPolicy plugin with the module as its one
	// policy (kube-scheduler's framework, the table's failurePolicy, a
	// PreFilter result applied): "Success", or the status's code and
	// message as the pod's FailedScheduling event shows it.
	Status string `json:"status,omitempty"`
	// FailurePolicyApplied is true when the verdict is the policy's error,
	// so Status is the failurePolicy's doing.
	FailurePolicyApplied bool `json:"failurePolicyApplied,omitempty"`
	// Nodes are a case with several nodes' outcomes, one per node: its
	// verdict and, when it passed, its final score.
	Nodes []NodeOutcome `json:"nodes,omitempty"`
	// PreEnqueue is the gate's verdict and PreBind the prebind's verdict
	// and patch, when the case expects them.
	PreEnqueue string `json:"preEnqueue,omitempty"`
	PreBind    string `json:"preBind,omitempty"`
	PostFilter string `json:"postFilter,omitempty"`
	PostBind   string `json:"postBind,omitempty"`
	Reserve    string `json:"reserve,omitempty"`
	Permit     string `json:"permit,omitempty"`
	// Problems say how the case failed; empty when it passed.
	Problems []string `json:"problems,omitempty"`
}

// NodeOutcome is one node of a case with several nodes.
type NodeOutcome struct {
	Node   string `json:"node"`
	Filter string `json:"filter"`
	// Status and FailurePolicyApplied are as in Case.
	Status               string `json:"status"`
	FailurePolicyApplied bool   `json:"failurePolicyApplied,omitempty"`
	Score                *int64 `json:"score,omitempty"`
	// Problems are the case's expectations this node's verdict or score
	// missed (also among the case's Problems).
	Problems []string `json:"problems,omitempty"`
}

// Passed reports whether the case's expectations held.
func (c Case) Passed() bool { return len(c.Problems) == 0 }

// PatchString lists a patch's keys and values in key order, for reports.
func PatchString(labels, annotations map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, "label "+k+"="+strconv.Quote(labels[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(annotations)) {
		parts = append(parts, "annotation "+k+"="+strconv.Quote(annotations[k]))
	}
	return strings.Join(parts, ", ")
}

// spell writes a guest status the way the case table spells it.
func spell(r host.Result) string {
	name := map[int32]string{
		abi.CodeSuccess: "Success", abi.CodeError: "Error", abi.CodeUnschedulable: "Unschedulable",
		abi.CodeUnschedulableAndUnresolvable: "UnschedulableAndUnresolvable", abi.CodeSkip: "Skip",
	}[r.Code]
	if name == "" {
		name = "code " + strconv.Itoa(int(r.Code))
	}
	s := fmt.Sprintf("%d %s", r.Code, name)
	if r.Reason != "" {
		s += " " + strconv.Quote(r.Reason)
	}
	return s
}

// Failures lists what failed, one line each: every failed case with its
// problems, then every batch disagreement.
func (r *Report) Failures() []string {
	var out []string
	for _, c := range r.Cases {
		if !c.Passed() {
			out = append(out, c.Name+": "+strings.Join(c.Problems, "; "))
		}
	}
	for _, d := range r.Disagreements {
		out = append(out, "batch and single forms disagree: "+d)
	}
	return out
}

// Summary is one line about the report, for a terminal.
func (r *Report) Summary() string {
	passed := 0
	for _, c := range r.Cases {
		if c.Passed() {
			passed++
		}
	}
	s := fmt.Sprintf("%d of %d cases passed", passed, len(r.Cases))
	if len(r.Batches) > 0 {
		s += fmt.Sprintf("; %s checked against the single forms on every case's pod and node: %d disagreements", strings.Join(r.Batches, " and "), len(r.Disagreements))
	} else {
		s += "; the module has no batch forms"
	}
	return s
}
