package host

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

// A replaced version's compiled code is freed after the grace period, so
// reloads do not accumulate memory; a straggling call fails cleanly.
func TestRetiredVersionIsFreed(t *testing.T) {
	p := newPolicy(t, newEngine(t), PolicySpec{RetiredGrace: 50 * time.Millisecond})
	v1 := load(t, p, testguests.Fixture(t, "ok"))
	load(t, p, testguests.Fixture(t, "command"))
	deadline := time.Now().Add(5 * time.Second)
	for !v1.closed.Load() {
		if time.Now().After(deadline) {
			t.Fatal("retired version not freed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := filter(v1, nodeInfo("n", nil, false)); err == nil || err.Outcome != OutcomeUnavailable {
		t.Fatalf("call on a freed version: %v, want unavailable", err)
	}
	if r, err := filter(p.Current(), nodeInfo("n", nil, false)); err != nil || r.Code != 0 {
		t.Fatalf("current version: %+v %v", r, err)
	}
}

// Clocks and randomness are deterministic unless the policy opts in.
func TestDeterministicClockAndRandom(t *testing.T) {
	sample := func(spec PolicySpec) (time.Time, []byte) {
		t.Helper()
		p := newPolicy(t, newEngine(t), spec)
		v := load(t, p, testguests.Fixture(t, "clock"))
		blob := new(PolicyCycle)
		if _, _, err := v.Call(context.Background(), CallFilter, testPod(), nodeInfo("n", nil, false), blob, nil); err != nil {
			t.Fatal(err)
		}
		if len(blob.State) != 16 {
			t.Fatalf("cycle state = %d bytes", len(blob.State))
		}
		ns := int64(binary.LittleEndian.Uint64(blob.State[:8]))
		return time.Unix(0, ns), blob.State[8:]
	}
	t1, r1 := sample(PolicySpec{})
	t2, r2 := sample(PolicySpec{})
	if !t1.Equal(t2) || !bytes.Equal(r1, r2) {
		t.Fatalf("deterministic sandbox differs between instances: %v/%x vs %v/%x", t1, r1, t2, r2)
	}
	if want := time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC); !t1.Equal(want) {
		t.Fatalf("deterministic clock's first read = %v, want %v (docs/abi.md §1)", t1, want)
	}
	// A fixed clock (wasmsched test --clock) reads exactly what it was set to.
	fixed := time.Date(2026, 11, 23, 22, 30, 0, 5, time.UTC)
	if t4, _ := sample(PolicySpec{Clock: fixed}); !t4.Equal(fixed) {
		t.Fatalf("Clock %v: guest saw %v", fixed, t4)
	}
	t3, r3 := sample(PolicySpec{RealClock: true, RealRandom: true})
	_, r4 := sample(PolicySpec{RealClock: true, RealRandom: true})
	if d := time.Since(t3); d < 0 || d > time.Minute {
		t.Fatalf("realClock: guest saw %v, now is %v", t3, time.Now())
	}
	if bytes.Equal(r3, r4) || bytes.Equal(r3, r1) {
		t.Fatalf("realRandom gave repeated bytes %x %x", r3, r4)
	}
}

// Every hand-written fixture is committed in compiled form next to its source.
func TestFixturesAreCompiled(t *testing.T) {
	wats, err := filepath.Glob(filepath.Join("testdata", "*.wat"))
	if err != nil || len(wats) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, w := range wats {
		if _, err := os.Stat(strings.TrimSuffix(w, ".wat") + ".wasm"); err != nil {
			t.Errorf("%s has no compiled .wasm next to it: run `make fixtures` and commit the result", w)
		}
	}
}

// Hostile guests: each is stopped or refused, with the instance discarded
// where one ran, and the policy keeps serving.
func TestAdversarialModules(t *testing.T) {
	e := newEngine(t)
	run := func(t *testing.T, fixture string) (*Version, Result, *CallError) {
		// A minute: filling the guest's stack under -race on a shared
		// 2-core machine took more than the default 5 s (a CI run failed
		// with a timeout); the test is about the trap, not the time.
		p := newPolicy(t, e, PolicySpec{MemoryLimitBytes: 16 << 20, MaxInstances: 1, Timeout: time.Minute})
		v := load(t, p, testguests.Fixture(t, fixture))
		r, err := filter(v, nodeInfo("n", nil, false))
		return v, r, err
	}
	t.Run("deep recursion", func(t *testing.T) {
		v, _, err := run(t, "recurse")
		var se *StackLimitError
		if err == nil || err.Outcome != OutcomeTrap || !errors.As(err, &se) || !strings.Contains(err.Error(), "stackLimit") {
			t.Fatalf("err = %v, want a trap past the stack limit", err)
		}
		if v.discarded.Load() != 1 {
			t.Fatalf("instance kept after a stack overflow")
		}
	})
	t.Run("proc_exit mid-call", func(t *testing.T) {
		v, _, err := run(t, "exit")
		if err == nil || err.Outcome != OutcomeExit || !strings.Contains(err.Error(), "exit_code(3)") {
			t.Fatalf("err = %v, want exit with code 3", err)
		}
		if v.discarded.Load() != 1 {
			t.Fatalf("instance kept after proc_exit")
		}
	})
	t.Run("environment is empty", func(t *testing.T) {
		if _, r, err := run(t, "environ"); err != nil || r.Code != abi.CodeSuccess {
			t.Fatalf("result = %+v, %v: the guest saw environment variables", r, err)
		}
	})
	t.Run("10 MB reason", func(t *testing.T) {
		_, r, err := run(t, "bigreason")
		if err != nil || r.Code != abi.CodeUnschedulable || len(r.Reason) != MaxReasonLength || r.Reason != strings.Repeat("x", MaxReasonLength) {
			t.Fatalf("result code %d, reason length %d, err %v; want the reason cut to %d bytes", r.Code, len(r.Reason), err, MaxReasonLength)
		}
	})
	t.Run("socket import", func(t *testing.T) {
		p := newPolicy(t, e, PolicySpec{})
		_, err := p.Load(context.Background(), testguests.Fixture(t, "socket"), "")
		if err == nil || !strings.Contains(err.Error(), "wasi_snapshot_preview1.sock_accept") {
			t.Fatalf("err = %v, want the socket import named", err)
		}
	})
}
