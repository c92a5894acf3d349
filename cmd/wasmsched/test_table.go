package main

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/wasmsched/wasmsched/pkg/casetable"
)

// The case table as `wasmsched test --cases` prints it.

// afterCycle is what a case checked after its cycle: postfilter, reserve
// and postbind verdicts, "" for none.
func afterCycle(c casetable.Case) string {
	var parts []string
	for _, p := range [][2]string{{"postfilter", c.PostFilter}, {"reserve", c.Reserve}, {"permit", c.Permit}, {"postbind", c.PostBind}} {
		if p[1] != "" {
			parts = append(parts, p[0]+" "+p[1])
		}
	}
	return strings.Join(parts, "; ")
}

func caseTable(tw *tabwriter.Writer, r *casetable.Report) {
	// The PREENQUEUE and PREBIND columns appear when a case checks them.
	gates := slices.ContainsFunc(r.Cases, func(c casetable.Case) bool { return c.PreEnqueue != "" || c.PreBind != "" })
	// The SCHEDULER column (what kube-scheduler makes of the filter
	// verdict) appears when the failurePolicy decided one: otherwise it
	// only repeats FILTER.
	applied := slices.ContainsFunc(r.Cases, func(c casetable.Case) bool {
		return c.FailurePolicyApplied || slices.ContainsFunc(c.Nodes, func(n casetable.NodeOutcome) bool { return n.FailurePolicyApplied })
	})
	// The AFTER column (postfilter, reserve, postbind) appears when a
	// case checks one of them.
	after := slices.ContainsFunc(r.Cases, func(c casetable.Case) bool { return afterCycle(c) != "" })
	line := func(name, node, filter, status, score, preEnqueue, preBind, result string, more ...string) {
		cols := []any{name, node, filter}
		if applied {
			cols = append(cols, dash(status))
		}
		cols = append(cols, score)
		if gates {
			cols = append(cols, dash(preEnqueue), dash(preBind))
		}
		if after {
			cols = append(cols, dash(strings.Join(more, "")))
		}
		row(tw, append(cols, result)...)
	}
	line("CASE", "NODE", "FILTER", "SCHEDULER (failurePolicy "+r.FailurePolicy+")", "SCORE", "PREENQUEUE", "PREBIND", "RESULT", "AFTER THE CYCLE")
	for _, c := range r.Cases {
		result := "ok"
		if !c.Passed() {
			result = "FAIL: " + strings.Join(c.Problems, "; ")
		}
		if len(c.Nodes) > 0 {
			// A case with several nodes: a row per node with that node's
			// result; what concerns no one node (an error, the scores as a
			// whole) on the first.
			var general []string
			for _, p := range c.Problems {
				// The scores as a whole are told node by node.
				if !strings.HasPrefix(p, "scores: got ") && !slices.ContainsFunc(c.Nodes, func(n casetable.NodeOutcome) bool { return slices.Contains(n.Problems, p) }) {
					general = append(general, p)
				}
			}
			for i, n := range c.Nodes {
				name, problems := c.Name, n.Problems
				if i > 0 {
					name = ""
				} else {
					problems = append(append([]string(nil), general...), problems...)
				}
				res := "ok"
				if len(problems) > 0 {
					res = "FAIL: " + strings.Join(problems, "; ")
				}
				line(name, n.Node, n.Filter, n.Status, optInt(n.Score), "", "", res)
			}
			continue
		}
		line(c.Name, c.Node, dash(c.Filter), c.Status, optInt(c.Score), c.PreEnqueue, c.PreBind, result, afterCycle(c))
	}
	tw.Flush()
	for _, d := range r.Disagreements {
		fmt.Fprintf(tw, "DISAGREE: %s\n", d)
	}
}
