package wasmpolicy

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/wasmsched/wasmsched/internal/verdict"
	"github.com/wasmsched/wasmsched/pkg/policyobjects"
)

// A canary is a candidate version of a policy object's policy: it runs in
// Audit right before its primary (the enforcing version) in every cycle,
// so both see the same nodes, and each cycle's verdicts of the two are
// compared when the cycle ends (Reserve or PostFilter). The counts are the
// canary's; the policy-object controller reads them to promote or drop it.

// maxCanaryExamples is how many disagreements a canary keeps to show.
const maxCanaryExamples = 5

// canaryJudge is a canary policy's comparison with its primary.
type canaryJudge struct {
	// of is the primary's name.
	of string

	cycles, changed, rejectedRunning, unblocked, failed atomic.Int64

	mu       sync.Mutex
	examples []string // newest first
}

// counts returns what the canary judged so far.
func (j *canaryJudge) counts() policyobjects.CanaryCounts {
	j.mu.Lock()
	ex := append([]string(nil), j.examples...)
	j.mu.Unlock()
	return policyobjects.CanaryCounts{Cycles: j.cycles.Load(), Changed: j.changed.Load(),
		RejectedRunning: j.rejectedRunning.Load(), Unblocked: j.unblocked.Load(), Failed: j.failed.Load(), Examples: ex}
}

func (j *canaryJudge) example(s string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.examples = append([]string{s}, j.examples...)
	if len(j.examples) > maxCanaryExamples {
		j.examples = j.examples[:maxCanaryExamples]
	}
}

// canaryPair is a canary and its primary in one cycle (policy indexes),
// with the primary's verdicts of the cycle.
type canaryPair struct {
	cand, prim int
	// incomplete: a call of either got no CPU in time, so the cycle is
	// not judged (the machine's overload is neither version's verdict).
	incomplete atomic.Bool
	mu         sync.Mutex
	// podRejected is the primary's PreFilter rejection ("" if none).
	podRejected string
	// nodes are the primary's Filter verdicts: node → reason ("" passes).
	nodes map[string]string
}

// pairCanaries links the cycle's canaries to their primaries; a canary
// whose primary is not in the cycle judges nothing.
func (c *cycleData) pairCanaries() {
	for i, p := range c.policies {
		if p.canary == nil {
			continue
		}
		for j, q := range c.policies {
			if q.cfg.Name == p.canary.of && q.canary == nil {
				c.hasPrimaries = true
				pair := &canaryPair{cand: i, prim: j, nodes: map[string]string{}}
				c.runs[j].primary = pair
				c.canaries = append(c.canaries, pair)
			}
		}
	}
}

// recordPrimary keeps primary i's verdict v on node ("" for the pod's
// PreFilter), when i has a canary in the cycle. A failure's verdict (the
// failurePolicy's) is not the primary's decision and is not kept; a call
// that got no CPU leaves the cycle unjudged.
func (c *cycleData) recordPrimary(i int, node string, v verdict.Verdict) {
	if !c.hasPrimaries || c.runs[i].primary == nil {
		return
	}
	pair := c.runs[i].primary
	if v == notStartedVerdict {
		pair.incomplete.Store(true)
		return
	}
	if v.Failure {
		return
	}
	rejected, reason := v.Rejects(), v.Reason
	if rejected && reason == "" {
		reason = "(no reason given)"
	}
	pair.mu.Lock()
	if node == "" {
		pair.podRejected = reason
	} else {
		pair.nodes[node] = reason
	}
	pair.mu.Unlock()
}

// canaryIncomplete marks the pair of canary i: one of its calls got no CPU.
func (c *cycleData) canaryIncomplete(i int) {
	for _, pair := range c.canaries {
		if pair.cand == i {
			pair.incomplete.Store(true)
		}
	}
}

// judgeCanaries compares each canary of the cycle with its primary, the
// cycle having ended with pod bound to nodeName ("" when no node fit).
func (w *WasmPolicy) judgeCanaries(logger klog.Logger, c *cycleData, pod *v1.Pod, nodeName string) {
	for _, pair := range c.canaries {
		cand, prim := c.policies[pair.cand], c.policies[pair.prim]
		j := cand.canary
		var candPod string
		candNodes := map[string]string{}
		if c.runs[pair.cand].audit != nil {
			a := c.runs[pair.cand].audit
			a.mu.Lock()
			candPod = a.podRejected
			for n, r := range a.rejected {
				candNodes[n] = r
			}
			a.mu.Unlock()
		}
		if pair.incomplete.Load() {
			continue
		}
		pair.mu.Lock()
		primPod, primNodes := pair.podRejected, pair.nodes
		pair.mu.Unlock()
		// A primary in Audit mode passes every node it judged; its
		// rejections are in its audit state.
		if prim.audit() && c.runs[pair.prim].audit != nil {
			a := c.runs[pair.prim].audit
			a.mu.Lock()
			if a.podRejected != "" {
				primPod = a.podRejected
			}
			for n, r := range a.rejected {
				if _, judged := primNodes[n]; judged {
					primNodes[n] = r
				}
			}
			a.mu.Unlock()
		}
		// A candidate the cycle stopped (a failed call, its open breaker,
		// the pod's quarantine) or without a module failed: a cycle
		// against it.
		candFailed := c.stopReason(pair.cand)
		if c.runs[pair.cand].module == nil {
			candFailed = "its module is not loaded"
		}
		// The candidate's verdict on a node: its own rejection, its
		// rejection of the whole pod, or a node its prefilter_nodes left
		// out (enforced, the scheduler would not filter it).
		var named map[string]bool
		if pc := &c.runs[pair.cand].pc; pc.NodeNamesSet {
			named = make(map[string]bool, len(pc.NodeNames))
			for _, n := range pc.NodeNames {
				named[n] = true
			}
		}
		candOn := func(n string) string {
			if candPod != "" {
				return candPod
			}
			if named != nil && !named[n] {
				return outsidePreFilterResult
			}
			return candNodes[n]
		}
		// The nodes both judged: those the primary judged, and, when
		// the primary does not filter this pod (it passes them all),
		// those the candidate rejected.
		judged := make(map[string]string, len(primNodes))
		for n, r := range primNodes {
			judged[n] = r
		}
		if c.runs[pair.prim].filterSkipped && primPod == "" {
			for n := range candNodes {
				if _, ok := judged[n]; !ok {
					judged[n] = ""
				}
			}
		}
		if len(judged) == 0 && primPod == "" && candPod == "" && candFailed == "" {
			continue // neither version judged anything: an earlier policy or plugin decided
		}
		var differ, admits []string
		for n, r := range judged {
			cr := candOn(n)
			if (cr != "") != (r != "") {
				differ = append(differ, n)
				if r != "" {
					admits = append(admits, n)
				}
			}
		}
		sort.Strings(differ)
		sort.Strings(admits)
		changed := len(differ) > 0 || (candPod != "") != (primPod != "") || candFailed != ""
		rejectedRunning := nodeName != "" && candOn(nodeName) != ""
		unblocked := nodeName == "" && primPod == "" && len(admits) > 0
		j.cycles.Add(1)
		kind := "same"
		if changed {
			j.changed.Add(1)
			kind = "changed"
		}
		canaryCycles.WithLabelValues(cand.cfg.Name, kind).Inc()
		who := klog.KObj(pod).String()
		verdict := func(r string) string {
			if r == "" {
				return "Pass"
			}
			return "rejects: " + r
		}
		if candFailed != "" {
			j.failed.Add(1)
		}
		switch {
		case candFailed != "":
			j.example(fmt.Sprintf("%s: the candidate failed: %s", who, candFailed))
		case rejectedRunning:
			j.rejectedRunning.Add(1)
			canaryFindings.WithLabelValues(cand.cfg.Name, "rejected_running").Inc()
			j.example(fmt.Sprintf("%s was bound to %s, which the candidate rejects: %s", who, nodeName, candOn(nodeName)))
		case unblocked:
			j.unblocked.Add(1)
			canaryFindings.WithLabelValues(cand.cfg.Name, "unblocked").Inc()
			j.example(fmt.Sprintf("%s found no node; the candidate admits %s, which %s rejects: %s", who, strings.Join(first(admits, 3), ", "), prim.cfg.Name, judged[admits[0]]))
		case (candPod != "") != (primPod != ""):
			j.example(fmt.Sprintf("%s at PreFilter: now %s; candidate %s", who, verdict(primPod), verdict(candPod)))
		case changed:
			n := differ[0]
			j.example(fmt.Sprintf("%s on %d node(s), e.g. %s: now %s; candidate %s", who, len(differ), n, verdict(judged[n]), verdict(candOn(n))))
		}
		if changed {
			logger.V(4).Info("Canary disagrees with the enforcing version", "pod", klog.KObj(pod), "policy", prim.cfg.Name, "canary", cand.cfg.Name, "nodes", len(differ), "node", nodeName)
		}
	}
}

func first(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
