package host

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

// interruptionFlag runs the package's tests with another interruption mode:
// go test ./host -args -interruption=close-on-done runs them the way the
// host stopped calls before in-module fuel checks, for comparison.
var interruptionFlag = flag.String("interruption", "fuel", "fuel or close-on-done")

func testInterruption(t testing.TB) Interruption {
	switch *interruptionFlag {
	case "fuel":
		return InterruptFuel
	case "close-on-done":
		return InterruptCloseOnDone
	}
	t.Fatalf("-interruption=%q: want fuel or close-on-done", *interruptionFlag)
	return 0
}

func newEngine(t testing.TB) *Engine {
	t.Helper()
	e, err := NewEngine(EngineOptions{CacheDir: t.TempDir(), Interruption: testInterruption(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func newPolicy(t testing.TB, e *Engine, spec PolicySpec) *Policy {
	t.Helper()
	if spec.Name == "" {
		spec.Name = "test"
	}
	if spec.Timeout == 0 {
		// Generous: under a loaded CI machine a healthy call must never hit
		// it. Tests about deadlines set their own.
		spec.Timeout = 5 * time.Second
		if spec.PreEnqueueTimeout == 0 {
			spec.PreEnqueueTimeout = spec.Timeout // as generous for gates
		}
	}
	p, err := e.NewPolicy(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

func load(t testing.TB, p *Policy, b []byte) *Version {
	t.Helper()
	v, err := p.Load(context.Background(), b, "")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func nodeInfo(name string, labels map[string]string, cordoned bool, pods ...*v1.Pod) fwk.NodeInfo {
	ni := intree.NewNodeInfo(pods...)
	n := st.MakeNode().Name(name).Unschedulable(cordoned)
	for k, v := range labels {
		n.Label(k, v)
	}
	ni.SetNode(n.Obj())
	return ni
}

func testPod() *PodState {
	return NewPodState(st.MakePod().Name("p").Namespace("default").UID("uid-1").Obj())
}

func filter(v *Version, ni fwk.NodeInfo) (Result, *CallError) {
	_, r, err := v.Call(context.Background(), CallFilter, testPod(), ni, new(PolicyCycle), nil)
	return r, err
}

func TestFilterThroughHostFunctions(t *testing.T) {
	p := newPolicy(t, newEngine(t), PolicySpec{})
	v := load(t, p, testguests.Fixture(t, "ok"))
	if r, err := filter(v, nodeInfo("n1", nil, false)); err != nil || r.Code != abi.CodeSuccess {
		t.Fatalf("filter = %+v, %v; want success", r, err)
	}
	r, err := filter(v, nodeInfo("n2", map[string]string{"verdict": "reject"}, false))
	if err != nil || r.Code != abi.CodeUnschedulable || r.Reason != "rejected by fixture" {
		t.Fatalf("filter = %+v, %v; want Unschedulable with the guest's reason", r, err)
	}
	s, _, err := v.Call(context.Background(), CallScore, testPod(), nodeInfo("n1", nil, false), new(PolicyCycle), nil)
	if err != nil || s != 50 {
		t.Fatalf("score = %d, %v; want 50", s, err)
	}
}

func TestTrapsDiscardInstance(t *testing.T) {
	p := newPolicy(t, newEngine(t), PolicySpec{MaxInstances: 1})
	v := load(t, p, testguests.Fixture(t, "trap"))
	pod := st.MakePod().Name("x").UID("x").Obj()
	for name, ni := range map[string]fwk.NodeInfo{
		"unreachable":    nodeInfo("a", nil, true),
		"divide by zero": nodeInfo("b", nil, false, pod),
	} {
		_, err := filter(v, ni)
		if err == nil || err.Outcome != OutcomeTrap {
			t.Fatalf("%s: err = %v, want a trap", name, err)
		}
		if !strings.Contains(err.Error(), "policy trapped") {
			t.Errorf("%s: error %q does not say the policy trapped", name, err)
		}
		if v.discarded.Load() == 0 {
			t.Fatalf("%s: trapped instance kept", name)
		}
		if r, err := filter(v, nodeInfo("ok", nil, false)); err != nil || r.Code != abi.CodeSuccess {
			t.Fatalf("%s: next call = %+v, %v; want success", name, r, err)
		}
	}
}

func TestMemoryLimitAndRecycling(t *testing.T) {
	const limit = 2 << 20 // 32 pages
	p := newPolicy(t, newEngine(t), PolicySpec{MemoryLimitBytes: limit, MaxInstances: 1})
	v := load(t, p, testguests.Fixture(t, "growbomb"))
	// Filter grows until memory.grow fails, and returns normally.
	if _, err := filter(v, nodeInfo("n", nil, false)); err != nil {
		t.Fatalf("filter: %v", err)
	}
	// The instance ended above the recycle mark (half the limit): discarded.
	if d := v.discarded.Load(); d != 1 {
		t.Fatalf("bloated instance kept: %d discarded", d)
	}
	// Score traps after growth fails; the limit still held.
	in, err := v.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	in.Pod, in.Node = testPod(), nodeInfo("n", nil, false)
	_, cerr := in.call(CallScore, 1, 0, 0)
	if cerr == nil || cerr.Outcome != OutcomeTrap {
		t.Fatalf("score: %v, want trap", cerr)
	}
	if size := in.memoryBytes(); size > limit {
		t.Fatalf("memory grew to %d bytes, limit %d", size, limit)
	}
	v.release(in, false)
}

func TestImportAllowList(t *testing.T) {
	p := newPolicy(t, newEngine(t), PolicySpec{})
	for fixture, want := range map[string][]string{
		"pathopen":      {"wasi_snapshot_preview1.path_open"},
		"unknownimport": {"env.exfiltrate", "wasmsched.open_socket (unknown host function)"},
	} {
		_, err := p.Load(context.Background(), testguests.Fixture(t, fixture), "")
		var le *LoadError
		if !errors.As(err, &le) || le.Reason != "Validate" {
			t.Fatalf("%s: err = %v, want a Validate LoadError", fixture, err)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not name %s", fixture, err, w)
			}
		}
		if !strings.Contains(err.Error(), `policy "test"`) {
			t.Errorf("%s: error %q does not name the policy", fixture, err)
		}
	}
}

func TestLoadRejections(t *testing.T) {
	e := newEngine(t)
	cases := []struct {
		name, reason, want string
		src                []byte
	}{
		{"not wasm", "Decode", "not a wasm module", []byte("#!/bin/sh\necho hi\n")},
		{"abi v5", "ABIVersion", "ABI v5", testguests.Fixture(t, "abiv5")},
		{"no entry points", "Validate", `exports no entry point: none of "filter", "score", "preenqueue", "prebind", "reserve" or "permit"`, testguests.Fixture(t, "noentry")},
		{"bad signature", "Validate", `export "filter" has signature (i32)->(i32)`, testguests.Fixture(t, "badsig")},
		{"init loops", "Instantiate", "_initialize did not finish within", testguests.Fixture(t, "initloop")},
		// Reserve needs KeepsState: the error names the point, the export and the fix.
		{"reserve without KeepsState", "Validate", `the policy implements Reserve (export "reserve") but does not declare that it keeps state: call sdk.KeepsState()`, testguests.Fixture(t, "reserve_nokeep")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPolicy(t, e, PolicySpec{Timeout: 10 * time.Millisecond, InitTimeout: 200 * time.Millisecond})
			start := time.Now()
			_, err := p.Load(context.Background(), c.src, "")
			var le *LoadError
			if !errors.As(err, &le) || le.Reason != c.reason || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v; want reason %s containing %q", err, c.reason, c.want)
			}
			if c.reason == "Instantiate" && time.Since(start) > 2*time.Second {
				t.Fatalf("looping _initialize took %s to refuse", time.Since(start))
			}
			if p.Current() != nil {
				t.Fatal("a refused module became current")
			}
		})
	}
}

func TestCommandModule(t *testing.T) {
	p := newPolicy(t, newEngine(t), PolicySpec{})
	v := load(t, p, testguests.Fixture(t, "command"))
	if v.Exports().Initializer != "_start" {
		t.Fatalf("initializer = %q", v.Exports().Initializer)
	}
	if r, err := filter(v, nodeInfo("n", nil, false)); err != nil || r.Code != abi.CodeSuccess {
		t.Fatalf("filter = %+v, %v; want success after _start ran", r, err)
	}
}

func TestHostFunctionsRejectBadPointers(t *testing.T) {
	p := newPolicy(t, newEngine(t), PolicySpec{Config: "abcdef"})
	v := load(t, p, testguests.Fixture(t, "badptr"))
	r, err := filter(v, nodeInfo("n", map[string]string{"k": "v"}, false))
	if err != nil {
		t.Fatalf("a host function trapped or crashed on bad pointers: %v", err)
	}
	if r.Code != abi.CodeUnschedulable || r.Reason != "(reason pointer out of range)" {
		t.Fatalf("result = %+v", r)
	}
}

func TestSHA256PinAndGzip(t *testing.T) {
	p := newPolicy(t, newEngine(t), PolicySpec{})
	wasm := testguests.Fixture(t, "ok")
	sum := sha256.Sum256(wasm)
	digest := hex.EncodeToString(sum[:])
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(wasm)
	_ = zw.Close()

	_, err := p.Load(context.Background(), gz.Bytes(), strings.Repeat("0", 64))
	var le *LoadError
	if !errors.As(err, &le) || le.Reason != "SHA256Mismatch" || !strings.Contains(err.Error(), digest) {
		t.Fatalf("err = %v; want a SHA256Mismatch naming the actual digest", err)
	}
	v, err := p.Load(context.Background(), gz.Bytes(), "sha256:"+strings.ToUpper(digest))
	if err != nil {
		t.Fatalf("gzipped module with the right pin: %v", err)
	}
	if v.SHA256() != digest {
		t.Fatalf("sha256 = %s, want %s (of the wasm bytes, not the gzip)", v.SHA256(), digest)
	}
}

// A bad new version never replaces a good one; a good one swaps in while the
// old version keeps serving calls already pinned to it.
func TestReloadKeepsLastGood(t *testing.T) {
	p := newPolicy(t, newEngine(t), PolicySpec{})
	good := load(t, p, testguests.Fixture(t, "ok"))
	for _, bad := range [][]byte{[]byte("garbage"), testguests.Fixture(t, "pathopen"), testguests.Fixture(t, "abiv5")} {
		if _, err := p.Load(context.Background(), bad, ""); err == nil {
			t.Fatal("bad module loaded")
		}
		if p.Current() != good {
			t.Fatal("a failed reload replaced the good version")
		}
	}
	next := load(t, p, testguests.Fixture(t, "command"))
	if p.Current() != next || next == good {
		t.Fatal("good reload did not swap")
	}
	// A cycle that pinned the old version still completes on it.
	if r, err := filter(good, nodeInfo("n", map[string]string{"verdict": "reject"}, false)); err != nil || r.Code != abi.CodeUnschedulable {
		t.Fatalf("old pinned version: %+v, %v", r, err)
	}
	if live, _ := good.PoolStats(); live != 0 {
		t.Fatalf("retired version kept %d idle instances", live)
	}
	// Loading identical bytes is a no-op.
	if v := load(t, p, testguests.Fixture(t, "command")); v != next {
		t.Fatal("reloading identical bytes created a new version")
	}
}
