package wasmpolicy

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework"
	"github.com/wasmsched/wasmsched/internal/verdict"
)

// NormalizeScore normalizes each policy's scores (with the guest's
// normalize_score when it has one; otherwise they must already be 0..100)
// and combines them (scoreSum) into the plugin's score.
func (w *WasmPolicy) NormalizeScore(ctx context.Context, state fwk.CycleState, pod *v1.Pod, scores framework.NodeScoreList) *fwk.Status {
	c := w.cycleFor(state, pod)
	sum := newScoreSum(len(scores))
	var st *fwk.Status // a recorded cycle goes on to the other policies
	for i, p := range c.policies {
		if !c.scoring || c.runs[i].scoreSkipped {
			continue
		}
		vals, v := w.normalizePolicy(ctx, c, i, scores, !p.audit() || c.record != nil)
		if c.record != nil {
			why := ""
			if v.Rejects() {
				why = p.status(host.CallNormalizeScore, v).Message()
			}
			c.record.normalized(scoreNames(scores), i, vals, why)
		}
		if v.Rejects() {
			if !p.audit() && st == nil {
				st = p.status(host.CallNormalizeScore, v)
			}
			if c.record == nil {
				return st
			}
			continue
		}
		if vals == nil {
			continue
		}
		if p.audit() {
			if c.record != nil {
				continue // no audit events from a tool's cycle
			}
			c.auditFor(i).setScores(scores, vals)
			continue
		}
		sum.add(p.cfg.Weight, vals)
	}
	if st != nil {
		return st
	}
	for j := range scores {
		scores[j].Score = sum.score(j)
	}
	return nil
}

// scoreNames are the names of a score list's nodes.
func scoreNames(scores framework.NodeScoreList) []string {
	out := make([]string, len(scores))
	for j := range scores {
		out[j] = scores[j].Name
	}
	return out
}

// normalizePolicy returns policy i's final scores for the nodes of the list,
// in list order: its raw scores, rescaled by its normalize_score when it
// has one, and checked to be in 0..100. vals is nil when the policy's
// scores do not count (a failure that its failurePolicy ignores, or that
// rejects, in which case the verdict says so).
func (w *WasmPolicy) normalizePolicy(ctx context.Context, c *cycleData, i int, scores framework.NodeScoreList, enforce bool) ([]int64, verdict.Verdict) {
	p, m := c.policies[i], c.runs[i].module
	if why := c.stopReason(i); why != "" {
		// Stopped while scoring: the scores it gave some nodes do not count.
		return nil, p.onFailure(host.CallNormalizeScore, why, enforce)
	}
	vals := make([]int64, len(scores))
	for j := range scores {
		vals[j] = c.rawScore(i, j, scores[j].Name)
	}
	if m.Exports().Has(host.CallNormalizeScore) {
		c.runs[i].pc.Scored = c.scoredNodes(scores)
		_, res, cerr := p.call(ctx, m, host.CallNormalizeScore, c, i, nil, vals)
		if cerr != nil {
			return nil, p.callFailed(ctx, c, i, host.CallNormalizeScore, cerr, enforce)
		}
		if v := p.read(ctx, host.CallNormalizeScore, res, enforce, nil); res.Code != abi.CodeSuccess {
			return nil, v // its scores do not count, whatever the failurePolicy made of it
		}
	}
	for j, s := range vals {
		if s < framework.MinNodeScore || s > framework.MaxNodeScore {
			p.m.evaluated(host.CallNormalizeScore, rError)
			klog.FromContext(ctx).Error(nil, "Policy score out of range", "policy", p.cfg.Name, "node", scores[j].Name, "score", s, "min", framework.MinNodeScore, "max", framework.MaxNodeScore, "failurePolicy", p.cfg.FailurePolicy, "mode", modeOf(enforce))
			return nil, p.onFailure(host.CallNormalizeScore, fmt.Sprintf("score out of range %d..%d (register a NormalizeScore function to rescale raw scores)", framework.MinNodeScore, framework.MaxNodeScore), enforce)
		}
	}
	return vals, verdict.Pass
}

// rawScore finds policy i's raw score for entry j (node name) of the score
// list, which the framework builds in the order of the nodes given to PreScore.
func (c *cycleData) rawScore(i, j int, name string) int64 {
	if j < len(c.scoreNodes) && c.scoreNodes[j].Node().Name == name {
		return c.runs[i].rawScores[j]
	}
	for k, ni := range c.scoreNodes {
		if ni.Node().Name == name {
			return c.runs[i].rawScores[k]
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[i].rawScoresOffList[name]
}

// scoredNodes are the NodeInfos of the score list's entries, in its order,
// so normalize_score can select them (docs/abi.md §3); nil when a name is
// not among the nodes given to PreScore.
func (c *cycleData) scoredNodes(scores framework.NodeScoreList) []fwk.NodeInfo {
	out := make([]fwk.NodeInfo, len(scores))
	var byName map[string]fwk.NodeInfo
	for j, s := range scores {
		if j < len(c.scoreNodes) && c.scoreNodes[j].Node().Name == s.Name {
			out[j] = c.scoreNodes[j]
			continue
		}
		if byName == nil {
			byName = make(map[string]fwk.NodeInfo, len(c.scoreNodes))
			for _, ni := range c.scoreNodes {
				byName[ni.Node().Name] = ni
			}
		}
		ni, ok := byName[s.Name]
		if !ok {
			return nil
		}
		out[j] = ni
	}
	return out
}

// scoreSum is how the plugin combines its policies' scores, the one place
// it is done (NormalizeScore and Explain): Σ weight·score / Σ weight per
// node, which stays in 0..100; 0 when no policy scored.
type scoreSum struct {
	total   []int64
	weights int64
}

func newScoreSum(n int) *scoreSum { return &scoreSum{total: make([]int64, n)} }

// add counts one policy's normalized scores with its weight.
func (s *scoreSum) add(weight int32, vals []int64) {
	w := int64(weight)
	s.weights += w
	for j, v := range vals {
		s.total[j] += w * v
	}
}

// score is node j's combined score.
func (s *scoreSum) score(j int) int64 {
	if s.weights == 0 {
		return 0
	}
	return s.total[j] / s.weights
}
