//go:build timing

package fuel

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmsched/wasmsched/internal/testguests"
)

// Why the refuel call matters beyond deadlines: Go cannot preempt a
// goroutine running wazero's machine code, so a garbage collection's
// stop-the-world waits until the guest comes back to Go. Without
// close-on-context-done (whose per-iteration exits are what the rewrite
// removes) a spinning guest never does. The instrumented guest calls refuel
// every few thousand iterations, and that host call is where the runtime
// stops it. This test runs the same spin loop, for about 300 ms, plain and
// instrumented, and measures the stop-the-world pauses of a runtime.GC()
// started while it runs (testguests.GCPause: the pauses, which include the wait for
// every goroutine to stop, not the concurrent marking, which depends on
// the heap and the machine's load).
func TestRefuelLetsGarbageCollectionStopTheGuest(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler()) // no close-on-done
	defer rt.Close(ctx)
	err := fuelHost(ctx, rt, func() int32 { return 10_000 }, nil)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := os.ReadFile("testdata/spin.wasm")
	if err != nil {
		t.Fatal(err)
	}
	inst, err := Instrument(plain)
	if err != nil {
		t.Fatal(err)
	}
	spinFn := func(wasm []byte, name string) api.Function {
		m, err := rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName(name))
		if err != nil {
			t.Fatal(err)
		}
		return m.ExportedFunction("spin")
	}
	plainSpin, instSpin := spinFn(plain, "plain"), spinFn(inst, "instrumented")

	// Size the loop to about 300 ms on this machine, now.
	const probe = 20_000_000
	start := time.Now()
	if _, err := plainSpin.Call(ctx, probe); err != nil {
		t.Fatal(err)
	}
	iters := uint64(float64(probe) * float64(300*time.Millisecond) / float64(max(time.Since(start), time.Millisecond)))

	// gcDuring starts fn spinning, lets it get into its loop, and times a
	// garbage collection.
	gcDuring := func(fn api.Function) (gc, spin time.Duration) {
		started, done := make(chan time.Time), make(chan time.Duration)
		go func() {
			s := time.Now()
			started <- s
			if _, err := fn.Call(ctx, iters); err != nil {
				t.Error(err)
			}
			done <- time.Since(s)
		}()
		<-started
		time.Sleep(30 * time.Millisecond)
		gc = testguests.GCPause()
		return gc, <-done
	}
	median := func(d []time.Duration) time.Duration {
		d = slices.Clone(d)
		slices.Sort(d)
		return d[len(d)/2]
	}
	const runs = 5
	var plainGC, instGC []time.Duration
	for i := 0; i < runs; i++ {
		gc, spin := gcDuring(plainSpin)
		plainGC = append(plainGC, gc)
		gc2, spin2 := gcDuring(instSpin)
		instGC = append(instGC, gc2)
		t.Logf("run %d: plain spin %s, GC pause %s; instrumented spin %s, GC pause %s", i, spin.Round(time.Millisecond), gc.Round(time.Microsecond), spin2.Round(time.Millisecond), gc2.Round(time.Microsecond))
	}
	// The plain guest holds the collection until it returns: most of the
	// remaining ~270 ms. A busy machine only makes that longer.
	if m := median(plainGC); m < 100*time.Millisecond {
		t.Errorf("GC pause during a plain spin: %s (median of %v); expected it to wait for the guest, or this test proves nothing", m, plainGC)
	}
	// The instrumented guest reaches refuel every 10,000 iterations (tens
	// of microseconds): the pause is what it is with no guest, 0.1-0.2 ms
	// on a quiet machine and a few ms when the test shares the cores.
	if m, worst := median(instGC), slices.Max(instGC); m > 10*time.Millisecond || worst > 50*time.Millisecond {
		t.Errorf("GC pause during an instrumented spin: %s median, %s worst (%v); want at most 10 ms and 50 ms (the plain spin holds it for hundreds)", m, worst, instGC)
	}
}
