package host

import (
	"errors"
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
	if _, held, ok := stackOf(in.fn[CallFilter]); !ok || held < in.stackPeak || in.stackHeld != held {
		t.Errorf("filter's stack holds %d bytes (ok %v), the instance counts %d; the call used %d", held, ok, in.stackHeld, in.stackPeak)
	}
}

// Recursion without end, whatever shape its frames have, ends at the
// policy's stack limit as the guest's own failure: the call traps, its
// instance is discarded, and the stack it grew stays within what the
// instance is charged for.
func TestDeepRecursionIsStopped(t *testing.T) {
	e := newEngine(t)
	for _, tc := range []struct {
		name  string
		shape wasmgen.Recursion
		limit int64
	}{
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
			// What the call allocated: its stack as wazero doubled it,
			// and a new instance for the next call. The frames of the
			// large shape are 200 KiB each, past any limit's rooms.
			frame := int64(0)
			if tc.shape.Blocks > 0 {
				frame = 2 * 256 << 10
			}
			if max := uint64(stackRoomFactor*limit + frame + 8<<20); alloc > max {
				t.Errorf("the call allocated %d bytes, want at most %d (%d stack limits, a large frame, 8 MiB for the instance)", alloc, max, stackRoomFactor)
			}
			t.Logf("limit %s: stopped at %s, %s allocated", kib(limit), kib(se.Used), kib(int64(alloc)))
		})
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

// An instance is charged stackRoomFactor stack limits, and one whose
// stacks hold more than a limit after a call is not kept.
func TestStackIsCharged(t *testing.T) {
	e := newEngine(t)
	mod := wasmgen.RecursionModule(wasmgen.Recursion{Depth: 3000, Locals: 8})
	charged := func(limit int64) int64 {
		p := newPolicy(t, e, PolicySpec{Name: kib(limit), MaxInstances: 1, StackLimitBytes: limit})
		v := load(t, p, mod)
		return v.chargedBytes.Load()
	}
	small, large := charged(256<<10), charged(4<<20)
	if want := int64(stackRoomFactor * (4<<20 - 256<<10)); large-small != want {
		t.Errorf("an instance with a 4 MiB stack limit is charged %d bytes more than one with 256 KiB, want %d", large-small, want)
	}
	// 3,000 frames of 8 locals fit 1 MiB, and leave more than 64 KiB.
	p := newPolicy(t, e, PolicySpec{Name: "held", MaxInstances: 1, StackLimitBytes: 1 << 20})
	v := load(t, p, mod)
	if _, err := filter(v, nodeInfo("n", nil, false)); err != nil {
		t.Fatal(err)
	}
	if v.discarded.Load() != 0 {
		t.Fatalf("an instance whose stack holds less than its limit was discarded")
	}
	p64 := newPolicy(t, e, PolicySpec{Name: "held-64", MaxInstances: 1, StackLimitBytes: MinStackLimitBytes})
	v = load(t, p64, wasmgen.RecursionModule(wasmgen.Recursion{Depth: 400, Locals: 8}))
	if _, err := filter(v, nodeInfo("n", nil, false)); err != nil {
		t.Fatal(err)
	}
	in := <-v.idle
	held := in.stackHeld
	v.idle <- in
	t.Logf("400 frames hold %d bytes of stack", held)
	if held > MinStackLimitBytes {
		t.Fatalf("400 frames of 8 locals hold %d bytes, more than the 64 KiB limit: the call should have been stopped", held)
	}
}
