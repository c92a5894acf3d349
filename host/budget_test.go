package host

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/internal/testguests"
)

// cycleFilter runs Filter on ni within pc's cycle.
func cycleFilter(v *Version, pc *PolicyCycle, ni fwk.NodeInfo) *CallError {
	_, _, err := v.Call(context.Background(), CallFilter, testPod(), ni, pc, nil)
	return err
}

// causeOf returns the failure a stopped call reports.
func causeOf(t *testing.T, err *CallError) *CallError {
	t.Helper()
	if err == nil || err.Outcome != OutcomeStopped {
		t.Fatalf("%v, want the call stopped", err)
	}
	var cause *CallError
	if !errors.As(err.Err, &cause) {
		t.Fatalf("stopped call %v does not carry its cause", err)
	}
	return cause
}

// After a call of the cycle times out, the policy is not called again in
// that cycle: the next call fails at once, saying why, without running the
// guest; a call outside the cycle still runs.
func TestFailedCallStopsTheCycle(t *testing.T) {
	p := newPolicy(t, newEngine(t), PolicySpec{Timeout: 50 * time.Millisecond, MaxInstances: 2})
	v := load(t, p, testguests.Fixture(t, "loop"))
	pc := &PolicyCycle{Budget: NewBudget(time.Second)}
	if err := cycleFilter(v, pc, nodeInfo("cordoned", nil, true)); err == nil || err.Outcome != OutcomeTimeout {
		t.Fatalf("%v, want a timeout", err)
	}
	err := cycleFilter(v, pc, nodeInfo("ok", nil, false))
	if cause := causeOf(t, err); cause.Outcome != OutcomeTimeout {
		t.Fatalf("cause %v, want the timeout", cause)
	}
	if !strings.Contains(err.Error(), "policy not called: policy call exceeded its timeout") {
		t.Fatalf("error %q does not say why the policy was not called", err)
	}
	if pc.Budget.Stopped() == nil {
		t.Fatal("budget not stopped")
	}
	if err := cycleFilter(v, &PolicyCycle{Budget: NewBudget(time.Second)}, nodeInfo("ok", nil, false)); err != nil {
		t.Fatalf("another cycle: %v", err)
	}
}

// Calls of one cycle in flight together are stopped together: when the
// first one times out, the others (started later, so their own timeouts
// are still ahead) are interrupted and report the first one's failure.
func TestFailureInterruptsParallelCalls(t *testing.T) {
	const timeout = 300 * time.Millisecond
	p := newPolicy(t, newEngine(t), PolicySpec{Timeout: timeout, MaxInstances: 4})
	v := load(t, p, testguests.Fixture(t, "loop"))
	// Warm the pool so that no call waits for an instance.
	var warm sync.WaitGroup
	for range 4 {
		warm.Add(1)
		go func() { defer warm.Done(); _ = cycleFilter(v, nil, nodeInfo("ok", nil, false)) }()
	}
	warm.Wait()

	pc := &PolicyCycle{Budget: NewBudget(10 * time.Second)}
	errs := make([]*CallError, 3)
	var wg sync.WaitGroup
	run := func(i int) {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = cycleFilter(v, pc, nodeInfo("cordoned", nil, true)) }()
	}
	run(0)
	for deadline := time.Now().Add(5 * time.Second); ; {
		if _, inUse := v.PoolStats(); inUse == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first call did not start")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(timeout / 3)
	run(1)
	run(2)
	wg.Wait()
	if errs[0] == nil || errs[0].Outcome != OutcomeTimeout {
		t.Fatalf("first call: %v, want its timeout", errs[0])
	}
	for i := 1; i < 3; i++ {
		if cause := causeOf(t, errs[i]); cause.Outcome != OutcomeTimeout {
			t.Fatalf("call %d: cause %v, want the first call's timeout", i, cause)
		}
	}
	// The pool is whole again: an interrupted instance is discarded, but
	// the next calls of another cycle run.
	if err := cycleFilter(v, &PolicyCycle{Budget: NewBudget(time.Second)}, nodeInfo("ok", nil, false)); err != nil {
		t.Fatal(err)
	}
}

// The budget's clock runs while at least one call is in flight: calls that
// overlap are charged once, so parallel calls spend it no faster than one.
func TestBudgetChargesOverlapOnce(t *testing.T) {
	b := NewBudget(time.Second)
	ins := []*instance{{}, {}, {}}
	start := time.Now()
	for _, in := range ins {
		if _, err := b.begin(in); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond)
	for _, in := range ins {
		b.end(in, nil)
	}
	wall := time.Since(start)
	// Charged separately, three calls of at least 20 ms would cost at least
	// 60 ms; charged once, at most the wall time they took together.
	if s := b.Spent(); s < 20*time.Millisecond || s > wall {
		t.Fatalf("spent %s for three overlapping calls that took %s together, want between 20ms and %s", s, wall, wall)
	}
	d1, _ := b.begin(ins[0])
	d2, _ := b.begin(ins[1])
	if d1 != d2 {
		t.Fatalf("calls in flight together have deadlines %d and %d, want one", d1, d2)
	}
}

// A discarded instance is replaced in the background: after a failed call
// the pool refills without a call asking, and the next call runs on that
// instance instead of instantiating one inline.
func TestFailedInstanceIsReplacedInBackground(t *testing.T) {
	p := newPolicy(t, newEngine(t), PolicySpec{Timeout: 20 * time.Millisecond, MaxInstances: 1})
	v := load(t, p, testguests.Fixture(t, "loop"))
	if _, err := filter(v, nodeInfo("ok", nil, false)); err != nil {
		t.Fatal(err)
	}
	if _, err := filter(v, nodeInfo("cordoned", nil, true)); err == nil || err.Outcome != OutcomeTimeout {
		t.Fatalf("%v, want a timeout", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if live, inUse := v.PoolStats(); live == 1 && inUse == 0 {
			break
		}
		if time.Now().After(deadline) {
			live, inUse := v.PoolStats()
			t.Fatalf("pool not refilled: live=%d inUse=%d", live, inUse)
		}
	}
	created := v.created.Load()
	if r, err := filter(v, nodeInfo("ok", nil, false)); err != nil || r.Code != 0 {
		t.Fatalf("%+v, %v", r, err)
	}
	if c := v.created.Load(); c != created || c != 2 {
		t.Fatalf("%d instances created, want 2 (the first and its replacement), none inline", c)
	}
}
