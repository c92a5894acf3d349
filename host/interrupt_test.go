package host

import (
	"slices"
	"testing"
	"time"

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
