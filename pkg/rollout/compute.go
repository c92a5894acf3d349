package rollout

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	k8sframework "k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/schedcycle"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

// Input says what to report on, beyond the two sets.
type Input struct {
	// Policy is the policy the candidate set replaces.
	Policy string
	// Current and Candidate describe the policy's two versions.
	Current, Candidate Version
	// TeamLabel is the pod label whose value groups rejected pods ("":
	// no team grouping).
	TeamLabel string
	// Sample is how many of the most recently bound pods are placed
	// again by both sets; a negative value places every running pod.
	Sample int
	// PlacementTime bounds the placement phase (0: no bound); the
	// report says when it stopped early.
	PlacementTime time.Duration
	// NotEvaluated are the profile's plugins the sets left out.
	NotEvaluated []string
	// Progress, when set, is told how far each phase is.
	Progress func(phase string, done, total int)
}

// Compute reports what replacing the policy by its candidate would change
// on snap. snapshot is the frameworks' view of snap (snap.Cache()); both
// sets were built over it. The placement phase
// mutates snapshot and restores it.
func Compute(ctx context.Context, in Input, snap *Snapshot, snapshot *cache.Snapshot, cur, cand *Set) (*Report, error) {
	start := time.Now()
	profile := cur.Framework.ProfileName()
	r := &Report{
		APIVersion: APIVersion, Kind: Kind, Policy: in.Policy, Profile: profile,
		Current: in.Current, Candidate: in.Candidate, NotEvaluated: in.NotEvaluated,
		Snapshot:        SnapshotInfo{ResourceVersion: snap.ResourceVersion, TakenAt: snap.TakenAt.UTC().Format(time.RFC3339), Nodes: len(snap.Nodes)},
		RejectedRunning: []RunningPod{}, RejectedRunningGroups: []Group{}, Pending: []PendingPod{},
		Placements: Placements{Pods: []Placement{}},
	}
	nodes, err := snapshot.NodeInfos().List()
	if err != nil {
		return nil, err
	}
	var running, pending []*v1.Pod
	for _, p := range snap.Pods {
		if p.Spec.SchedulerName != profile || p.DeletionTimestamp != nil || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		if p.Spec.NodeName == "" {
			pending = append(pending, p)
		} else if _, err := snapshot.NodeInfos().Get(p.Spec.NodeName); err == nil {
			running = append(running, p)
		}
	}
	r.Snapshot.RunningPods, r.Snapshot.PendingPods = len(running), len(pending)
	costs := [2]costSum{}
	progress := in.Progress
	if progress == nil {
		progress = func(string, int, int) {}
	}

	// Running pods: each set's verdict of the policy on the pod's own
	// node, the pod taken off it (as if it were placed again there).
	logger := klog.FromContext(ctx)
	for i, pod := range running {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			progress("running pods", i, len(running))
		}
		ni, _ := snapshot.NodeInfos().Get(pod.Spec.NodeName)
		without := ni.Snapshot().(*k8sframework.NodeInfo)
		if err := without.RemovePod(logger, pod); err != nil {
			return nil, fmt.Errorf("pod %s on node %s: %w", klog.KObj(pod), pod.Spec.NodeName, err)
		}
		one := []fwk.NodeInfo{without}
		vc := policyVerdict(cur.Plugin.Explain(ctx, pod, one), in.Policy, 0, &costs[0])
		vn := policyVerdict(cand.Plugin.Explain(ctx, pod, one), in.Policy, 0, &costs[1])
		if !vn.rejects() {
			continue
		}
		rp := RunningPod{Namespace: pod.Namespace, Name: pod.Name, Node: pod.Spec.NodeName, Team: team(pod, in.TeamLabel),
			Verdict: vn.verdict, Reason: vn.reason, Current: "Pass"}
		if vc.rejects() {
			rp.Current = vc.verdict + ": " + vc.reason
			r.Summary.RejectedRunningAlready++
		}
		r.RejectedRunning = append(r.RejectedRunning, rp)
	}
	progress("running pods", len(running), len(running))
	sort.Slice(r.RejectedRunning, func(i, j int) bool {
		a, b := r.RejectedRunning[i], r.RejectedRunning[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	r.Summary.RejectedRunning = len(r.RejectedRunning)
	r.RejectedRunningGroups = groups(r.RejectedRunning)

	// Pending pods: every node, through each set's whole framework (is
	// any node feasible?) and through the policy alone (its reasons).
	for i, pod := range pending {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		progress("pending pods", i, len(pending))
		var f [2]Feasibility
		for k, set := range []*Set{cur, cand} {
			res := filteredOf(schedcycle.Run(ctx, set.Framework, intree.NewCycleState(), pod, nodes))
			f[k] = Feasibility{FeasibleNodes: res.feasible, Message: res.message(len(nodes)), PolicyRejects: []ReasonCount{}}
			ex := set.Plugin.Explain(ctx, pod, nodes)
			f[k].PolicyRejects = policyRejects(ex, in.Policy, &costs[k])
		}
		change := changeOf(f[0], f[1])
		if change == "" {
			continue
		}
		r.Pending = append(r.Pending, PendingPod{Namespace: pod.Namespace, Name: pod.Name, Team: team(pod, in.TeamLabel), Change: change, Current: f[0], Candidate: f[1]})
		switch change {
		case ChangeNewlySchedulable:
			r.Summary.NewlySchedulable++
		case ChangeNewlyStranded:
			r.Summary.NewlyStranded++
		}
	}
	progress("pending pods", len(pending), len(pending))
	sort.Slice(r.Pending, func(i, j int) bool {
		a, b := r.Pending[i], r.Pending[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	r.Summary.ChangedPending = len(r.Pending)

	// Placements: the most recently bound pods, each taken off its node
	// and placed again by each set.
	sample := recentlyBound(running)
	r.Placements.Eligible = len(sample)
	if in.Sample >= 0 && len(sample) > in.Sample {
		sample = sample[:in.Sample]
	}
	placeStart := time.Now()
	for i, pod := range sample {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if in.PlacementTime > 0 && time.Since(placeStart) > in.PlacementTime {
			r.Placements.Truncated = true
			break
		}
		progress("placements", i, len(sample))
		pl, err := placeAgain(ctx, logger, snapshot, pod, cur, cand)
		if err != nil {
			return nil, err
		}
		r.Placements.Pods = append(r.Placements.Pods, pl)
		if pl.Moved {
			r.Placements.Moved++
		}
	}
	progress("placements", len(r.Placements.Pods), len(sample))
	sort.Slice(r.Placements.Pods, func(i, j int) bool {
		a, b := r.Placements.Pods[i], r.Placements.Pods[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	r.Placements.Sampled = len(r.Placements.Pods)
	r.Summary.SampledPlacements, r.Summary.MovedPlacements = r.Placements.Sampled, r.Placements.Moved

	r.Cost = Cost{Current: costs[0].cost(), Candidate: costs[1].cost()}
	if c, n := r.Cost.Current.FilterNanosPerNode, r.Cost.Candidate.FilterNanosPerNode; c > 0 && n > 0 {
		r.Cost.FilterRatio = round2(n / c)
	}
	r.DurationSeconds = float64(time.Since(start).Milliseconds()) / 1000
	return r, nil
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

func team(pod *v1.Pod, label string) string {
	if label == "" {
		return ""
	}
	return pod.Labels[label]
}

// verdictOf is one set's verdict of the policy on one node.
type verdictOf struct{ verdict, reason string }

// rejects is true for a rejection (or a failed call), false for Pass,
// Skip and a pod outside the policy's scope.
func (v verdictOf) rejects() bool {
	return v.verdict != "" && v.verdict != "Pass" && v.verdict != "Skip"
}

// policyVerdict is the policy's verdict on node j of ex, adding its time
// to c; a policy whose scope does not take the pod passes.
func policyVerdict(ex *wasmpolicy.Explanation, policy string, j int, c *costSum) verdictOf {
	for _, pv := range ex.Nodes[j].Policies {
		if pv.Policy != policy {
			continue
		}
		c.add(pv)
		return verdictOf{pv.Verdict, pv.Reason}
	}
	return verdictOf{}
}

// policyRejects counts the policy's rejections in ex by reason.
func policyRejects(ex *wasmpolicy.Explanation, policy string, c *costSum) []ReasonCount {
	counts := map[string]int{}
	for j := range ex.Nodes {
		if v := policyVerdict(ex, policy, j, c); v.rejects() {
			counts[v.reason]++
		}
	}
	out := []ReasonCount{}
	for reason, n := range counts {
		out = append(out, ReasonCount{Reason: reason, Nodes: n})
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Nodes > out[j].Nodes || out[i].Nodes == out[j].Nodes && out[i].Reason < out[j].Reason
	})
	return out
}

// changeOf classifies how a pending pod's verdicts change ("" if not).
func changeOf(cur, cand Feasibility) string {
	switch {
	case cur.FeasibleNodes == 0 && cand.FeasibleNodes > 0:
		return ChangeNewlySchedulable
	case cur.FeasibleNodes > 0 && cand.FeasibleNodes == 0:
		return ChangeNewlyStranded
	case cand.FeasibleNodes > cur.FeasibleNodes:
		return ChangeMoreNodes
	case cand.FeasibleNodes < cur.FeasibleNodes:
		return ChangeFewerNodes
	}
	if len(cur.PolicyRejects) != len(cand.PolicyRejects) {
		return ChangeReasons
	}
	for i := range cur.PolicyRejects {
		if cur.PolicyRejects[i] != cand.PolicyRejects[i] {
			return ChangeReasons
		}
	}
	return ""
}

// groups counts rejected running pods by namespace, team and reason.
func groups(pods []RunningPod) []Group {
	counts := map[Group]int{}
	for _, p := range pods {
		counts[Group{Namespace: p.Namespace, Team: p.Team, Reason: p.Reason}]++
	}
	out := make([]Group, 0, len(counts))
	for g, n := range counts {
		g.Pods = n
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Pods != b.Pods {
			return a.Pods > b.Pods
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Team != b.Team {
			return a.Team < b.Team
		}
		return a.Reason < b.Reason
	})
	return out
}

// recentlyBound orders pods by when they were bound (their PodScheduled
// condition, else their creation), newest first.
func recentlyBound(pods []*v1.Pod) []*v1.Pod {
	at := func(p *v1.Pod) time.Time {
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionTrue {
				return c.LastTransitionTime.Time
			}
		}
		return p.CreationTimestamp.Time
	}
	out := append([]*v1.Pod(nil), pods...)
	sort.SliceStable(out, func(i, j int) bool {
		ti, tj := at(out[i]), at(out[j])
		if !ti.Equal(tj) {
			return ti.After(tj)
		}
		return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name
	})
	return out
}

// filtered is one set's Filter over every node.
type filtered struct {
	feasible int
	// reasons counts each rejection reason over the nodes; podReason is a
	// PreFilter rejection of the whole pod.
	reasons   map[string]int
	podReason string
}

// filteredOf reads a cycle's Filter outcome.
func filteredOf(res schedcycle.Result) filtered {
	out := filtered{reasons: map[string]int{}, feasible: res.Feasible()}
	if st := res.PreFilter; st != nil {
		out.podReason = strings.Join(st.Reasons(), ", ")
		if out.podReason == "" {
			out.podReason = st.Message()
		}
		return out
	}
	for _, n := range res.Nodes {
		if n.Status != nil {
			for _, r := range n.Status.Reasons() {
				out.reasons[r]++
			}
		}
	}
	return out
}

// message is FailedScheduling's message when no node is feasible.
func (f filtered) message(nodes int) string {
	if f.feasible > 0 {
		return ""
	}
	if f.podReason != "" {
		return fmt.Sprintf("0/%d nodes are available: %s.", nodes, f.podReason)
	}
	parts := make([]string, 0, len(f.reasons))
	for reason, n := range f.reasons {
		parts = append(parts, fmt.Sprintf("%d %s", n, reason))
	}
	sort.Strings(parts)
	return fmt.Sprintf("0/%d nodes are available: %s.", nodes, strings.Join(parts, ", "))
}

// place is a set's choice of node for pod: its scheduling cycle over
// every node (schedcycle.Run), and each feasible node's total score.
func place(ctx context.Context, fw intree.Framework, pod *v1.Pod, nodes []fwk.NodeInfo) (Choice, map[string]int64) {
	res := schedcycle.Run(ctx, fw, intree.NewCycleState(), pod, nodes)
	ch := Choice{FeasibleNodes: res.Feasible(), Nodes: res.Best}
	scores := map[string]int64{}
	for _, n := range res.Nodes {
		if n.Score != nil {
			scores[n.Name] = *n.Score
		}
	}
	if len(res.Best) > 0 {
		ch.Score = scores[res.Best[0]]
	}
	return ch, scores
}

// placeAgain takes pod off its node in snapshot, places it with each set,
// and puts the snapshot back.
func placeAgain(ctx context.Context, logger klog.Logger, snapshot *cache.Snapshot, pod *v1.Pod, cur, cand *Set) (Placement, error) {
	pl := Placement{Namespace: pod.Namespace, Name: pod.Name, BoundNode: pod.Spec.NodeName}
	if err := snapshot.StartMutations(); err != nil {
		return pl, err
	}
	defer func() { _ = snapshot.EndMutations() }()
	if err := snapshot.RemovePod(logger, pod, pod.Spec.NodeName); err != nil {
		return pl, fmt.Errorf("pod %s: %w", klog.KObj(pod), err)
	}
	nodes, err := snapshot.NodeInfos().List()
	if err != nil {
		return pl, err
	}
	// Unbound, as it was when the scheduler placed it (NodeName would
	// hold it to its node).
	unbound := pod.DeepCopy()
	unbound.Spec.NodeName = ""
	var curScores, candScores map[string]int64
	pl.Current, curScores = place(ctx, cur.Framework, unbound, nodes)
	pl.Candidate, candScores = place(ctx, cand.Framework, unbound, nodes)
	pl.Moved = !slices.Equal(pl.Current.Nodes, pl.Candidate.Nodes)
	for _, n := range pl.Current.Nodes {
		s, ok := candScores[n]
		if !ok {
			pl.ScoreDelta = nil
			break
		}
		if d := s - curScores[n]; pl.ScoreDelta == nil || d < *pl.ScoreDelta {
			pl.ScoreDelta = &d
		}
	}
	return pl, nil
}

// costSum adds up a version's guest time per node evaluation.
type costSum struct {
	mu                    sync.Mutex
	filters, scores       int
	filterTime, scoreTime time.Duration
}

func (c *costSum) add(pv wasmpolicy.PolicyVerdict) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if pv.FilterTime > 0 { // the filter ran (not a Skip, a PreFilter verdict or no filter)
		c.filters++
		c.filterTime += pv.FilterTime
	}
	if pv.RawScore != nil {
		c.scores++
		c.scoreTime += pv.ScoreTime
	}
}

func (c *costSum) cost() PolicyCost {
	pc := PolicyCost{FilterCalls: c.filters, ScoreCalls: c.scores}
	if c.filters > 0 {
		pc.FilterNanosPerNode = round2(float64(c.filterTime.Nanoseconds()) / float64(c.filters))
	}
	if c.scores > 0 {
		pc.ScoreNanosPerNode = round2(float64(c.scoreTime.Nanoseconds()) / float64(c.scores))
	}
	return pc
}
