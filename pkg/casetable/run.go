// Package casetable runs a policy's case table (the testdata.json format of
// guest-sdk/casetest, documented in docs/sdk.md) against a compiled module
// through the real host: the conformance kit behind `wasmsched test --cases`.
// Each case's status is the scheduler's: the module runs as the one policy
// of a WasmPolicy plugin in kube-scheduler's framework (scheduler.go).
// Any guest, whatever its language, is held to the same table as the Go
// example, and a module with batch forms is checked twice: each case's
// verdicts must match the table, and filter_nodes/score_nodes must give
// every node exactly the verdict filter/score gives it (docs/abi.md §3.1).
package casetable

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/casetest"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/verdict"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

// BatchSize is how many nodes one batch call gets, as in the scheduler.
const BatchSize = 32

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
		sched, err := newScheduler(ctx, gspec, wasm, &sub)
		if err != nil {
			return nil, err
		}
		// One policy's counts for both: a reserved pod's counts are what
		// the scheduler's cycle sees too.
		gspec.Counters = sched.plugin.Counters(gspec.Name)
		p, err := e.NewPolicy(ctx, gspec)
		if err != nil {
			sched.close()
			return nil, err
		}
		v, err := p.Load(ctx, wasm, "")
		if err != nil {
			sched.close()
			_ = p.Close(ctx)
			return nil, err
		}
		p.SetObjects(sched.objects.readers(len(f.Objects)))
		r := run(ctx, v, sched, &sub, gspec.Counters)
		sched.close()
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

// run runs every case of f against v, a loaded module whose policy has the
// table's config, and sched, the same module in WasmPolicy. Each case's pod
// is evaluated, as one scheduling cycle, on the nodes of all cases, so
// batches hold more than one node and every (pod, node) pair is checked for
// agreement; the case's expectations are checked on its own node, and its
// Status is the node's in sched's cycle.
func run(ctx context.Context, v *host.Version, sched *scheduler, f *casetest.File, counters *host.Counters) *Report {
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
		sched.objects.set(&c)
		if len(c.Nodes) > 0 {
			r.Cases = append(r.Cases, runNodes(ctx, v, sched, c, r))
			continue
		}
		i++
		res := Case{Name: c.Name, Node: nodes[i].Node().Name}
		problem := func(format string, args ...any) { res.Problems = append(res.Problems, fmt.Sprintf(format, args...)) }
		where := func(j int) string { return fmt.Sprintf("node %s of case %q", nodes[j].Node().Name, oneNode[j].Name) }
		if nodeErrs[i] != nil {
			problem("%v", nodeErrs[i])
		}
		waiting, release, err := placeReserved(ctx, v, &c, counters)
		if err != nil {
			problem("%v", err)
			r.Cases = append(r.Cases, res)
			release()
			continue
		}
		v1pod, err := Pod(c.CasePod())
		if err != nil {
			problem("%v", err)
			r.Cases = append(r.Cases, res)
			release()
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
		res.Status = sched.statuses(ctx, v1pod, nodes, view)[i]
		if ferr != nil {
			problem("%v", ferr)
		} else if filters.single != nil {
			// The scheduler does not filter a node outside the PreFilter result.
			res.FailurePolicyApplied = filters.policyError(i) && (!pc.NodeNamesSet || slices.Contains(pc.NodeNames, res.Node))
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
		runGates(ctx, v, &c, v1pod, pod, pc, nodes[i], waiting, &res, problem)
		if c.Reserve != nil {
			runReserve(ctx, v, &c, pod, nodes[i], counters, waiting, &res, problem)
		}
		if c.Permit != nil {
			runPermit(ctx, v, &c, pod, nodes[i], waiting, &res, problem)
		}
		release()
		counters.RollBack(string(v1pod.UID), 0)
		r.Cases = append(r.Cases, res)
	}
	return r
}

// runGates checks a case's preEnqueue and preBind expectations: the gate
// with a pod state of its own (a new cycle, as the plugin calls it), the
// prebind in the case's cycle on its node.
func runGates(ctx context.Context, v *host.Version, c *casetest.Case, v1pod *v1.Pod, pod *host.PodState, pc *host.PolicyCycle, node fwk.NodeInfo, waiting *caseWaiting, res *Case, problem func(string, ...any)) {
	if want := c.PreEnqueue; want != nil {
		gpc := new(host.PolicyCycle)
		_, got, ok := callIf(ctx, v, host.CallPreEnqueue, host.NewPodState(v1pod), nil, gpc, problem)
		if !ok {
			return
		}
		res.PreEnqueue = spell(got)
		checkResult("preEnqueue", got, want.Code, want.Reason, problem)
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
		_, got, ok := callIf(ctx, v, host.CallPreBind, pod, node, bpc, problem)
		if !ok {
			return
		}
		res.PreBind = spell(got)
		if !bpc.Patch.Empty() {
			res.PreBind += "; " + PatchString(bpc.Patch.Labels, bpc.Patch.Annotations)
		}
		if p := casetest.CheckPreBind(want, got.Code, got.Reason, bpc.Patch.Labels, bpc.Patch.Annotations); p != "" {
			problem("%s", p)
		}
	}
	// postfilter in the case's cycle (after its prefilter), postbind on
	// its node, each with the cycle's state.
	for _, after := range []struct {
		want  *casetest.Expect
		point host.CallKind
		node  fwk.NodeInfo
		out   *string
	}{{c.PostFilter, host.CallPostFilter, nil, &res.PostFilter}, {c.PostBind, host.CallPostBind, node, &res.PostBind}} {
		if after.want == nil {
			continue
		}
		apc := &host.PolicyCycle{}
		apc.State, apc.Waiting = pc.State, waiting
		_, got, ok := callIf(ctx, v, after.point, pod, after.node, apc, problem)
		if !ok {
			return
		}
		*after.out = spell(got)
		checkResult(abi.Points[after.point].Name, got, after.want.Code, after.want.Reason, problem)
	}
}

// callIf calls point when the module exports it and returns its result
// (the zero Result, Success, when it does not); ok is false when the call
// failed, which is the case's problem.
func callIf(ctx context.Context, v *host.Version, point host.CallKind, pod *host.PodState, node fwk.NodeInfo, pc *host.PolicyCycle, problem func(string, ...any)) (ret int64, got host.Result, ok bool) {
	if !v.Exports().Has(point) {
		return 0, host.Result{}, true
	}
	ret, got, cerr := v.Call(ctx, point, pod, node, pc, nil)
	if cerr != nil {
		problem("%s: %v", abi.Points[point].Export, cerr)
		return 0, host.Result{}, false
	}
	return ret, got, true
}

// checkResult reports a result other than the expected code and reason
// (any reason when it is "").
func checkResult(name string, got host.Result, code int32, reason string, problem func(string, ...any)) {
	if got.Code != code || (reason != "" && got.Reason != reason) {
		problem("%s: got %s, want %s", name, spell(got), spell(host.Result{Code: code, Reason: reason}))
	}
}

// filterResults are one pod's filter verdicts on every node: single calls,
// and batch calls when the module has filter_nodes (nil otherwise).
// prefilter is true when prefilter's result is every node's.
type filterResults struct {
	single, batch []host.Result
	prefilter     bool
}

// policyError reports whether node j's verdict is the policy's error
// (verdict.Read), so that the failurePolicy decided its status.
func (fr filterResults) policyError(j int) bool {
	point := host.CallFilter
	if fr.prefilter {
		point = host.CallPreFilter
	}
	_, ok := verdict.Read(point, fr.single[j].Code, fr.single[j].Reason)
	return !ok
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
