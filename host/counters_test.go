package host

import (
	"maps"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

// A reserve's counts are the pod's; one that does not pass (a trap, a
// refusal) keeps none of them, whatever it took before it ended; the
// counts are the caller's (PolicySpec.Counters), so a new Policy for the
// same policy keeps them.
func TestReserveCounters(t *testing.T) {
	counters := new(Counters)
	e := newEngine(t)
	p := newPolicy(t, e, PolicySpec{MaxInstances: 1, Counters: counters})
	if p.Counters() != counters {
		t.Fatal("the policy does not keep the counters it was given")
	}
	v := load(t, p, testguests.Fixture(t, "reserve"))
	ni := nodeInfo("n1", nil, false)
	pod := func(name, then string) *PodState {
		labels := map[string]string{}
		if then != "" {
			labels["then"] = then
		}
		return NewPodState(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), Labels: labels}})
	}
	reserve := func(ps *PodState) (Result, *CallError) {
		_, res, cerr := v.Call(t.Context(), CallReserve, ps, ni, new(PolicyCycle), nil)
		return res, cerr
	}
	want := func(step string, counts map[string]int64) {
		t.Helper()
		if got := counters.Counts(); !maps.Equal(got, counts) {
			t.Fatalf("after %s: counts %v, want %v", step, got, counts)
		}
	}
	if res, cerr := reserve(pod("a", "")); cerr != nil || res.Code != abi.CodeSuccess {
		t.Fatalf("reserve a: %v %+v", cerr, res)
	}
	want("a's reserve", map[string]int64{"seats": 1})
	if _, cerr := reserve(pod("b", "trap")); cerr == nil || cerr.Outcome != OutcomeTrap {
		t.Fatalf("reserve b: %v, want a trap", cerr)
	}
	want("b's reserve trapped after taking a seat", map[string]int64{"seats": 1})
	if res, cerr := reserve(pod("c", "refuse")); cerr != nil || res.Code != abi.CodeUnschedulable || res.Reason != "refused" {
		t.Fatalf("reserve c: %v %+v, want Unschedulable", cerr, res)
	}
	want("c's reserve refused after taking a seat", map[string]int64{"seats": 1})
	if counters.Holders() != 1 {
		t.Fatalf("%d pods hold counts, want a only", counters.Holders())
	}
	// A trap in unreserve is the guest's: the counts are the host's to give back.
	if _, _, cerr := v.Call(t.Context(), CallUnreserve, pod("a", ""), ni, new(PolicyCycle), nil); cerr == nil {
		t.Fatal("the fixture's unreserve traps")
	}
	want("a trapping unreserve (the caller gives back)", map[string]int64{"seats": 1})
	counters.RollBack("uid-a", 0)
	want("a's release", map[string]int64{})

	// Another Policy for the same policy (a new config) with the same
	// counters sees what the first took.
	if res, cerr := reserve(pod("d", "")); cerr != nil || res.Code != abi.CodeSuccess {
		t.Fatalf("reserve d: %v %+v", cerr, res)
	}
	p2 := newPolicy(t, e, PolicySpec{MaxInstances: 1, Counters: counters})
	v2 := load(t, p2, testguests.Fixture(t, "reserve"))
	if _, res, cerr := v2.Call(t.Context(), CallReserve, pod("e", ""), ni, new(PolicyCycle), nil); cerr != nil || res.Code != abi.CodeSuccess {
		t.Fatalf("reserve e: %v %+v", cerr, res)
	}
	want("d and e reserved through two Policies", map[string]int64{"seats": 2})
}
