package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
	"github.com/wasmsched/wasmsched/pkg/rollout"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

func versionOf(w *wasmpolicy.WasmPolicy, p config.Policy) rollout.Version {
	mode := string(p.Mode)
	if mode == "" {
		mode = string(config.ModeEnforce)
	}
	return rollout.Version{SHA256: w.Serving(p.Name), Source: describeSource(p.Source), Config: p.Config, Mode: mode}
}

func describeSource(s config.Source) string {
	switch {
	case s.File != "":
		return "file " + s.File
	case s.ConfigMap != nil:
		return fmt.Sprintf("configMap %s/%s key %s", s.ConfigMap.Namespace, s.ConfigMap.Name, s.ConfigMap.Key)
	case s.OCI != nil:
		return "oci " + s.OCI.Ref
	}
	return "(none)"
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

func rolloutTable(tw *tabwriter.Writer, r *rollout.Report) {
	fmt.Fprintf(tw, "Rollout report: policy %s in profile %s\n", r.Policy, r.Profile)
	for _, v := range []struct {
		name string
		v    rollout.Version
	}{{"current", r.Current}, {"candidate", r.Candidate}} {
		fmt.Fprintf(tw, "  %-9s  module %s  config %q  %s  (%s)\n", v.name, short(v.v.SHA256), v.v.Config, v.v.Mode, v.v.Source)
	}
	at := r.Snapshot.TakenAt
	if r.Snapshot.ResourceVersion != "" {
		at += ", resourceVersion " + r.Snapshot.ResourceVersion
	}
	fmt.Fprintf(tw, "Snapshot: %d nodes, %d running and %d pending pods of the profile (%s)\n", r.Snapshot.Nodes, r.Snapshot.RunningPods, r.Snapshot.PendingPods, at)
	if len(r.NotEvaluated) > 0 {
		fmt.Fprintf(tw, "Not evaluated (plugins this tool does not have): %s\n", strings.Join(r.NotEvaluated, ", "))
	}

	fmt.Fprintf(tw, "\nRunning pods the candidate rejects on their node: %d of %d", r.Summary.RejectedRunning, r.Snapshot.RunningPods)
	if r.Summary.RejectedRunningAlready > 0 {
		fmt.Fprintf(tw, " (%d rejected by the current version too)", r.Summary.RejectedRunningAlready)
	}
	fmt.Fprintln(tw)
	if len(r.RejectedRunning) > 0 {
		row(tw, "  PODS", "NAMESPACE", "TEAM", "REASON")
		for _, gr := range r.RejectedRunningGroups {
			row(tw, fmt.Sprintf("  %d", gr.Pods), gr.Namespace, orDash(gr.Team), gr.Reason)
		}
		fmt.Fprintln(tw)
		row(tw, "  NAMESPACE", "POD", "NODE", "TEAM", "NOW")
		for _, p := range r.RejectedRunning {
			row(tw, "  "+p.Namespace, p.Name, p.Node, orDash(p.Team), p.Current)
		}
	}

	fmt.Fprintf(tw, "\nPending pods whose verdicts change: %d of %d (%d newly schedulable, %d newly stranded)\n",
		r.Summary.ChangedPending, r.Snapshot.PendingPods, r.Summary.NewlySchedulable, r.Summary.NewlyStranded)
	if len(r.Pending) > 0 {
		row(tw, "  NAMESPACE", "POD", "TEAM", "CHANGE", "FEASIBLE NODES", "POLICY NOW", "POLICY CANDIDATE")
		for _, p := range r.Pending {
			row(tw, "  "+p.Namespace, p.Name, orDash(p.Team), p.Change, fmt.Sprintf("%d → %d", p.Current.FeasibleNodes, p.Candidate.FeasibleNodes),
				reasons(p.Current.PolicyRejects), reasons(p.Candidate.PolicyRejects))
		}
	}

	pl := r.Placements
	fmt.Fprintf(tw, "\nPlacements: %d of %d bound pods placed again, the most recent first; %d would move", pl.Sampled, pl.Eligible, pl.Moved)
	if pl.Truncated {
		fmt.Fprint(tw, " (stopped at --placement-time)")
	}
	fmt.Fprintln(tw)
	if pl.Moved > 0 {
		row(tw, "  NAMESPACE", "POD", "BOUND TO", "NOW (SCORE)", "CANDIDATE (SCORE)", "SCORE MOVED")
		for _, p := range pl.Pods {
			if p.Moved {
				row(tw, "  "+p.Namespace, p.Name, p.BoundNode, choice(p.Current), choice(p.Candidate), delta(p.ScoreDelta))
			}
		}
	}

	c := r.Cost
	fmt.Fprintf(tw, "\nCost of %s per node (guest time, verdict reuse included): filter %s now, %s candidate", r.Policy,
		nanos(c.Current.FilterNanosPerNode), nanos(c.Candidate.FilterNanosPerNode))
	if c.FilterRatio > 0 {
		fmt.Fprintf(tw, " (%.2f×)", c.FilterRatio)
	}
	if c.Current.ScoreCalls > 0 || c.Candidate.ScoreCalls > 0 {
		fmt.Fprintf(tw, "; score %s now, %s candidate", nanos(c.Current.ScoreNanosPerNode), nanos(c.Candidate.ScoreNanosPerNode))
	}
	took := "under a millisecond"
	if r.DurationSeconds > 0 {
		took = dur(time.Duration(r.DurationSeconds * float64(time.Second)))
	}
	fmt.Fprintf(tw, "\nThe report took %s (the snapshot not counted).\n", took)
}

func delta(d *int64) string {
	if d == nil {
		return "-"
	}
	return fmt.Sprintf("%+d", *d)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func reasons(rs []rollout.ReasonCount) string {
	if len(rs) == 0 {
		return "rejects no node"
	}
	parts := make([]string, 0, len(rs))
	for _, r := range rs {
		parts = append(parts, fmt.Sprintf("%d: %s", r.Nodes, r.Reason))
	}
	return strings.Join(parts, "; ")
}

func choice(c rollout.Choice) string {
	switch len(c.Nodes) {
	case 0:
		return "(none feasible)"
	case 1:
		return fmt.Sprintf("%s (%d)", c.Nodes[0], c.Score)
	case 2, 3:
		return fmt.Sprintf("%s (%d, tied)", strings.Join(c.Nodes, " "), c.Score)
	}
	return fmt.Sprintf("%s and %d more (%d, tied)", strings.Join(c.Nodes[:2], " "), len(c.Nodes)-2, c.Score)
}

func nanos(ns float64) string {
	if ns == 0 {
		return "-"
	}
	return dur(time.Duration(ns))
}
