package casetable

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	fwk "k8s.io/kube-scheduler/framework"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/casetest"
	"github.com/wasmsched/wasmsched/host"
)

// Reserve, Unreserve, counts, Permit and waiting pods in case tables
// (docs/abi.md §3.6, §3.7, §8).

// placeReserved reserves the case's reserved pods, then its waiting pods,
// on their nodes, in order. It returns the waiting pods as the policy's
// calls reach them, and what gives every count back.
func placeReserved(ctx context.Context, v *host.Version, c *casetest.Case, counters *host.Counters) (waiting *caseWaiting, release func(), err error) {
	var uids []string
	release = func() {
		for _, u := range uids {
			counters.RollBack(u, 0)
		}
	}
	waiting = &caseWaiting{}
	place := func(what string, i int, pd sdk.PodData, nd sdk.NodeData) (*v1.Pod, error) {
		pod, err := Pod(pd)
		if err != nil {
			return nil, fmt.Errorf("%s pod %d: %v", what, i, err)
		}
		node, err := NodeInfo(nd)
		if err != nil {
			return nil, fmt.Errorf("%s pod %d's node: %v", what, i, err)
		}
		uids = append(uids, string(pod.UID))
		if !v.Exports().Has(host.CallReserve) {
			return pod, nil
		}
		_, res, cerr := v.Call(ctx, host.CallReserve, host.NewPodState(pod), node, new(host.PolicyCycle), nil)
		switch {
		case cerr != nil:
			return nil, fmt.Errorf("%s pod %d (%s): reserve: %v", what, i, pd.Name, cerr)
		case res.Code != abi.CodeSuccess:
			return nil, fmt.Errorf("%s pod %d (%s) on %s: reserve = %s, want success", what, i, pd.Name, nd.Name, spell(res))
		}
		return pod, nil
	}
	for i := range c.Reserved {
		if _, err := place("reserved", i, c.PlacedPod(i), c.Reserved[i].Node); err != nil {
			return waiting, release, err
		}
	}
	for i := range c.Waiting {
		pod, err := place("waiting", i, c.WaitingPod(i), c.Waiting[i].Node)
		if err != nil {
			return waiting, release, err
		}
		waiting.pods = append(waiting.pods, waitingPod{pod: pod, node: c.Waiting[i].Node.Name})
	}
	return waiting, release, nil
}

// caseWaiting are a case's waiting pods (host.Waiting), with what the
// policy did to them.
type caseWaiting struct {
	pods              []waitingPod
	allowed, rejected []string // pod names
}

type waitingPod struct {
	pod  *v1.Pod
	node string
}

func (w *caseWaiting) List(sel labels.Selector) [][4]string {
	var out [][4]string
	for _, p := range w.pods {
		if sel.Matches(labels.Set(p.pod.Labels)) {
			out = append(out, [4]string{string(p.pod.UID), p.pod.Namespace, p.pod.Name, p.node})
		}
	}
	slices.SortFunc(out, func(a, b [4]string) int { return strings.Compare(a[1]+"/"+a[2], b[1]+"/"+b[2]) })
	return out
}

// take removes the waiting pod uid and returns its name ("" if none).
func (w *caseWaiting) take(uid string) string {
	for i, p := range w.pods {
		if string(p.pod.UID) == uid {
			w.pods = slices.Delete(w.pods, i, i+1)
			return p.pod.Name
		}
	}
	return ""
}

func (w *caseWaiting) Allow(uid string) bool {
	n := w.take(uid)
	if n != "" {
		w.allowed = append(w.allowed, n)
	}
	return n != ""
}

func (w *caseWaiting) Reject(uid, _ string) bool {
	n := w.take(uid)
	if n != "" {
		w.rejected = append(w.rejected, n)
	}
	return n != ""
}

// runPermit checks a case's permit on its node, after its reserve (run
// here when the case does not check it), with its waiting pods.
func runPermit(ctx context.Context, v *host.Version, c *casetest.Case, pod *host.PodState, node fwk.NodeInfo, waiting *caseWaiting, res *Case, problem func(string, ...any)) {
	if c.Reserve == nil && v.Exports().Has(host.CallReserve) {
		if _, r, cerr := v.Call(ctx, host.CallReserve, pod, node, new(host.PolicyCycle), nil); cerr != nil || r.Code != abi.CodeSuccess {
			problem("reserve before permit: %v %s", cerr, spell(r))
			return
		}
	}
	pc := new(host.PolicyCycle)
	pc.Waiting = waiting
	ms, got, ok := callIf(ctx, v, host.CallPermit, pod, node, pc, problem)
	if !ok {
		return
	}
	wait := time.Duration(0)
	if got.Code == abi.CodeWait {
		wait = time.Duration(ms) * time.Millisecond
	}
	res.Permit = spell(got)
	if wait > 0 {
		res.Permit += " for " + wait.String()
	}
	if p := casetest.CheckPermit(c.Permit, got.Code, got.Reason, wait, waiting.allowed, waiting.rejected); p != "" {
		problem("%s", p)
	}
}

// runReserve checks a case's reserve (and unreserve) on its node, in the
// case's cycle: the verdict and the counts after each.
func runReserve(ctx context.Context, v *host.Version, c *casetest.Case, pod *host.PodState, node fwk.NodeInfo, counters *host.Counters, waiting *caseWaiting, res *Case, problem func(string, ...any)) {
	want := c.Reserve
	_, got, ok := callIf(ctx, v, host.CallReserve, pod, node, new(host.PolicyCycle), problem)
	if !ok {
		return
	}
	res.Reserve = spell(got)
	checkResult("reserve", got, want.Code, want.Reason, problem)
	if p := casetest.CheckCounts("reserve", want.Counts, counters.Counts()); p != "" {
		problem("%s", p)
	}
	if c.Unreserve == nil {
		return
	}
	// As the plugin undoes a placement: the pod's counts first, then the
	// guest's unreserve.
	counters.RollBack(string(pod.Pod.UID), 0)
	upc := new(host.PolicyCycle)
	upc.Waiting = waiting
	callIf(ctx, v, host.CallUnreserve, pod, node, upc, problem)
	if p := casetest.CheckCounts("unreserve", c.Unreserve.Counts, counters.Counts()); p != "" {
		problem("%s", p)
	}
}
