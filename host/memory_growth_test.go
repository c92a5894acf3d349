//go:build linux

package host

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

// growthSlack is what the process may hold beyond memoryBudget while calls
// grow their memory (docs/security.md, RATIONALE: growth is charged as it
// happens): host heap the calls allocate (the guests' reads, the wazero
// call stacks) and pages not yet returned by the Go runtime. Measured here
// at 3–15 MiB with two or three calls growing at once.
const growthSlack = 48 << 20

// procStatus reads a field of /proc/self/status in bytes (VmRSS, VmHWM).
func procStatus(t *testing.T, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		f := bytes.Fields(s.Bytes())
		if len(f) == 3 && string(f[0]) == field+":" {
			kb, err := strconv.ParseInt(string(f[1]), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// resetPeakRSS makes VmHWM the current VmRSS (clear_refs 5).
func resetPeakRSS(t *testing.T) {
	t.Helper()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("resetting the peak RSS: %v", err)
	}
}

// A policy whose Filter takes 400 MiB more on every call (every page
// written, all kept), called from as many goroutines as guest calls may
// run at once, beside an ordinary policy, under a 512 MiB budget and a 4 GiB
// memory limit: growth is charged as it happens, so the process's resident
// memory never goes past what it held outside the budget, plus the budget,
// plus growthSlack; the growth the budget cannot hold fails inside the
// guest (its runtime's out-of-memory: a trap), and the ordinary policy
// serves every call. Between rounds, with every call returned, the budget's
// gauge is within 10% of the resident memory the policies added.
func TestGrowthDuringCallsStaysWithinTheBudget(t *testing.T) {
	for _, tc := range testguests.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			const budget = 512 << 20
			e, err := NewEngine(EngineOptions{CacheDir: t.TempDir(), MemoryBudget: budget, Interruption: testInterruption(t)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = e.Close() })
			hog := load(t, newPolicy(t, e, PolicySpec{Name: "hog", MemoryLimitBytes: 4 << 30, Timeout: 20 * time.Second}), testguests.PolicyBytes(t, tc, "testdata/adversary"))
			calm := load(t, newPolicy(t, e, PolicySpec{Name: "calm"}), testguests.PolicyBytes(t, testguests.TinyGo, "spread"))
			serves(t, calm)
			// Two calls at once want more than the budget: 400 MiB each
			// (TinyGo's allocator doubles its heap to fit a large block:
			// 200 MiB asked is about 256 MiB grown).
			size := "400"
			if tc == testguests.TinyGo {
				size = "200"
			}
			growPod := NewPodState(st.MakePod().Name("grow").Namespace("default").UID("uid-grow").Labels(map[string]string{"attack": "grow", "grow-mib": size}).Obj())
			ni := nodeInfo("n", nil, false)

			runtime.GC()
			used0, rss0 := e.MemoryBudget().Used(), procStatus(t, "VmRSS")
			resetPeakRSS(t)

			callers := theProcess.maxRunning()
			var (
				ok, traps, other atomic.Int64
				calmFailed       atomic.Value
				stop             = make(chan struct{})
				calmDone         = make(chan struct{})
			)
			go func() {
				defer close(calmDone)
				for {
					select {
					case <-stop:
						return
					default:
					}
					if err := serve(calm); err != nil {
						calmFailed.Store(err.Error())
					}
				}
			}()
			// The budget's gauge, sampled every millisecond: its peak is
			// compared with the peak resident memory (a growing call
			// holds its memory for tens of milliseconds).
			var peakUsed atomic.Int64
			sampled := make(chan struct{})
			go func() {
				defer close(sampled)
				for {
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
					}
					if u := e.MemoryBudget().Used(); u > peakUsed.Load() {
						peakUsed.Store(u)
					}
				}
			}()
			for round := 0; round < 6; round++ {
				var wg sync.WaitGroup
				for range callers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						_, r, cerr := hog.Call(context.Background(), CallFilter, growPod, ni, new(PolicyCycle), nil)
						switch {
						case cerr == nil && r.Code == abi.CodeSuccess:
							ok.Add(1)
						case cerr != nil && (cerr.Outcome == OutcomeTrap || cerr.Outcome == OutcomeExit):
							traps.Add(1)
						default:
							other.Add(1)
							t.Errorf("round %d: the growing call ended with %v (%+v), want success or its own out-of-memory", round, cerr, r)
						}
					}()
				}
				wg.Wait()
				// Discarded instances close in the background: let them.
				time.Sleep(100 * time.Millisecond)
				used, rss := e.MemoryBudget().Used()-used0, procStatus(t, "VmRSS")-rss0
				t.Logf("round %d: budget %s used (%s more than before), resident %s more, peak %s more; %d calls grew, %d ran out of memory",
					round, mib(e.MemoryBudget().Used()), mib(used), mib(rss), mib(procStatus(t, "VmHWM")-rss0), ok.Load(), traps.Load())
			}
			close(stop)
			<-calmDone
			<-sampled

			peak := procStatus(t, "VmHWM")
			u := e.MemoryBudget()
			t.Logf("peak resident %s: %s before the calls, of which %s charged; budget %s; %d growths refused, %d instances over budget",
				mib(peak), mib(rss0), mib(used0), mib(budget), u.RefusedGrowth, u.OverBudget)
			if limit := rss0 - used0 + budget + growthSlack; peak > limit {
				t.Errorf("peak resident memory %s is over what the process held outside the budget (%s) + the budget (%s) + %s", mib(peak), mib(rss0-used0), mib(budget), mib(growthSlack))
			}
			if ok.Load() == 0 || traps.Load() == 0 || u.RefusedGrowth == 0 {
				t.Errorf("%d calls grew and %d ran out of memory (%d growths refused): want both, the budget holding some growth and refusing the rest", ok.Load(), traps.Load(), u.RefusedGrowth)
			}
			if msg, _ := calmFailed.Load().(string); msg != "" {
				t.Errorf("the ordinary policy failed beside the growing one: %s", msg)
			}
			// The gauge follows what the calls hold while they run: it
			// charges linear memory as it is grown, before the guest
			// writes it, so its peak is never below the resident memory
			// the calls added. A Go guest writes what it grows, and the
			// two peaks are within 10%; TinyGo's heap grows to twice
			// what it allocates and stays half untouched, charged all
			// the same (the guest may write it at any time).
			addedUsed, addedRSS := peakUsed.Load()-used0, peak-rss0
			t.Logf("peak of the budget's gauge: %s more than before the calls; peak resident: %s more", mib(addedUsed), mib(addedRSS))
			if addedUsed < 128<<20 {
				t.Fatalf("the gauge never rose by 128 MiB (%s): nothing grew, or growth is not charged while calls run", mib(addedUsed))
			}
			if float64(addedUsed) < 0.9*float64(addedRSS) {
				t.Errorf("the budget's gauge peaked %s over its start, below the resident memory the calls added (%s)", mib(addedUsed), mib(addedRSS))
			}
			if off := abs(float64(addedRSS-addedUsed)) / float64(addedUsed); tc == testguests.Go && off > 0.10 {
				t.Errorf("the budget's gauge peaked %s over its start, the resident memory %s: %.0f%% apart, want within 10%%", mib(addedUsed), mib(addedRSS), 100*off)
			}
		})
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// A module's declared initial memory is made before the budget can refuse
// any of it: a module that declares more than the budget holds is refused
// at load (MemoryBudget), before it is instantiated, and the others serve.
func TestDeclaredMemoryMustFitTheBudget(t *testing.T) {
	e, err := NewEngine(EngineOptions{CacheDir: t.TempDir(), MemoryBudget: 64 << 20, Interruption: testInterruption(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	calm := load(t, newPolicy(t, e, PolicySpec{Name: "calm"}), testguests.PolicyBytes(t, testguests.TinyGo, "spread"))
	// bigmem declares 2000 pages (125 MiB), within a 4 GiB memoryLimit.
	big := newPolicy(t, e, PolicySpec{Name: "big", MemoryLimitBytes: 4 << 30})
	_, err = big.Load(context.Background(), testguests.Fixture(t, "bigmem"), "")
	var le *LoadError
	if !errors.As(err, &le) || le.Reason != "MemoryBudget" || !strings.Contains(err.Error(), "cannot hold the module's initial memory (125.0 MiB)") {
		t.Fatalf("a module declaring 125 MiB under a 64 MiB budget: %v, want a MemoryBudget refusal naming its initial memory", err)
	}
	if c := e.MemoryBudget().Instances; c > 8<<20 {
		t.Errorf("%s charged for instances after the refusal: the module was instantiated", mib(c))
	}
	serves(t, calm)
}
