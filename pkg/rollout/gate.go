package rollout

import (
	"fmt"
	"strconv"
	"strings"
)

// Gate is a condition on one of the report's counts that fails a CI
// pipeline: "rejected-running>0", "moved-placements>=10%". A count with %
// is compared as a percentage of what it counts among (running pods,
// pending pods, sampled placements).
type Gate struct {
	Name    string
	Op      string
	Value   float64
	Percent bool
	text    string
}

// GateNames are the counts a gate may name, with what a percentage is of.
var GateNames = map[string]string{
	"rejected-running":         "running pods",
	"rejected-running-already": "running pods",
	"newly-schedulable":        "pending pods",
	"newly-stranded":           "pending pods",
	"changed-pending":          "pending pods",
	"moved-placements":         "sampled placements",
}

var gateOps = []string{">=", "<=", "==", "!=", ">", "<"}

// ParseGate reads a gate such as "rejected-running>0".
func ParseGate(s string) (Gate, error) {
	t := strings.ReplaceAll(s, " ", "")
	for _, op := range gateOps {
		name, val, ok := strings.Cut(t, op)
		if !ok {
			continue
		}
		if _, known := GateNames[name]; !known {
			return Gate{}, fmt.Errorf("--fail-on %q: unknown count %q; use one of %s", s, name, gateNameList())
		}
		g := Gate{Name: name, Op: op, text: s}
		if strings.HasSuffix(val, "%") {
			g.Percent, val = true, strings.TrimSuffix(val, "%")
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil || v < 0 {
			return Gate{}, fmt.Errorf("--fail-on %q: %q is not a number (write rejected-running>0 or moved-placements>10%%)", s, val)
		}
		g.Value = v
		return g, nil
	}
	return Gate{}, fmt.Errorf("--fail-on %q: want COUNT OP NUMBER[%%], for example rejected-running>0; OP is one of %s", s, strings.Join(gateOps, " "))
}

func gateNameList() string {
	return "rejected-running, rejected-running-already, newly-schedulable, newly-stranded, changed-pending, moved-placements"
}

// count is the gate's count in r and what a percentage is of.
func (g Gate) count(r *Report) (n, of int) {
	s := r.Summary
	switch g.Name {
	case "rejected-running":
		return s.RejectedRunning, r.Snapshot.RunningPods
	case "rejected-running-already":
		return s.RejectedRunningAlready, r.Snapshot.RunningPods
	case "newly-schedulable":
		return s.NewlySchedulable, r.Snapshot.PendingPods
	case "newly-stranded":
		return s.NewlyStranded, r.Snapshot.PendingPods
	case "changed-pending":
		return s.ChangedPending, r.Snapshot.PendingPods
	case "moved-placements":
		return s.MovedPlacements, s.SampledPlacements
	}
	return 0, 0
}

// Holds reports whether the gate's condition holds in r (the pipeline then
// fails), and says what it measured.
func (g Gate) Holds(r *Report) (bool, string) {
	n, of := g.count(r)
	v := float64(n)
	what := fmt.Sprintf("%s is %d", g.Name, n)
	if g.Percent {
		v = 0
		if of > 0 {
			v = 100 * float64(n) / float64(of)
		}
		what = fmt.Sprintf("%s is %d of %d %s (%.1f%%)", g.Name, n, of, GateNames[g.Name], v)
	}
	var holds bool
	switch g.Op {
	case ">":
		holds = v > g.Value
	case ">=":
		holds = v >= g.Value
	case "<":
		holds = v < g.Value
	case "<=":
		holds = v <= g.Value
	case "==":
		holds = v == g.Value
	case "!=":
		holds = v != g.Value
	}
	return holds, fmt.Sprintf("--fail-on %s: %s", g.text, what)
}
