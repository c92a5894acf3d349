package casetable

import (
	"context"
	"fmt"
	"strings"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/casetest"
	"github.com/wasmsched/wasmsched/host"
)

// runNodes runs a case with several nodes through one cycle, as the
// scheduler does: prefilter (with its node subset), filter on each node,
// then prescore, score and normalize_score over the nodes that passed. The
// batch forms are checked against the single ones on the case's nodes.
func runNodes(ctx context.Context, v *host.Version, sched *scheduler, c casetest.Case, r *Report) Case {
	res := Case{Name: c.Name}
	problem := func(format string, args ...any) { res.Problems = append(res.Problems, fmt.Sprintf(format, args...)) }
	var nodes []fwk.NodeInfo
	var names []string
	for _, d := range c.Nodes {
		ni, err := NodeInfo(d)
		if err != nil {
			problem("%v", err)
			return res
		}
		nodes, names = append(nodes, ni), append(names, d.Name)
	}
	res.Node = strings.Join(names, ",")
	v1pod, err := Pod(c.Pod)
	if err != nil {
		problem("%v", err)
		return res
	}
	pod := host.NewPodState(v1pod)
	view, err := clusterView(&c, nil)
	if err != nil {
		problem("%v", err)
		return res
	}
	if c.Cluster == nil || len(c.Cluster.Nodes) == 0 {
		view.Nodes = nodes
	}
	useView(pod, view, nodes)
	pc := new(host.PolicyCycle)
	filters, ferr := runFilter(ctx, v, pod, pc, nodes)
	if ferr != nil {
		problem("%v", ferr)
		return res
	}
	allowed := map[string]bool{}
	for _, n := range pc.NodeNames {
		allowed[n] = true
	}
	var feasible []fwk.NodeInfo
	outcome := map[string]int{} // node name → index in res.Nodes
	statuses := sched.statuses(ctx, v1pod, nodes, view)
	for j, ni := range nodes {
		got := filters.single[j]
		status, applied := statuses[j], filters.policyError(j)
		if pc.NodeNamesSet && !allowed[names[j]] {
			// Not filtered: the scheduler's status is the PreFilter result's.
			got, applied = host.Result{Code: abi.CodeUnschedulableAndUnresolvable}, false
		}
		if got.Code == abi.CodeSkip {
			got = host.Result{}
		}
		if filters.batch != nil && filters.batch[j] != filters.single[j] {
			r.Disagreements = append(r.Disagreements, fmt.Sprintf("pod of case %q on node %s: filter_nodes gives %s, filter gives %s", c.Name, names[j], spell(filters.batch[j]), spell(filters.single[j])))
		}
		out := NodeOutcome{Node: names[j], Filter: spell(got), Status: status, FailurePolicyApplied: applied}
		if want, ok := c.Filters[names[j]]; ok && (got.Code != want.Code || (want.Reason != "" && got.Reason != want.Reason)) {
			msg := fmt.Sprintf("filter on %s: got %s, want %s", names[j], spell(got), spell(host.Result{Code: want.Code, Reason: want.Reason}))
			problem("%s", msg)
			out.Problems = append(out.Problems, msg)
		}
		outcome[names[j]] = len(res.Nodes)
		res.Nodes = append(res.Nodes, out)
		if got.Code == abi.CodeSuccess {
			feasible = append(feasible, ni)
		}
	}
	if c.Scores == nil {
		return res
	}
	scores := make([]int64, len(feasible))
	if err := scoreNodes(ctx, v, pod, pc, feasible, scores, c.Name, r); err != nil {
		problem("%v", err)
		return res
	}
	got := map[string]int64{}
	for j, ni := range feasible {
		name := ni.Node().Name
		s := scores[j]
		got[name] = s
		res.Nodes[outcome[name]].Score = &s
	}
	if fmt.Sprint(got) != fmt.Sprint(c.Scores) {
		problem("scores: got %v, want %v", got, c.Scores)
		for _, n := range names {
			g, scored := got[n]
			w, wanted := c.Scores[n]
			switch {
			case scored && wanted && g != w:
				res.Nodes[outcome[n]].Problems = append(res.Nodes[outcome[n]].Problems, fmt.Sprintf("score %d, want %d", g, w))
			case scored && !wanted:
				res.Nodes[outcome[n]].Problems = append(res.Nodes[outcome[n]].Problems, fmt.Sprintf("scored %d, want no score (the case expects it filtered out)", g))
			case !scored && wanted:
				res.Nodes[outcome[n]].Problems = append(res.Nodes[outcome[n]].Problems, fmt.Sprintf("no score, want %d", w))
			}
		}
	}
	return res
}

// scoreNodes scores the feasible nodes of one cycle into scores: prescore
// (a Skip scores them all 0), score on each (checked against score_nodes),
// then normalize_score with each score's node.
func scoreNodes(ctx context.Context, v *host.Version, pod *host.PodState, pc *host.PolicyCycle, feasible []fwk.NodeInfo, scores []int64, name string, r *Report) error {
	ex := v.Exports()
	if len(feasible) == 0 || !ex.Has(host.CallScore) {
		return nil
	}
	if ex.Has(host.CallPreScore) {
		_, res, cerr := v.Call(ctx, host.CallPreScore, pod, nil, pc, nil)
		if cerr != nil {
			return fmt.Errorf("prescore: %v", cerr)
		}
		if res.Code == abi.CodeSkip {
			return nil
		}
		if res.Code != abi.CodeSuccess {
			return fmt.Errorf("prescore: %s", spell(res))
		}
	}
	for j, ni := range feasible {
		s, res, cerr := v.Call(ctx, host.CallScore, pod, ni, pc, nil)
		if cerr != nil {
			return fmt.Errorf("score on node %s: %v", ni.Node().Name, cerr)
		}
		if res.Code != abi.CodeSuccess {
			return fmt.Errorf("score on node %s: %s", ni.Node().Name, spell(res))
		}
		scores[j] = s
	}
	if ex.Has(host.CallScoreNodes) {
		results, batch := make([]host.Result, len(feasible)), make([]int64, len(feasible))
		for start := 0; start < len(feasible); start += BatchSize {
			end := min(start+BatchSize, len(feasible))
			if _, cerr := v.CallNodes(ctx, host.CallScore, pod, feasible[start:end], pc, results[start:end], batch[start:end]); cerr != nil {
				return fmt.Errorf("score_nodes on nodes %d..%d: %v", start, end-1, cerr)
			}
		}
		for j, ni := range feasible {
			if results[j].Code != abi.CodeSuccess || batch[j] != scores[j] {
				r.Disagreements = append(r.Disagreements, fmt.Sprintf("pod of case %q on node %s: score_nodes gives %s, score gives score %d", name, ni.Node().Name, scored{results[j], batch[j]}, scores[j]))
			}
		}
	}
	if ex.Has(host.CallNormalizeScore) {
		pc.Scored = feasible
		_, res, cerr := v.Call(ctx, host.CallNormalizeScore, pod, nil, pc, scores)
		pc.Scored = nil
		if cerr != nil {
			return fmt.Errorf("normalize_score: %v", cerr)
		}
		if res.Code != abi.CodeSuccess {
			return fmt.Errorf("normalize_score: %s", spell(res))
		}
	}
	return nil
}
