package casetable

import (
	"context"
	"fmt"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/casetest"
	"github.com/wasmsched/wasmsched/host"
)

// Reserve, Unreserve and counts in case tables (docs/abi.md §3.6, §8).

// placeReserved reserves the case's reserved pods on their nodes, in
// order, and returns what gives their counts back.
func placeReserved(ctx context.Context, v *host.Version, c *casetest.Case, counters *host.Counters) (release func(), err error) {
	var uids []string
	release = func() {
		for _, u := range uids {
			counters.RollBack(u, 0)
		}
	}
	for i := range c.Reserved {
		pd := c.PlacedPod(i)
		pod, err := Pod(pd)
		if err != nil {
			return release, fmt.Errorf("reserved pod %d: %v", i, err)
		}
		node, err := NodeInfo(c.Reserved[i].Node)
		if err != nil {
			return release, fmt.Errorf("reserved pod %d's node: %v", i, err)
		}
		uids = append(uids, string(pod.UID))
		if !v.Exports().Has(host.CallReserve) {
			continue
		}
		_, res, cerr := v.Call(ctx, host.CallReserve, host.NewPodState(pod), node, new(host.PolicyCycle), nil)
		switch {
		case cerr != nil:
			return release, fmt.Errorf("reserved pod %d (%s): reserve: %v", i, pd.Name, cerr)
		case res.Code != abi.CodeSuccess:
			return release, fmt.Errorf("reserved pod %d (%s) on %s: reserve = %s, want success", i, pd.Name, c.Reserved[i].Node.Name, spell(res))
		}
	}
	return release, nil
}

// runReserve checks a case's reserve (and unreserve) on its node, in the
// case's cycle: the verdict and the counts after each.
func runReserve(ctx context.Context, v *host.Version, c *casetest.Case, pod *host.PodState, node fwk.NodeInfo, counters *host.Counters, res *Case, problem func(string, ...any)) {
	want := c.Reserve
	got := host.Result{}
	if v.Exports().Has(host.CallReserve) {
		_, r, cerr := v.Call(ctx, host.CallReserve, pod, node, new(host.PolicyCycle), nil)
		if cerr != nil {
			problem("reserve: %v", cerr)
			return
		}
		got = r
	}
	res.Reserve = spell(got)
	if got.Code != want.Code || (want.Reason != "" && got.Reason != want.Reason) {
		problem("reserve: got %s, want %s", spell(got), spell(host.Result{Code: want.Code, Reason: want.Reason}))
	}
	if p := casetest.CheckCounts("reserve", want.Counts, counters.Counts()); p != "" {
		problem("%s", p)
	}
	if c.Unreserve == nil {
		return
	}
	// As the plugin undoes a placement: the pod's counts first, then the
	// guest's unreserve.
	counters.RollBack(string(pod.Pod.UID), 0)
	if v.Exports().Has(host.CallUnreserve) {
		if _, _, cerr := v.Call(ctx, host.CallUnreserve, pod, node, new(host.PolicyCycle), nil); cerr != nil {
			problem("unreserve: %v", cerr)
		}
	}
	if p := casetest.CheckCounts("unreserve", c.Unreserve.Counts, counters.Counts()); p != "" {
		problem("%s", p)
	}
}
