//go:build !wasip1

package casetest

import (
	"fmt"
	"testing"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
	"github.com/wasmsched/wasmsched/guest-sdk/abi"
)

// RunNative runs every case of the file against the registered functions.
func RunNative(t *testing.T, path string) {
	t.Helper()
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	sdk.SetConfig(f.Config)
	sdk.SetPatchPrefixes(f.PatchPrefixes...)
	defer sdk.SetPatchPrefixes()
	// The table's reads, as the compiled policy gets them: a read it does
	// not declare fails natively too.
	if err := sdk.SetReads(f.Reads); err != nil {
		t.Fatalf("%s: reads: %v", path, err)
	}
	defer sdk.AllowAllReads()
	for _, c := range f.Cases {
		clock, _ := c.Clock() // Load checked it
		sdk.SetNow(clock)
		// Each case sets every declared read's objects.
		defer c.SetObjects(f.Objects)()
		if c.HasGates() {
			t.Run(c.Name+"/gates", func(t *testing.T) {
				defer sdk.ResetCounters()
				placeReserved(t, &c)
				runGates(t, &c)
			})
		}
		if len(c.Nodes) > 0 {
			t.Run(c.Name, func(t *testing.T) { runNodes(t, &c) })
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			defer sdk.ResetCounters()
			placeReserved(t, &c)
			pod, node := c.CasePod(), c.Node
			sdk.SetCluster(c.ClusterData())
			defer sdk.SetCluster(nil)
			if c.Filter != nil {
				st := sdk.RunPreFilter(&pod)
				if st.IsSuccess() {
					st = sdk.RunFilter(&pod, &node)
				}
				if int32(st.Code) != c.Filter.Code || (c.Filter.Reason != "" && st.Reason != c.Filter.Reason) {
					t.Errorf("filter = %d %q, want %d %q", st.Code, st.Reason, c.Filter.Code, c.Filter.Reason)
				}
			}
			if c.Score != nil {
				// As in the scheduler and `wasmsched test --cases`:
				// prescore, then score.
				if st := sdk.RunPreScore(&pod); !st.IsSuccess() {
					t.Fatalf("prescore = %+v: the policy does not score this pod", st)
				}
				s, st := sdk.RunScore(&pod, &node)
				if !st.IsSuccess() || s != *c.Score {
					t.Errorf("score = %d (%+v), want %d", s, st, *c.Score)
				}
			}
		})
	}
}

// placeReserved reserves the case's reserved pods, then its waiting pods,
// in order, and makes the waiting ones wait at the policy.
func placeReserved(t *testing.T, c *Case) {
	t.Helper()
	for i := range c.Reserved {
		pod, node := c.PlacedPod(i), c.Reserved[i].Node
		if st := sdk.RunReserve(&pod, &node); !st.IsSuccess() {
			t.Fatalf("reserved pod %d (%s) on %s: reserve = %d %q, want success", i, pod.Name, node.Name, st.Code, st.Reason)
		}
	}
	var waiting []sdk.WaitingPodData
	for i := range c.Waiting {
		pod, node := c.WaitingPod(i), c.Waiting[i].Node
		if st := sdk.RunReserve(&pod, &node); !st.IsSuccess() {
			t.Fatalf("waiting pod %d (%s) on %s: reserve = %d %q, want success", i, pod.Name, node.Name, st.Code, st.Reason)
		}
		waiting = append(waiting, sdk.WaitingPodData{UID: pod.UID, Namespace: pod.Namespace, Name: pod.Name, Node: node.Name, Labels: pod.Labels})
	}
	sdk.SetWaiting(waiting)
}

// names maps waiting pods' UIDs to their names.
func names(c *Case, uids []string) []string {
	out := []string{}
	for _, u := range uids {
		for i := range c.Waiting {
			if p := c.WaitingPod(i); p.UID == u {
				u = p.Name
			}
		}
		out = append(out, u)
	}
	return out
}

// runGates checks a case's expectations outside its filters and scores.
func runGates(t *testing.T, c *Case) {
	t.Helper()
	pod, node := c.CasePod(), c.Node
	if want := c.Reserve; want != nil {
		st := sdk.RunReserve(&pod, &node)
		if int32(st.Code) != want.Code || (want.Reason != "" && st.Reason != want.Reason) {
			t.Errorf("reserve = %d %q, want %d %q", st.Code, st.Reason, want.Code, want.Reason)
		}
		if p := CheckCounts("reserve", want.Counts, sdk.Counts()); p != "" {
			t.Error(p)
		}
		if c.Unreserve != nil {
			sdk.RunUnreserve(&pod, &node)
			if p := CheckCounts("unreserve", c.Unreserve.Counts, sdk.Counts()); p != "" {
				t.Error(p)
			}
		}
	}
	if want := c.Permit; want != nil {
		// After the pod's reserve, as the scheduler calls them.
		if c.Reserve == nil {
			if st := sdk.RunReserve(&pod, &node); !st.IsSuccess() {
				t.Fatalf("reserve before permit = %d %q, want success", st.Code, st.Reason)
			}
		}
		st := sdk.RunPermit(&pod, &node)
		var rejected []string
		for u := range sdk.Rejected() {
			rejected = append(rejected, u)
		}
		if p := CheckPermit(want, int32(st.Code), st.Reason, st.Timeout, names(c, sdk.Allowed()), names(c, rejected)); p != "" {
			t.Error(p)
		}
	}
	if c.PreEnqueue != nil {
		st, r := sdk.RunPreEnqueue(&pod)
		if int32(st.Code) != c.PreEnqueue.Code || (c.PreEnqueue.Reason != "" && st.Reason != c.PreEnqueue.Reason) {
			t.Errorf("preEnqueue = %d %q, want %d %q", st.Code, st.Reason, c.PreEnqueue.Code, c.PreEnqueue.Reason)
		}
		if c.Recheck != nil {
			on, _ := c.Recheck.Events()
			after, _ := c.Recheck.Delay()
			if r.On != on || r.After != after {
				t.Errorf("recheck = %v after %s, want %v after %s", r.On, r.After, on, after)
			}
		}
	}
	if c.PreBind != nil {
		sdk.SetCyclePolicies(c.CyclePolicies)
		defer sdk.SetCyclePolicies(nil)
		st, p := sdk.RunPreBind(&pod, &node)
		if problem := CheckPreBind(c.PreBind, int32(st.Code), st.Reason, p.Labels, p.Annotations); problem != "" {
			t.Error(problem)
		}
	}
	if want := c.PostFilter; want != nil {
		// In the pod's own cycle, after its prefilter, as the scheduler
		// calls it once every filter has rejected the pod.
		sdk.SetCluster(c.ClusterData())
		defer sdk.SetCluster(nil)
		sdk.RunPreFilter(&pod)
		if st := sdk.RunPostFilter(&pod); int32(st.Code) != want.Code || (want.Reason != "" && st.Reason != want.Reason) {
			t.Errorf("postFilter = %d %q, want %d %q", st.Code, st.Reason, want.Code, want.Reason)
		}
	}
	if want := c.PostBind; want != nil {
		if st := sdk.RunPostBind(&pod, &node); int32(st.Code) != want.Code || (want.Reason != "" && st.Reason != want.Reason) {
			t.Errorf("postBind = %d %q, want %d %q", st.Code, st.Reason, want.Code, want.Reason)
		}
	}
}

// runNodes runs a case with several nodes through one cycle natively:
// prefilter (and its node subset), filter on each node, then prescore,
// score and normalize_score over the nodes that passed.
func runNodes(t *testing.T, c *Case) {
	t.Helper()
	pod := c.Pod
	sdk.SetCluster(c.ClusterData())
	defer sdk.SetCluster(nil)
	caps := sdk.Capabilities()
	pre := sdk.RunPreFilter(&pod)
	subset, subsetSet := sdk.PreFilterResult()
	allowed := map[string]bool{}
	for _, n := range subset {
		allowed[n] = true
	}
	var feasible []*sdk.NodeData
	for i := range c.Nodes {
		n := &c.Nodes[i]
		st := pre
		switch {
		case !pre.IsSuccess() && pre.Code != sdk.CodeSkip:
		case subsetSet && !allowed[n.Name]:
			st = sdk.Status{Code: sdk.CodeUnschedulableAndUnresolvable}
		case pre.Code != sdk.CodeSkip && caps&abi.Filter.Cap() != 0:
			st = sdk.RunFilter(&pod, n)
		default:
			st = sdk.Success()
		}
		if st.Code == sdk.CodeSkip {
			st = sdk.Success()
		}
		if want, ok := c.Filters[n.Name]; ok && (int32(st.Code) != want.Code || (want.Reason != "" && st.Reason != want.Reason)) {
			t.Errorf("filter on %s = %d %q, want %d %q", n.Name, st.Code, st.Reason, want.Code, want.Reason)
		}
		if st.IsSuccess() {
			feasible = append(feasible, n)
		}
	}
	if c.Scores == nil {
		return
	}
	scores := make([]int64, len(feasible))
	if st := sdk.RunPreScore(&pod); st.Code != sdk.CodeSkip && caps&abi.Score.Cap() != 0 {
		if !st.IsSuccess() {
			t.Fatalf("prescore = %+v", st)
		}
		for j, n := range feasible {
			s, st := sdk.RunScore(&pod, n)
			if !st.IsSuccess() {
				t.Fatalf("score on %s = %+v", n.Name, st)
			}
			scores[j] = s
		}
		if st := sdk.RunNormalizeScoreOn(&pod, feasible, scores); !st.IsSuccess() {
			t.Fatalf("normalize_score = %+v", st)
		}
	}
	got := map[string]int64{}
	for j, n := range feasible {
		got[n.Name] = scores[j]
	}
	if fmt.Sprint(got) != fmt.Sprint(c.Scores) {
		t.Errorf("scores = %v, want %v", got, c.Scores)
	}
}
