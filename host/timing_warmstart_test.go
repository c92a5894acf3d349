//go:build timing

package host

// Run after timing_test.go (file order): TestSpinningGuestLeavesTheProcessRunning
// reads GC pauses, which TestIdenticalModulesWarmStarts, last, raises.

import (
	"context"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

// A guest spinning until its deadline does not stall the rest of the
// process: while it spins, another policy's calls keep completing, and a
// garbage collection's stop-the-world (which must stop the spinning
// goroutine too) pauses the process for milliseconds at most. Without close-on-done the only
// place the Go runtime can stop that goroutine is the guest's refuel call
// (host/internal/fuel's TestRefuelLetsGarbageCollectionStopTheGuest shows
// the collection waiting for the whole loop without it).
func TestSpinningGuestLeavesTheProcessRunning(t *testing.T) {
	withRunningTokens(t, 2) // the spinner and the calm policy, as on a 2-core machine
	e := newEngine(t)
	const timeout = 2 * time.Second
	spin := load(t, newPolicy(t, e, PolicySpec{Name: "spin", Timeout: timeout, MaxInstances: 1}), testguests.Fixture(t, "loop"))
	calm := load(t, newPolicy(t, e, PolicySpec{Name: "calm", Timeout: time.Second, MaxInstances: 1}), testguests.Fixture(t, "ok"))

	done := make(chan *CallError, 1)
	start := time.Now()
	go func() {
		_, err := filter(spin, nodeInfo("cordoned", nil, true)) // loops until its deadline
		done <- err
	}()
	for {
		if _, inUse := spin.PoolStats(); inUse == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)

	var gcs []time.Duration
	for i := 0; i < 9; i++ {
		gcs = append(gcs, testguests.GCPause())
	}
	calls := 0
	for time.Since(start) < timeout/2 {
		if _, err := filter(calm, nodeInfo("n", nil, false)); err != nil {
			t.Fatalf("calm policy: %v", err)
		}
		calls++
	}
	select {
	case err := <-done:
		t.Fatalf("the spinning call ended after %s, before the checks finished: %v", time.Since(start), err)
	default:
	}
	err := <-done
	if err == nil || err.Outcome != OutcomeTimeout {
		t.Fatalf("spinning call: %v, want a timeout", err)
	}
	slices.Sort(gcs)
	median, worst := gcs[len(gcs)/2], gcs[len(gcs)-1]
	t.Logf("while the guest spun: %d calls of another policy in %s; GC stop-the-world pause median %s, worst %s; the spinning call ended after %s", calls, timeout/2, median, worst, time.Since(start).Round(time.Millisecond))
	if median > 10*time.Millisecond || worst > 100*time.Millisecond {
		t.Errorf("GC stop-the-world pauses while a guest spins: median %s, worst %s (all %v); want at most 10 ms and 100 ms", median, worst, gcs)
	}
	if calls < 100 {
		t.Errorf("only %d calls of another policy completed in %s while a guest spun", calls, timeout/2)
	}
}

// A table batch that loops on a node ends at that node's deadline (within
// timeout + 10 ms, deadline_test.go's claim); the node at `current` gets
// the failure and the nodes before it keep the verdicts in their rows.
func TestNodeTableBatchDeadline(t *testing.T) {
	const timeout = 50 * time.Millisecond
	// Reuse off: the three nodes have equal rows, which would share one.
	p := newPolicy(t, newEngine(t), PolicySpec{Timeout: timeout, MaxInstances: 1, NoReuse: true})
	v := load(t, p, testguests.Fixture(t, "tableloop"))
	nodes := []fwk.NodeInfo{nodeInfo("a", nil, false), nodeInfo("b", nil, false), nodeInfo("c", nil, false)}
	// The first batch declares nothing new: the table was declared in
	// _initialize, so every batch is a table batch.
	for o := range deadlineSeries(t, "table batch stopped") {
		for run := 0; run < deadlineRuns; run++ {
			results := make([]Result, len(nodes))
			start := time.Now()
			done, err := v.CallNodes(context.Background(), CallFilter, teamPod("a"), nodes, new(PolicyCycle), results, nil)
			o.add(time.Since(start), timeout)
			if testInterruption(t) == InterruptCloseOnDone {
				// wazero closes the module at the deadline and its memory goes
				// with it: no row can be read, node 0 gets the failure.
				if err == nil || err.Outcome != OutcomeTimeout || done != 0 {
					t.Fatalf("run %d (close-on-done): done %d, %v; want a timeout at node 0", run, done, err)
				}
				continue
			}
			if err == nil || err.Outcome != OutcomeTimeout || done != 1 {
				t.Fatalf("run %d: done %d, %v; want a timeout at node 1", run, done, err)
			}
			if results[0] != (Result{Code: abi.CodeUnschedulable, Reason: "node 0 rejected"}) {
				t.Fatalf("run %d: node 0 %+v, want its row's verdict", run, results[0])
			}
		}
	}
}

// A scheduler restart loads every policy at once from a warm file
// compilation cache. With 40 Go policies sharing 5 modules (8 policies per
// module's bytes) wazero v1.12.0 handed a half-built module to concurrent
// loads of the same bytes and the process panicked, about once in 5
// starts (Engine.compile, wazero#2547). Each start here is a new engine
// over the same cache directory, as a restarted scheduler is; a panic
// fails the test binary. WASMSCHED_WARM_STARTS sets the number of starts
// (default 50).
func TestIdenticalModulesWarmStarts(t *testing.T) {
	starts := 50
	if s, err := strconv.Atoi(os.Getenv("WASMSCHED_WARM_STARTS")); err == nil && s > 0 {
		starts = s
	}
	const policies = 40
	names := []string{"team-isolation", "bin-packing", "spread", "maintenance-avoidance", "gpu-fit"}
	mods := make([][]byte, len(names))
	for i, n := range names {
		mods[i] = testguests.PolicyBytes(t, testguests.Go, n)
	}
	dir := t.TempDir()
	ctx := context.Background()
	engine := func() *Engine {
		e, err := NewEngine(EngineOptions{CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	// Fill the file cache, as the scheduler's previous run did.
	warm := engine()
	for i, m := range mods {
		p := newPolicy(t, warm, PolicySpec{Name: names[i], MaxInstances: 1})
		load(t, p, m)
		_ = p.Close(ctx)
	}
	_ = warm.Close()

	for s := 0; s < starts; s++ {
		e := engine()
		ps := make([]*Policy, policies)
		var wg sync.WaitGroup
		for i := range ps {
			p, err := e.NewPolicy(ctx, PolicySpec{Name: "p" + strconv.Itoa(i), Timeout: time.Second, MaxInstances: 2})
			if err != nil {
				t.Fatal(err)
			}
			ps[i] = p
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := p.Load(ctx, mods[i%len(mods)], ""); err != nil {
					t.Errorf("start %d, policy %d: %v", s, i, err)
				}
			}()
		}
		wg.Wait()
		// Every policy serves: one Filter (or Score) call each.
		for i, p := range ps {
			v := p.Current()
			kind := CallFilter
			if !v.Exports().Has(CallFilter) {
				kind = CallScore
			}
			if _, r, err := v.Call(ctx, kind, testPod(), nodeInfo("n", nil, false), new(PolicyCycle), nil); err != nil || (r.Code != abi.CodeSuccess && r.Code != abi.CodeUnschedulable && r.Code != abi.CodeUnschedulableAndUnresolvable) {
				t.Fatalf("start %d, policy %d (%s): %+v, %v", s, i, names[i%len(names)], r, err)
			}
			_ = p.Close(ctx)
		}
		_ = e.Close()
		if t.Failed() {
			return
		}
	}
}
