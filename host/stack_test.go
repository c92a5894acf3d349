package host

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/wasmgen"
)

// allocatedDuring is how many bytes of Go heap f allocated: the call stacks
// wazero grows for a guest are Go byte slices, so a call that went deep
// shows here, even after its stack was dropped.
func allocatedDuring(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A guest's call stack is measured where the instrumentation asks (this
// platform's wazero keeps it where stackOf looks), a recursion within the
// limit completes, and the stack its calls leave behind is what the next
// call finds.
func TestStackIsMeasured(t *testing.T) {
	p := newPolicy(t, newEngine(t), PolicySpec{MaxInstances: 1, StackLimitBytes: 1 << 20})
	// 2,000 frames of 8 locals kept across the call: about 160 KiB.
	v := load(t, p, wasmgen.RecursionModule(wasmgen.Recursion{Depth: 2000, Locals: 8}))
	if _, err := filter(v, nodeInfo("n", nil, false)); err != nil {
		t.Fatal(err)
	}
	if stackFields.typ == nil {
		t.Fatal("wazero's call stack was not found in its api.Function: the stack check falls back to its estimate (see stackOf)")
	}
	in := <-v.idle
	defer func() { v.idle <- in }()
	if in.stackPeak < 64<<10 || in.stackPeak > 1<<20 {
		t.Errorf("the deepest stack measured was %d bytes, want what 2,000 frames of 8 locals take (64 KiB to 1 MiB)", in.stackPeak)
	}
	if _, held, ok := stackOf(in.fn[CallFilter]); !ok || held < in.stackPeak || in.stackHeld != held-in.stackInit[CallFilter] {
		t.Errorf("filter's stack holds %d bytes (ok %v), the instance counts %d; the call used %d", held, ok, in.stackHeld, in.stackPeak)
	}
	// Every call starts from the same room: the grants of one call do not
	// carry over to let the next go deeper unmeasured.
	first := in.stackPeak
	v.idle <- in
	for i := 0; i < 20; i++ {
		if _, err := filter(v, nodeInfo("n", nil, false)); err != nil {
			t.Fatal(err)
		}
		in = <-v.idle
		if in.stackPeak != first {
			t.Fatalf("call %d: the deepest stack measured was %d bytes, the first call's %d", i+2, in.stackPeak, first)
		}
		v.idle <- in
	}
	in = <-v.idle
}

// recursionCase is a shape of recursion and the stack limit it runs under
// (0: the default).
type recursionCase struct {
	name  string
	shape wasmgen.Recursion
	limit int64
}

// Recursion without end, whatever shape its frames have, ends at the
// policy's stack limit as the guest's own failure: the call traps, its
// instance is discarded, and the stack it grew stays within what the
// instance is charged for.
func TestDeepRecursionIsStopped(t *testing.T) {
	e := newEngine(t)
	for _, tc := range []recursionCase{
		{"plain", wasmgen.Recursion{}, 0},
		{"plain, smallest limit", wasmgen.Recursion{}, MinStackLimitBytes},
		{"plain, 4 MiB", wasmgen.Recursion{}, 4 << 20},
		{"locals kept across the call", wasmgen.Recursion{Locals: 64}, 0},
		// Each frame keeps 50 versions of 200 locals: a frame of about
		// 200 KiB from 80 KB of code.
		{"large frames", wasmgen.Recursion{Locals: 200, Blocks: 50}, 0},
		{"large frames, 4 MiB", wasmgen.Recursion{Locals: 200, Blocks: 50}, 4 << 20},
		{"through a table", wasmgen.Recursion{Locals: 8, Indirect: true}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPolicy(t, e, PolicySpec{MaxInstances: 1, StackLimitBytes: tc.limit, Timeout: time.Minute})
			v := load(t, p, wasmgen.RecursionModule(tc.shape))
			limit := p.stackLimit
			var err *CallError
			alloc := allocatedDuring(func() { _, err = filter(v, nodeInfo("n", nil, false)) })
			var se *StackLimitError
			if err == nil || err.Outcome != OutcomeTrap || !errors.As(err, &se) {
				t.Fatalf("err = %v, want a trap past the stack limit", err)
			}
			if se.Limit != limit || se.Used <= limit {
				t.Errorf("stack error %+v, want one past the limit of %d", se, limit)
			}
			if v.discarded.Load() != 1 {
				t.Errorf("%d instances discarded, want the failed call's", v.discarded.Load())
			}
			// What the call allocated: its stack as wazero doubled it
			// (at most 2, 1, 1/2 … limits: 4 in all, of which
			// stackGrowthFactor at once), and a new instance for the
			// next call. The frames of the large shape are 200 KiB
			// each: one past the limit is made before the check.
			frame := int64(0)
			if tc.shape.Blocks > 0 {
				frame = 2 * 256 << 10
			}
			if max := uint64(4*limit + frame + 8<<20); alloc > max {
				t.Errorf("the call allocated %d bytes, want at most %d (4 stack limits, a large frame, 8 MiB for the instance)", alloc, max)
			}
			t.Logf("limit %s: stopped at %s, %s allocated", kib(limit), kib(se.Used), kib(int64(alloc)))
		})
	}
}

// Frames that weigh much more than they hold (many locals, none kept
// across the call) give their weight back as they return, but only up to
// the room the last check granted: a deeper recursion of light frames
// after them is still stopped at the limit.
func TestReturnedWeightIsCapped(t *testing.T) {
	e := newEngine(t)
	for _, depth := range []uint32{1, 40, 3000} {
		p := newPolicy(t, e, PolicySpec{Name: fmt.Sprint("hoard-", depth), MaxInstances: 1, Timeout: time.Minute})
		v := load(t, p, wasmgen.StackHoard(100_000, depth, 2_000_000))
		var err *CallError
		alloc := allocatedDuring(func() { _, err = filter(v, nodeInfo("n", nil, false)) })
		var se *StackLimitError
		if err == nil || !errors.As(err, &se) {
			t.Fatalf("depth %d: err = %v, want a trap past the stack limit", depth, err)
		}
		if se.Used > 2*p.stackLimit || alloc > uint64(4*p.stackLimit+8<<20) {
			t.Errorf("depth %d: stopped at %d bytes of stack after allocating %d, want within twice the limit of %d", depth, se.Used, alloc, p.stackLimit)
		}
		t.Logf("%d heavy frames, then light ones: stopped at %s, %s allocated", depth, kib(se.Used), kib(int64(alloc)))
	}
}

// The room goes back up as calls return: a guest that recurses within its
// limit over and over is never stopped for its stack, however many times
// it goes down, and its calls check the stack only when they go deeper
// than before.
func TestRepeatedRecursionKeepsItsRoom(t *testing.T) {
	p := newPolicy(t, newEngine(t), PolicySpec{MaxInstances: 1, Timeout: 200 * time.Millisecond})
	v := load(t, p, wasmgen.RecursionModule(wasmgen.Recursion{Depth: 500, Locals: 8, Repeat: true}))
	_, err := filter(v, nodeInfo("n", nil, false))
	if err == nil || err.Outcome != OutcomeTimeout {
		t.Fatalf("err = %v, want the deadline to end the loop", err)
	}
}

// An instance is charged the stacks it holds after its calls, and one that
// holds more than its limit is not kept; the budget keeps room for every
// call that may run at once to grow its stack to stackGrowthFactor limits.
func TestStackIsCharged(t *testing.T) {
	e := newEngine(t)
	mod := wasmgen.RecursionModule(wasmgen.Recursion{Depth: 3000, Locals: 8})
	reserved := func(limit int64) int64 {
		p := newPolicy(t, e, PolicySpec{Name: kib(limit), MaxInstances: 1, StackLimitBytes: limit})
		load(t, p, mod)
		r := e.budget.reserved()
		_ = p.Close(context.Background())
		return r
	}
	small, large := reserved(256<<10), reserved(4<<20)
	if want := int64(e.proc.maxRunning()+1) * stackGrowthFactor * (4<<20 - 256<<10); large-small != want {
		t.Errorf("the budget keeps %d bytes more for a policy with a 4 MiB stack limit than for one with 256 KiB, want %d", large-small, want)
	}

	// 3,000 frames of 8 locals fit 1 MiB: the instance is kept, charged
	// what its stack holds.
	p := newPolicy(t, e, PolicySpec{Name: "held", MaxInstances: 1, StackLimitBytes: 1 << 20})
	v := load(t, p, mod)
	before := v.chargedBytes.Load()
	if _, err := filter(v, nodeInfo("n", nil, false)); err != nil {
		t.Fatal(err)
	}
	if v.discarded.Load() != 0 {
		t.Fatalf("an instance whose stack holds less than its limit was discarded")
	}
	in := <-v.idle
	held := in.stackHeld
	v.idle <- in
	if got := v.chargedBytes.Load() - before; held < 64<<10 || got != held {
		t.Errorf("after a call that grew the stack to %d bytes the instance's charge grew by %d, want as much", held, got)
	}

	// At the smallest limit, 400 frames of 8 locals fit: the instance
	// is kept.
	p64 := newPolicy(t, e, PolicySpec{Name: "held-64", MaxInstances: 1, StackLimitBytes: MinStackLimitBytes})
	v = load(t, p64, wasmgen.RecursionModule(wasmgen.Recursion{Depth: 400, Locals: 8}))
	if _, err := filter(v, nodeInfo("n", nil, false)); err != nil {
		t.Fatal(err)
	}
	if v.discarded.Load() != 0 {
		in := <-v.idle
		t.Fatalf("400 frames of 8 locals: the instance was discarded holding %d bytes of stack", in.stackHeld)
	}
}
