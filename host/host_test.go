package host

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"

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
	ni.SetNode(&v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       v1.NodeSpec{Unschedulable: cordoned},
	})
	return ni
}

func testPod() *PodState {
	return NewPodState(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-1"}})
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

// An infinite loop ends within timeout + 10ms (deadline_test.go: median of
// deadlineRuns runs), the instance is discarded, and the next call succeeds
// on a fresh instance.
func TestInfiniteLoopEndsWithinTimeout(t *testing.T) {
	const timeout = 50 * time.Millisecond
	p := newPolicy(t, newEngine(t), PolicySpec{Timeout: timeout, MaxInstances: 1})
	v := load(t, p, testguests.Fixture(t, "loop"))
	for _, kind := range []CallKind{CallFilter, CallScore} {
		var o overruns
		for run := 0; run < deadlineRuns; run++ {
			discarded := v.discarded.Load()
			start := time.Now()
			_, _, err := v.Call(context.Background(), kind, testPod(), nodeInfo("cordoned", nil, true), new(PolicyCycle), nil)
			o.add(time.Since(start), timeout)
			if err == nil || err.Outcome != OutcomeTimeout {
				t.Fatalf("%s: err = %v, want a timeout", kind, err)
			}
			if _, inUse := v.PoolStats(); v.discarded.Load() != discarded+1 || inUse != 0 {
				t.Fatalf("after timeout: discarded %d instances, inUse=%d; want the instance discarded", v.discarded.Load()-discarded, inUse)
			}
			if r, err := filter(v, nodeInfo("ok", nil, false)); err != nil || r.Code != abi.CodeSuccess {
				t.Fatalf("next call = %+v, %v; want success on a fresh instance", r, err)
			}
			if live, _ := v.PoolStats(); live != 1 {
				t.Fatalf("live instances = %d, want 1 fresh instance", live)
			}
		}
		o.check(t, kind.String()+": infinite loop stopped")
	}
}

func TestTrapsDiscardInstance(t *testing.T) {
	p := newPolicy(t, newEngine(t), PolicySpec{MaxInstances: 1})
	v := load(t, p, testguests.Fixture(t, "trap"))
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x", UID: "x"}}
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
		{"abi v4", "ABIVersion", "ABI v4", testguests.Fixture(t, "abiv4")},
		{"no entry points", "Validate", `exports no entry point: none of "filter", "score", "preenqueue" or "prebind"`, testguests.Fixture(t, "noentry")},
		{"bad signature", "Validate", `export "filter" has signature (i32)->(i32)`, testguests.Fixture(t, "badsig")},
		{"init loops", "Instantiate", "_initialize did not finish within", testguests.Fixture(t, "initloop")},
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
	for _, bad := range [][]byte{[]byte("garbage"), testguests.Fixture(t, "pathopen"), testguests.Fixture(t, "abiv4")} {
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

// barrierNode is a real NodeInfo whose GetPods, reached through the guest's
// node_pod_count host call, blocks until `want` calls are inside guest code
// at the same time. If the host serialized calls (one instance, or a lock
// held across guest calls), the first call would wait alone and the barrier
// would time out.
type barrierNode struct {
	fwk.NodeInfo
	arrived *atomic.Int32
	want    int32
	release chan struct{}
	once    *sync.Once
	timeout time.Duration
	failed  *atomic.Bool
}

func (b barrierNode) GetPods() []fwk.PodInfo {
	if b.arrived.Add(1) == b.want {
		b.once.Do(func() { close(b.release) })
	}
	select {
	case <-b.release:
	case <-time.After(b.timeout):
		b.failed.Store(true)
		b.once.Do(func() { close(b.release) })
	}
	return b.NodeInfo.GetPods()
}

// runConcurrentFilters starts n Filter calls at once through a barrier node
// and reports whether all n were inside guest code at the same time.
func runConcurrentFilters(t *testing.T, v *Version, n int32, wait time.Duration) (allInside bool) {
	t.Helper()
	var arrived atomic.Int32
	var failed atomic.Bool
	node := barrierNode{NodeInfo: nodeInfo("n", nil, false), arrived: &arrived, want: n, release: make(chan struct{}), once: &sync.Once{}, timeout: wait, failed: &failed}
	pod := testPod()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := int32(0); i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := v.Call(context.Background(), CallFilter, pod, node, new(PolicyCycle), nil); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return !failed.Load()
}

// 16 goroutines (the scheduler's default parallelism) call Filter on one
// policy at once; the test fails if the pool serializes them. (With as many
// running tokens as callers: by default at most one guest call per P runs,
// TestGuestCallsRunOnePerP.)
func TestParallelFilterCallsDoNotSerialize(t *testing.T) {
	const n = 16
	withRunningTokens(t, n)
	p := newPolicy(t, newEngine(t), PolicySpec{MaxInstances: n, Timeout: 30 * time.Second})
	v := load(t, p, testguests.Fixture(t, "ok"))
	if !runConcurrentFilters(t, v, n, 10*time.Second) {
		t.Fatalf("fewer than %d Filter calls were inside the guest at once: calls are serialized", n)
	}
	if live, _ := v.PoolStats(); live != n {
		t.Fatalf("pool has %d instances, want %d", live, n)
	}
}

// withRunningTokens lets n guest calls run at once for the test.
func withRunningTokens(t *testing.T, n int) {
	prev := cap(*theProcess.running.Load())
	theProcess.setRunningTokens(n)
	t.Cleanup(func() { theProcess.setRunningTokens(prev) })
}

// By default no more guest calls run at once than the process has Ps: 16
// callers hold 16 instances, but only that many are inside guest code.
func TestGuestCallsRunOnePerP(t *testing.T) {
	const n, ps = 16, 2
	withRunningTokens(t, ps)
	p := newPolicy(t, newEngine(t), PolicySpec{MaxInstances: n, Timeout: 30 * time.Second})
	v := load(t, p, testguests.Fixture(t, "ok"))
	if runConcurrentFilters(t, v, ps+1, 2*time.Second) {
		t.Fatalf("%d calls were inside guest code at once with %d running tokens", ps+1, ps)
	}
	if !runConcurrentFilters(t, v, ps, 10*time.Second) {
		t.Fatalf("%d calls could not run at once with %d running tokens", ps, ps)
	}
}

// The negative control: with a pool of one instance calls are serialized,
// and the barrier must notice it. This proves the test above can fail.
func TestParallelismCheckDetectsSerialization(t *testing.T) {
	withRunningTokens(t, 4)
	p := newPolicy(t, newEngine(t), PolicySpec{MaxInstances: 1, Timeout: 30 * time.Second})
	v := load(t, p, testguests.Fixture(t, "ok"))
	if runConcurrentFilters(t, v, 4, 200*time.Millisecond) {
		t.Fatal("the barrier saw 4 calls inside one instance at once; it cannot detect serialization")
	}
}

// A batch call gives every node the full timeout, stops a loop on one node
// within timeout + 10ms of that node's start (median of deadlineRuns runs),
// and keeps the verdicts of the nodes evaluated before it.
func TestBatchDeadlinePerNode(t *testing.T) {
	const timeout = 50 * time.Millisecond
	p := newPolicy(t, newEngine(t), PolicySpec{Timeout: timeout, MaxInstances: 1})
	v := load(t, p, testguests.Fixture(t, "loop"))
	if !v.Exports().Has(abi.FilterNodes) {
		t.Fatal("filter_nodes not detected")
	}
	nodes := []fwk.NodeInfo{nodeInfo("a", nil, false), nodeInfo("b", nil, false), nodeInfo("c", nil, true), nodeInfo("d", nil, false)}
	results := make([]Result, len(nodes))
	var o overruns
	for run := 0; run < deadlineRuns; run++ {
		start := time.Now()
		done, err := v.CallNodes(context.Background(), CallFilter, testPod(), nodes, new(PolicyCycle), results, nil)
		o.add(time.Since(start), timeout)
		if err == nil || err.Outcome != OutcomeTimeout || done != 2 {
			t.Fatalf("done=%d err=%v; want a timeout at node 2", done, err)
		}
		if results[0].Code != 0 || results[1].Code != 0 {
			t.Fatalf("results before the failing node = %+v", results[:2])
		}
		// The instance was replaced; a batch without the looping node succeeds.
		if done, err := v.CallNodes(context.Background(), CallFilter, testPod(), nodes[:2], new(PolicyCycle), results[:2], nil); err != nil || done != 2 {
			t.Fatalf("next batch: done=%d err=%v", done, err)
		}
	}
	o.check(t, "batch stopped")
}

// Batch and single calls of the real TinyGo and Go team-isolation guests agree.
func TestBatchMatchesSingleCalls(t *testing.T) {
	for _, tc := range testguests.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			p := newPolicy(t, newEngine(t), PolicySpec{Config: "key=team", Timeout: time.Second})
			v := load(t, p, testguests.PolicyBytes(t, tc, "team-isolation"))
			if !v.Exports().Has(abi.FilterNodes) || v.Exports().Has(abi.ScoreNodes) {
				t.Fatalf("exports = %s, want filter and filter_nodes only", v.Exports())
			}
			pod := NewPodState(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p", Labels: map[string]string{"team": "a"}}})
			var nodes []fwk.NodeInfo
			for i := 0; i < 70; i++ {
				labels := map[string]string{}
				switch i % 3 {
				case 0:
					labels["team"] = "a"
				case 1:
					labels["team"] = "b"
				}
				nodes = append(nodes, nodeInfo(fmt.Sprintf("n%d", i), labels, false))
			}
			results := make([]Result, len(nodes))
			if done, err := v.CallNodes(context.Background(), CallFilter, pod, nodes, new(PolicyCycle), results, nil); err != nil || done != len(nodes) {
				t.Fatalf("done=%d err=%v", done, err)
			}
			for i, ni := range nodes {
				_, single, err := v.Call(context.Background(), CallFilter, pod, ni, new(PolicyCycle), nil)
				if err != nil {
					t.Fatal(err)
				}
				if single != results[i] {
					t.Fatalf("node %d: batch %+v, single %+v", i, results[i], single)
				}
			}
			if results[0].Code != 0 || results[1].Reason != "team label mismatch" || results[2].Code != abi.CodeUnschedulable {
				t.Fatalf("results = %+v", results[:3])
			}
		})
	}
}

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
		p := newPolicy(t, e, PolicySpec{MemoryLimitBytes: 16 << 20, MaxInstances: 1})
		v := load(t, p, testguests.Fixture(t, fixture))
		r, err := filter(v, nodeInfo("n", nil, false))
		return v, r, err
	}
	t.Run("deep recursion", func(t *testing.T) {
		v, _, err := run(t, "recurse")
		if err == nil || err.Outcome != OutcomeTrap || !strings.Contains(err.Error(), "stack overflow") {
			t.Fatalf("err = %v, want a stack-overflow trap", err)
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
