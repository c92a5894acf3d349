package wasmpolicy

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework"
)

// Audit mode runs a policy without enforcing it. Its verdicts are collected
// per cycle and reported once the cycle's outcome is known: at Reserve when
// the pod got a node (what the policy would have said about that node), at
// PostFilter when it got none. The report is a Normal Event on the pod
// (reason WasmPolicyAudit), a log line and the audit_verdicts metric.

// auditState is one audited policy's verdicts in one cycle.
type auditState struct {
	mu          sync.Mutex
	podRejected string            // PreFilter rejection reason, if any
	rejected    map[string]string // node → reason
	scores      map[string]int64  // node → normalized score
	message     string            // what its postfilter would have added
	refused     map[string]string // node → why its reserve would have refused it
}

func (a *auditState) refuse(node, reason string) {
	a.mu.Lock()
	if a.refused == nil {
		a.refused = map[string]string{}
	}
	a.refused[node] = orUnspecified(reason)
	a.mu.Unlock()
}

func (a *auditState) postFilter(reason string) {
	a.mu.Lock()
	a.message = orUnspecified(reason)
	a.mu.Unlock()
}

func (a *auditState) rejectPod(reason string) {
	a.mu.Lock()
	a.podRejected = orUnspecified(reason)
	a.mu.Unlock()
}

func (a *auditState) rejectNode(node, reason string) {
	a.mu.Lock()
	if a.rejected == nil {
		a.rejected = map[string]string{}
	}
	a.rejected[node] = orUnspecified(reason)
	a.mu.Unlock()
}

func (a *auditState) setScores(list framework.NodeScoreList, vals []int64) {
	a.mu.Lock()
	a.scores = make(map[string]int64, len(list))
	for j := range list {
		a.scores[list[j].Name] = vals[j]
	}
	a.mu.Unlock()
}

func orUnspecified(r string) string {
	if r == "" {
		return "(no reason given)"
	}
	return r
}

func resultName(code int32) string { return results[resultOf(code)] }

// Reserve implements framework.ReservePlugin. It calls the reserve of the
// policies that export one (reserve.go), which may refuse the placement;
// then it reports what audited policies would have decided about the
// chosen node, and keeps a copy of the node for the policies' prebind. In
// a pod-group cycle the placement is a trial that the cycle may undo:
// Reserve then also marks the node for the host's caches (podgroup.go),
// and the report waits for the Reserve of the placement that stands,
// which kube-scheduler runs on the same CycleState once the group's cycle
// is over.
func (w *WasmPolicy) Reserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	trial := framework.InPodGroupCycle(state)
	if trial {
		w.podGroupAssumed(pod, nodeName)
	}
	c := readCycle(state)
	if c != nil && !trial {
		// Before the guests' reserve: a refusal runs Unreserve, which may
		// run on a binding goroutine and reads this copy, never the
		// snapshot the next cycle updates.
		w.keepBindNode(c, nodeName)
	}
	if c != nil && c.has(host.CallReserve) {
		if st := w.reserveGuests(ctx, c, nodeName); st != nil {
			return st
		}
	}
	if trial {
		return nil
	}
	w.reportAudit(ctx, state, pod, nodeName)
	return nil
}

// Unreserve implements framework.ReservePlugin: the pod's placement is
// undone. Every count the pod holds at the cycle's policies is given back,
// and their unreserve runs (reserve.go); in a pod-group cycle, the node's
// mark comes off before the cycle takes the pod out of it.
func (w *WasmPolicy) Unreserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) {
	trial := framework.InPodGroupCycle(state)
	if c := readCycle(state); c != nil {
		w.unreserveGuests(ctx, c, nodeName, trial)
	}
	if trial {
		w.podGroupForgotten(pod, nodeName)
	}
}

// reportAudit logs a line per audited policy that had something to say in
// this cycle, and emits one Event with all of them (auditNotes). nodeName
// is "" when no node fit.
func (w *WasmPolicy) reportAudit(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) {
	c := readCycle(state)
	if c != nil && c.canaries != nil {
		w.judgeCanaries(klog.FromContext(ctx), c, pod, nodeName)
	}
	if c == nil {
		return
	}
	var notes auditNotes
	for i := range c.runs {
		a := c.runs[i].audit
		if a == nil {
			continue
		}
		if msg := a.summary(nodeName); msg != "" {
			notes.add(klog.NewContext(ctx, klog.FromContext(ctx).WithValues("node", nodeName)), pod, c.policies[i], msg)
		}
	}
	notes.report(w, pod, "Scheduling")
}

// summary phrases the policy's verdicts for the cycle's outcome.
func (a *auditState) summary(nodeName string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var parts []string
	if a.podRejected != "" {
		parts = append(parts, "would have rejected the pod: "+a.podRejected)
	}
	if r, ok := a.refused[nodeName]; ok && nodeName != "" {
		parts = append(parts, fmt.Sprintf("on %s %s", nodeName, r))
	}
	if a.message != "" && nodeName == "" {
		parts = append(parts, "would have added to the pod's message: "+a.message)
	}
	if n := len(a.rejected); n > 0 {
		if r, ok := a.rejected[nodeName]; ok && nodeName != "" {
			parts = append(parts, fmt.Sprintf("would have rejected the chosen node %s: %s", nodeName, r))
		}
		reasons := map[string]int{}
		for _, r := range a.rejected {
			reasons[r]++
		}
		keys := make([]string, 0, len(reasons))
		for r := range reasons {
			keys = append(keys, r)
		}
		sort.Strings(keys)
		var b strings.Builder
		for k, r := range keys {
			if k > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s (%d)", r, reasons[r])
		}
		parts = append(parts, fmt.Sprintf("would have rejected %d node(s): %s", n, b.String()))
	}
	if s, ok := a.scores[nodeName]; ok && nodeName != "" {
		best, bestNode := int64(-1), ""
		for n, v := range a.scores {
			if v > best || (v == best && n < bestNode) {
				best, bestNode = v, n
			}
		}
		parts = append(parts, fmt.Sprintf("would have scored the chosen node %s %d (its best: %s %d)", nodeName, s, bestNode, best))
	}
	return strings.Join(parts, "; ")
}
