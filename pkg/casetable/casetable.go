// Package casetable runs a policy's case table (the testdata.json format of
// guest-sdk/casetest, documented in docs/sdk.md) against a compiled module
// through the real host: the conformance kit behind `wasmsched test --cases`.
// Any guest, whatever its language, is held to the same table as the Go
// example, and a module with batch forms is checked twice: each case's
// verdicts must match the table, and filter_nodes/score_nodes must give
// every node exactly the verdict filter/score gives it (docs/abi.md §3.1).
package casetable

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/casetest"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/kubemodel"
	"github.com/wasmsched/wasmsched/internal/verdict"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

// BatchSize is how many nodes one batch call gets, as in the scheduler.
const BatchSize = 32

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
	// Status is what the scheduler makes of the filter verdict on the
	// case's node, read as the WasmPolicy plugin reads it (with the
	// failurePolicy applied): "Success", or the status's code and message
	// as the pod's FailedScheduling event shows it.
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
}

// Passed reports whether the case's expectations held.
func (c Case) Passed() bool { return len(c.Problems) == 0 }

// RunModule loads wasm as a policy of e with spec, then runs the case table
// f against it and frees the policy. An empty spec.Config or spec.Reads
// takes the table's, so the module sees the config its native test saw
// (a non-nil empty Reads declares no reads).
// The returned error is about loading; case failures are in the Report.
func RunModule(ctx context.Context, e *host.Engine, spec host.PolicySpec, wasm []byte, f *casetest.File) (*Report, error) {
	if spec.Config == "" {
		spec.Config = f.Config
	}
	if spec.Reads == nil {
		spec.Reads = f.Reads
	}
	if spec.PatchPrefixes == nil {
		spec.PatchPrefixes = f.PatchPrefixes
	}
	if spec.PreEnqueueTimeout == 0 {
		// A case table bounds every call by the one timeout it is given
		// (wasmsched test --timeout): it checks verdicts, not the gate's
		// tighter bound in the scheduler.
		spec.PreEnqueueTimeout = spec.Timeout
	}
	// Cases that set now run on a policy whose wall clock reads it; the
	// others on spec's clock. One load per distinct clock, the cases kept
	// in the table's order.
	var clocks []string
	groups := map[string][]int{}
	for i, c := range f.Cases {
		if _, ok := groups[c.Now]; !ok {
			clocks = append(clocks, c.Now)
		}
		groups[c.Now] = append(groups[c.Now], i)
	}
	if len(clocks) == 0 {
		clocks = []string{""}
	}
	var out *Report
	cases := make([]Case, len(f.Cases))
	for _, now := range clocks {
		gspec, sub := spec, *f
		if now != "" {
			c := casetest.Case{Now: now}
			t, err := c.Clock()
			if err != nil {
				return nil, err
			}
			gspec.Clock = t
		}
		sub.Cases = nil
		for _, i := range groups[now] {
			sub.Cases = append(sub.Cases, f.Cases[i])
		}
		p, err := e.NewPolicy(ctx, gspec)
		if err != nil {
			return nil, err
		}
		v, err := p.Load(ctx, wasm, "")
		if err != nil {
			_ = p.Close(ctx)
			return nil, err
		}
		r := Run(ctx, v, &sub)
		r.Size, r.LoadDuration, r.TableBatches = v.Size(), v.LoadDuration(), v.TableBatches()
		_ = p.Close(ctx)
		for j, i := range groups[now] {
			cases[i] = r.Cases[j]
		}
		if out == nil {
			out = r
		} else {
			out.Disagreements = append(out.Disagreements, r.Disagreements...)
			out.TableBatches += r.TableBatches
		}
	}
	if len(f.Cases) > 0 {
		out.Cases = cases
	}
	return out, nil
}

// Run runs every case of f against v, a loaded module whose policy has the
// table's config. Each case's pod is evaluated, as one scheduling cycle, on
// the nodes of all cases, so batches hold more than one node and every
// (pod, node) pair is checked for agreement; the case's expectations are
// checked on its own node.
func Run(ctx context.Context, v *host.Version, f *casetest.File) *Report {
	ex := v.Exports()
	r := &Report{Exports: ex.String(), FailurePolicy: string(failurePolicy(f))}
	checkFilter, checkScore := ex.Has(host.CallFilterNodes), ex.Has(host.CallScoreNodes)
	if checkFilter {
		r.Batches = append(r.Batches, "filter_nodes")
	}
	if checkScore {
		r.Batches = append(r.Batches, "score_nodes")
	}
	// The one-node cases' nodes: every such case's pod meets all of them.
	var nodes []fwk.NodeInfo
	var nodeErrs []error
	var oneNode []casetest.Case
	for _, c := range f.Cases {
		if len(c.Nodes) > 0 {
			continue
		}
		ni, err := NodeInfo(c.Node)
		if err != nil {
			ni, _ = NodeInfo(sdk.NodeData{Name: c.Node.Name}) // the case reports err; other pods see a bare node
		}
		nodes, nodeErrs, oneNode = append(nodes, ni), append(nodeErrs, err), append(oneNode, c)
	}
	i := -1
	for _, c := range f.Cases {
		if len(c.Nodes) > 0 {
			r.Cases = append(r.Cases, runNodes(ctx, v, f, c, r))
			continue
		}
		i++
		res := Case{Name: c.Name, Node: nodes[i].Node().Name}
		problem := func(format string, args ...any) { res.Problems = append(res.Problems, fmt.Sprintf(format, args...)) }
		where := func(j int) string { return fmt.Sprintf("node %s of case %q", nodes[j].Node().Name, oneNode[j].Name) }
		if nodeErrs[i] != nil {
			problem("%v", nodeErrs[i])
		}
		v1pod, err := Pod(c.Pod)
		if err != nil {
			problem("%v", err)
			r.Cases = append(r.Cases, res)
			continue
		}
		pod := host.NewPodState(v1pod)
		view, err := clusterView(&c, nodes[i])
		if err != nil {
			problem("%v", err)
			r.Cases = append(r.Cases, res)
			continue
		}
		useView(pod, view, nodes)
		pc := new(host.PolicyCycle)

		var filters filterResults
		var ferr error
		if ex.Has(host.CallFilter) || ex.Has(host.CallPreFilter) || c.Filter != nil {
			filters, ferr = runFilter(ctx, v, pod, pc, nodes)
		}
		if ferr != nil {
			problem("%v", ferr)
		} else if filters.single != nil {
			if c.Filter != nil || filters.batch != nil || ex.Has(host.CallFilter) {
				res.Status, res.FailurePolicyApplied = filters.status(v, f, i)
			}
			if c.Filter != nil {
				got := filters.single[i]
				res.Filter = spell(got)
				if got.Code != c.Filter.Code || (c.Filter.Reason != "" && got.Reason != c.Filter.Reason) {
					problem("filter: got %s, want %s", spell(got), spell(host.Result{Code: c.Filter.Code, Reason: c.Filter.Reason}))
				}
			}
			for j := range nodes {
				if filters.batch != nil && filters.batch[j] != filters.single[j] {
					r.Disagreements = append(r.Disagreements, fmt.Sprintf("pod of case %q on %s: filter_nodes gives %s, filter gives %s", c.Name, where(j), spell(filters.batch[j]), spell(filters.single[j])))
				}
			}
		}

		if c.Score != nil || checkScore {
			scores, serr := runScore(ctx, v, pod, pc, nodes)
			switch {
			case serr != nil:
				problem("%v", serr)
			default:
				if c.Score != nil {
					got := scores.single[i]
					if got.res.Code != abi.CodeSuccess {
						problem("score: got %s, want score %d", spell(got.res), *c.Score)
					} else {
						s := got.score
						res.Score = &s
						if s != *c.Score {
							problem("score: got %d, want %d", s, *c.Score)
						}
					}
				}
				for j := range nodes {
					if scores.batch != nil && scores.batch[j] != scores.single[j] {
						r.Disagreements = append(r.Disagreements, fmt.Sprintf("pod of case %q on %s: score_nodes gives %s, score gives %s", c.Name, where(j), scores.batch[j], scores.single[j]))
					}
				}
			}
		}
		runGates(ctx, v, &c, v1pod, pod, pc, nodes[i], &res, problem)
		r.Cases = append(r.Cases, res)
	}
	return r
}

// runGates checks a case's preEnqueue and preBind expectations: the gate
// with a pod state of its own (a new cycle, as the plugin calls it), the
// prebind in the case's cycle on its node.
func runGates(ctx context.Context, v *host.Version, c *casetest.Case, v1pod *v1.Pod, pod *host.PodState, pc *host.PolicyCycle, node fwk.NodeInfo, res *Case, problem func(string, ...any)) {
	ex := v.Exports()
	if want := c.PreEnqueue; want != nil {
		got := host.Result{}
		gpc := new(host.PolicyCycle)
		if ex.Has(host.CallPreEnqueue) {
			_, r, cerr := v.Call(ctx, host.CallPreEnqueue, host.NewPodState(v1pod), nil, gpc, nil)
			if cerr != nil {
				problem("preenqueue: %v", cerr)
				return
			}
			got = r
		}
		res.PreEnqueue = spell(got)
		if got.Code != want.Code || (want.Reason != "" && got.Reason != want.Reason) {
			problem("preEnqueue: got %s, want %s", spell(got), spell(host.Result{Code: want.Code, Reason: want.Reason}))
		}
		if c.Recheck != nil {
			on, _ := c.Recheck.Events()
			after, _ := c.Recheck.Delay()
			r := gpc.Recheck
			if r == (host.Recheck{}) {
				r = host.DefaultRecheck
			}
			if r.Events != int32(on) || r.After != after {
				problem("recheck: got events %d after %s, want %d after %s", r.Events, r.After, on, after)
			}
		}
	}
	if want := c.PreBind; want != nil {
		got := host.Result{}
		bpc := &host.PolicyCycle{}
		bpc.State = pc.State
		if len(c.CyclePolicies) > 0 {
			var recs [][3]string
			for _, p := range c.CyclePolicies {
				recs = append(recs, [3]string{p.Name, p.SHA256, p.Mode})
			}
			bpc.Policies = host.EncodeCyclePolicies(recs)
		} else {
			bpc.Policies = host.EncodeCyclePolicies(nil)
		}
		if ex.Has(host.CallPreBind) {
			_, r, cerr := v.Call(ctx, host.CallPreBind, pod, node, bpc, nil)
			if cerr != nil {
				problem("prebind: %v", cerr)
				return
			}
			got = r
		}
		res.PreBind = spell(got)
		if !bpc.Patch.Empty() {
			res.PreBind += "; " + PatchString(bpc.Patch.Labels, bpc.Patch.Annotations)
		}
		if p := casetest.CheckPreBind(want, got.Code, got.Reason, bpc.Patch.Labels, bpc.Patch.Annotations); p != "" {
			problem("%s", p)
		}
	}
}

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

// runNodes runs a case with several nodes through one cycle, as the
// scheduler does: prefilter (with its node subset), filter on each node,
// then prescore, score and normalize_score over the nodes that passed. The
// batch forms are checked against the single ones on the case's nodes.
func runNodes(ctx context.Context, v *host.Version, f *casetest.File, c casetest.Case, r *Report) Case {
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
	if c.Cluster == nil {
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
	for j, ni := range nodes {
		got := filters.single[j]
		status, applied := filters.status(v, f, j)
		if pc.NodeNamesSet && !allowed[names[j]] {
			got = host.Result{Code: abi.CodeUnschedulableAndUnresolvable}
			status, applied = fwk.UnschedulableAndUnresolvable.String()+": "+verdict.OutsidePreFilterResult, false
		}
		if got.Code == abi.CodeSkip {
			got = host.Result{}
		}
		if filters.batch != nil && filters.batch[j] != filters.single[j] {
			r.Disagreements = append(r.Disagreements, fmt.Sprintf("pod of case %q on node %s: filter_nodes gives %s, filter gives %s", c.Name, names[j], spell(filters.batch[j]), spell(filters.single[j])))
		}
		if want, ok := c.Filters[names[j]]; ok && (got.Code != want.Code || (want.Reason != "" && got.Reason != want.Reason)) {
			problem("filter on %s: got %s, want %s", names[j], spell(got), spell(host.Result{Code: want.Code, Reason: want.Reason}))
		}
		outcome[names[j]] = len(res.Nodes)
		res.Nodes = append(res.Nodes, NodeOutcome{Node: names[j], Filter: spell(got), Status: status, FailurePolicyApplied: applied})
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

// filterResults are one pod's filter verdicts on every node: single calls,
// and batch calls when the module has filter_nodes (nil otherwise).
// prefilter is true when prefilter's result is every node's.
type filterResults struct {
	single, batch []host.Result
	prefilter     bool
}

// status is what the scheduler makes of node j's verdict (verdict.Read,
// then the table's failurePolicy for the policy's error), as Case.Status
// spells it, and whether the failurePolicy decided it.
func (fr filterResults) status(v *host.Version, f *casetest.File, j int) (string, bool) {
	point := host.CallFilter
	if fr.prefilter {
		point = host.CallPreFilter
	}
	res := fr.single[j]
	vd, ok := verdict.Read(point, res.Code, res.Reason)
	if !ok {
		vd = verdict.Fail(point, failurePolicy(f), vd.Reason)
	}
	st := verdict.Status(point, v.Policy().Name(), vd)
	if st == nil { // passed, or its prefilter's Skip: the policy does not filter the pod
		return fwk.Success.String(), !ok
	}
	return st.Code().String() + ": " + st.Message(), !ok
}

// failurePolicy is the table's failurePolicy, Fail by default (casetest.Load
// refuses any other value).
func failurePolicy(f *casetest.File) config.FailurePolicy {
	if f.FailurePolicy == string(config.FailurePolicyIgnore) {
		return config.FailurePolicyIgnore
	}
	return config.FailurePolicyFail
}

// runFilter runs prefilter (a rejection or Skip there is every node's
// verdict, as natively), then filter on each node and filter_nodes.
func runFilter(ctx context.Context, v *host.Version, pod *host.PodState, pc *host.PolicyCycle, nodes []fwk.NodeInfo) (filterResults, error) {
	out := filterResults{single: make([]host.Result, len(nodes))}
	ex := v.Exports()
	if ex.Has(host.CallPreFilter) {
		_, res, cerr := v.Call(ctx, host.CallPreFilter, pod, nil, pc, nil)
		if cerr != nil {
			return out, fmt.Errorf("prefilter: %v", cerr)
		}
		if res.Code != abi.CodeSuccess {
			for j := range out.single {
				out.single[j] = res
			}
			out.prefilter = true
			return out, nil
		}
	}
	if !ex.Has(host.CallFilter) {
		return out, nil // passes every node, as in the scheduler
	}
	for j, ni := range nodes {
		_, res, cerr := v.Call(ctx, host.CallFilter, pod, ni, pc, nil)
		if cerr != nil {
			return out, fmt.Errorf("filter on node %s: %v", ni.Node().Name, cerr)
		}
		out.single[j] = res
	}
	if ex.Has(host.CallFilterNodes) {
		out.batch = make([]host.Result, len(nodes))
		for start := 0; start < len(nodes); start += BatchSize {
			end := min(start+BatchSize, len(nodes))
			if _, cerr := v.CallNodes(ctx, host.CallFilter, pod, nodes[start:end], pc, out.batch[start:end], nil); cerr != nil {
				return out, fmt.Errorf("filter_nodes on nodes %d..%d: %v", start, end-1, cerr)
			}
		}
	}
	return out, nil
}

// scored is one node's score verdict.
type scored struct {
	res   host.Result
	score int64
}

func (s scored) String() string {
	if s.res.Code != abi.CodeSuccess {
		return spell(s.res)
	}
	return "score " + strconv.FormatInt(s.score, 10)
}

type scoreResults struct{ single, batch []scored }

// runScore runs prescore (as the scheduler does before any score), then
// score on each node and score_nodes. A policy without score scores 0.
func runScore(ctx context.Context, v *host.Version, pod *host.PodState, pc *host.PolicyCycle, nodes []fwk.NodeInfo) (scoreResults, error) {
	out := scoreResults{single: make([]scored, len(nodes))}
	ex := v.Exports()
	if !ex.Has(host.CallScore) {
		return out, fmt.Errorf("score: the module does not implement score")
	}
	if ex.Has(host.CallPreScore) {
		_, res, cerr := v.Call(ctx, host.CallPreScore, pod, nil, pc, nil)
		if cerr != nil {
			return out, fmt.Errorf("prescore: %v", cerr)
		}
		if res.Code != abi.CodeSuccess {
			return out, fmt.Errorf("prescore: %s (the policy does not score this pod)", spell(res))
		}
	}
	for j, ni := range nodes {
		s, res, cerr := v.Call(ctx, host.CallScore, pod, ni, pc, nil)
		if cerr != nil {
			return out, fmt.Errorf("score on node %s: %v", ni.Node().Name, cerr)
		}
		out.single[j] = scored{res, s}
		if res.Code != abi.CodeSuccess {
			out.single[j].score = 0
		}
	}
	if ex.Has(host.CallScoreNodes) {
		out.batch = make([]scored, len(nodes))
		results, scores := make([]host.Result, len(nodes)), make([]int64, len(nodes))
		for start := 0; start < len(nodes); start += BatchSize {
			end := min(start+BatchSize, len(nodes))
			if _, cerr := v.CallNodes(ctx, host.CallScore, pod, nodes[start:end], pc, results[start:end], scores[start:end]); cerr != nil {
				return out, fmt.Errorf("score_nodes on nodes %d..%d: %v", start, end-1, cerr)
			}
		}
		for j := range nodes {
			out.batch[j] = scored{results[j], scores[j]}
			if results[j].Code != abi.CodeSuccess {
				out.batch[j].score = 0
			}
		}
	}
	return out, nil
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

// Pod converts a case's pod into a real Pod (kubemodel.ToPod).
func Pod(d sdk.PodData) (*v1.Pod, error) { return kubemodel.ToPod(&d) }

// useView gives the pod its cycle's cluster view, and nodes the image
// states a scheduler snapshot of the view's nodes would give them.
func useView(pod *host.PodState, view *host.ClusterView, nodes []fwk.NodeInfo) {
	pod.Cluster = view
	var clusterNodes []*v1.Node
	for _, ni := range view.Nodes {
		clusterNodes = append(clusterNodes, ni.Node())
	}
	intree.SetImageStates(nodes, clusterNodes)
}

// clusterView is a case's cluster view: its cluster's nodes and
// namespaces, or its own node alone, as natively (casetest.Case.Cluster).
func clusterView(c *casetest.Case, own fwk.NodeInfo) (*host.ClusterView, error) {
	// The case's pod says what selects it, as natively.
	spread := kubemodel.DefaultSpreadOf(&c.Pod)
	defaultSpread := func(*v1.Pod) []metav1.LabelSelectorRequirement { return spread }
	if c.Cluster == nil {
		return &host.ClusterView{Nodes: []fwk.NodeInfo{own}, NamespaceLabels: func(string) (map[string]string, bool) { return nil, false }, DefaultSpreadSelector: defaultSpread}, nil
	}
	v := &host.ClusterView{NamespaceLabels: func(name string) (map[string]string, bool) {
		l, ok := c.Cluster.Namespaces[name]
		return l, ok
	}, DefaultSpreadSelector: defaultSpread}
	for _, d := range c.Cluster.Nodes {
		ni, err := NodeInfo(d)
		if err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		v.Nodes = append(v.Nodes, ni)
	}
	return v, nil
}

// NodeInfo converts a case's node into a real NodeInfo (kubemodel.ToNodeInfo).
func NodeInfo(d sdk.NodeData) (fwk.NodeInfo, error) { return kubemodel.ToNodeInfo(&d) }
