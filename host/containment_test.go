package host

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/internal/wasmgen"
)

// table.grow cannot allocate host memory past the growth the host allows:
// a grow by 2^30 entries fails (-1) instead of allocating 8 GiB (which
// killed the process with "fatal error: out of memory"), and growing by
// steps stops at maxTableGrowth. The guest checks both and traps if
// either does not hold. The room the tables may grow into is charged to
// every instance in the memory budget.
func TestTableGrowthIsBounded(t *testing.T) {
	p := newPolicy(t, newEngine(t), PolicySpec{MaxInstances: 1})
	v := load(t, p, testguests.Fixture(t, "tablebomb"))
	for run := 0; run < 3; run++ {
		if r, err := filter(v, nodeInfo("n", nil, false)); err != nil {
			t.Fatalf("run %d: %+v, %v; the guest traps when a grow it expects to fail succeeds", run, r, err)
		}
	}
	if room := v.sm.tableRoom; room != maxTableGrowth*tableEntryBytes {
		t.Errorf("table room charged per instance = %d bytes, want %d", room, maxTableGrowth*tableEntryBytes)
	}
	if share := v.MemoryShare(); share < v.sm.tableRoom {
		t.Errorf("memory share %d does not include the table room %d", share, v.sm.tableRoom)
	}
	// A module whose table cannot grow is charged nothing for it.
	ok := load(t, newPolicy(t, p.e, PolicySpec{Name: "ok"}), testguests.Fixture(t, "ok"))
	if ok.sm.tableRoom != 0 {
		t.Errorf("a module without growable tables is charged %d bytes of table room", ok.sm.tableRoom)
	}
}

// Modules that declare more than the host can hold, or whose code has a
// shape that costs wazero's compiler time or memory out of proportion to
// its size, are refused before they compile, with a TooLarge error that
// names the policy, what is over, and the limit; the version that served
// keeps serving.
func TestDeclarationAndShapeLimits(t *testing.T) {
	e := newEngine(t)
	p := newPolicy(t, e, PolicySpec{Name: "tenant-a"})
	good := load(t, p, testguests.Fixture(t, "ok"))
	cases := []struct {
		name string
		wasm []byte
		want string
	}{
		{"a table of 2^30 entries", testguests.Fixture(t, "tablehuge"), "1073741824 table entries declared, more than the limit of 1048576"},
		{"100,001 globals", wasmgen.Module(wasmgen.Shape{Globals: maxGlobals + 1}), "100001 globals"},
		{"10,001 nested blocks", wasmgen.Module(wasmgen.Shape{Functions: 1, BodyOps: 1, Nesting: maxNesting + 1}), "10001 levels of block nesting in one function"},
		{"5 functions of 9,000 nested blocks", wasmgen.Module(wasmgen.Shape{Functions: 5, BodyOps: 1, Nesting: 9_000}), "405000000 as the sum over functions of their block nesting squared"},
		{"a br_table of 65,537 labels", wasmgen.Module(wasmgen.Shape{Functions: 1, BrTable: maxBrTableLabels + 1}), "65537 labels in one br_table"},
		{"140 br_tables of 8,000 labels", wasmgen.Module(wasmgen.Shape{Functions: 140, BrTable: 8_000}), "8960000000 as the sum over br_tables of their labels squared"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			_, err := p.Load(context.Background(), c.wasm, "")
			took := time.Since(start)
			var le *LoadError
			if !errors.As(err, &le) || le.Reason != "TooLarge" {
				t.Fatalf("load = %v, want a TooLarge LoadError", err)
			}
			msg := err.Error()
			for _, want := range []string{`policy "tenant-a"`, c.want, "limit is fixed", "docs/security.md"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not say %q", msg, want)
				}
			}
			if p.Current() != good {
				t.Errorf("the refused module replaced the serving version")
			}
			t.Logf("refused in %s: %s", took.Round(time.Millisecond), msg)
		})
	}
}

// peakRSS is the process's peak resident set (VmHWM).
func peakRSS(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatalf("no /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// A call whose context ends while it waits for a running token never
// starts, and says so: ErrNotStarted with the context's cause, so the
// plugin can tell the scheduler's overload (or a cycle that moved on) from
// the policy's failure.
func TestCallThatCannotStartSaysSo(t *testing.T) {
	theProcess.setRunningTokens(1)
	t.Cleanup(func() { theProcess.setRunningTokens(max(1, runtime.GOMAXPROCS(0))) })
	p := newPolicy(t, newEngine(t), PolicySpec{Timeout: 300 * time.Millisecond, MaxInstances: 2})
	v := load(t, p, testguests.Fixture(t, "loop"))
	busy := make(chan struct{})
	go func() {
		defer close(busy)
		_, _, _ = v.Call(context.Background(), CallFilter, testPod(), nodeInfo("cordoned", nil, true), new(PolicyCycle), nil)
	}()
	time.Sleep(50 * time.Millisecond) // the looping call holds the only token
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, _, err := v.Call(ctx, CallFilter, testPod(), nodeInfo("n", nil, false), new(PolicyCycle), nil)
	if err == nil || err.Outcome != OutcomeUnavailable || !errors.Is(err, ErrNotStarted) || !errors.Is(err, context.Canceled) {
		t.Fatalf("call cancelled while waiting: %v, want Unavailable wrapping ErrNotStarted and context.Canceled", err)
	}
	<-busy
}

// A call that reached its deadline after next to no work was starved by
// the machine: it is not the policy's timeout (ErrStarved, Unavailable),
// unless the guest slept or the module is not instrumented; a spent cycle
// budget counts the work of the cycle's ended calls too. A looping guest
// does hundreds of checks within any timeout (TestDeadline*, also under
// make test-deadlines-loaded), so it stays a timeout.
func TestStarvedCallIsNotATimeout(t *testing.T) {
	engine := func(i Interruption) *Engine {
		e, err := NewEngine(EngineOptions{CacheDir: t.TempDir(), Interruption: i})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
		return e
	}
	fuelled := newPolicy(t, engine(InterruptFuel), PolicySpec{})
	v := load(t, fuelled, testguests.Fixture(t, "ok"))
	in := &instance{v: v}
	b := NewBudget(time.Second)
	for _, c := range []struct {
		name    string
		checks  uint32
		slept   bool
		by      expiry
		work    int64
		starved bool
	}{
		{"timeout, no work", 1, false, expiredByTimeout, 0, true},
		{"timeout, a looping call's work", 400, false, expiredByTimeout, 0, false},
		{"timeout after a sleep", 1, true, expiredByTimeout, 0, false},
		{"stopped by another call", 0, false, expiredByStop, 0, false},
		{"budget, no work in the cycle", 1, false, expiredByBudget, 2, true},
		{"budget, work in earlier calls", 1, false, expiredByBudget, 100, false},
	} {
		in.checks, in.slept = c.checks, c.slept
		b.work.Store(c.work)
		if got := in.starved(c.by, b); got != c.starved {
			t.Errorf("%s: starved = %v, want %v", c.name, got, c.starved)
		}
	}
	in.checks, in.slept = 1, false
	if err := in.starvedError(); err.Outcome != OutcomeUnavailable || !errors.Is(err, ErrStarved) {
		t.Errorf("starved call's error: %v, want Unavailable wrapping ErrStarved", err)
	}
	// Without the instrumentation there is no measure of work: a timeout
	// is a timeout.
	closing := newPolicy(t, engine(InterruptCloseOnDone), PolicySpec{})
	in = &instance{v: load(t, closing, testguests.Fixture(t, "ok"))}
	if in.starved(expiredByTimeout, nil) {
		t.Error("an uninstrumented call counted as starved")
	}
}
