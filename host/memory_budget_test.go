package host

import (
	"context"
	"errors"
	"fmt"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

// serves checks that a version answers a Filter (or Score) call.
func serves(t *testing.T, v *Version) {
	t.Helper()
	if err := serve(v); err != nil {
		t.Fatal(err)
	}
}

func serve(v *Version) error {
	kind := CallFilter
	if !v.Exports().Has(CallFilter) {
		kind = CallScore
	}
	_, r, cerr := v.Call(context.Background(), kind, testPod(), nodeInfo("n", nil, false), new(PolicyCycle), nil)
	if cerr != nil {
		return fmt.Errorf("policy %s: %w", v.p.name, cerr)
	}
	if r.Code != abi.CodeSuccess && r.Code != abi.CodeUnschedulable && r.Code != abi.CodeUnschedulableAndUnresolvable {
		return fmt.Errorf("policy %s: %+v", v.p.name, r)
	}
	return nil
}

// Policies loading the same bytes share one compiled module: loaded
// concurrently, they compile once, and the budget charges the module once.
// The code and heap a module holds are measured (non-zero for a Go guest,
// whose compiled code is megabytes), and the last policy to go frees it.
func TestIdenticalBytesCompileOnce(t *testing.T) {
	e := newEngine(t)
	tiny := testguests.PolicyBytes(t, testguests.TinyGo, "spread")
	gog := testguests.PolicyBytes(t, testguests.Go, "spread")
	const n = 12
	ps := make([]*Policy, n)
	vs := make([]*Version, n)
	var wg sync.WaitGroup
	for i := range ps {
		ps[i] = newPolicy(t, e, PolicySpec{Name: "p" + string(rune('a'+i))})
		m := tiny
		if i%4 == 0 {
			m = gog
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := ps[i].Load(context.Background(), m, "")
			if err != nil {
				t.Error(err)
				return
			}
			vs[i] = v
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if got := len(e.modules); got != 2 {
		t.Fatalf("%d compiled modules for 2 distinct modules", got)
	}
	for i, v := range vs {
		want := vs[1]
		if i%4 == 0 {
			want = vs[0]
		}
		if v.sm != want.sm {
			t.Fatalf("policy %d does not share the module of policy %s", i, want.p.name)
		}
		serves(t, v)
	}
	goMod, tinyMod := vs[0].sm, vs[1].sm
	// The module's own heap is not asserted: under -race, with engines of
	// earlier runs in the process, its measurement has read 0 (the live
	// heap fell during the compile for reasons of its own); the code (read
	// from wazero) and an instance's heap have not.
	if goMod.code < 1<<20 || goMod.instHeap.Load() <= 0 {
		t.Fatalf("Go module measured at code %d, instance heap %d bytes; want megabytes of code and some heap", goMod.code, goMod.instHeap.Load())
	}
	if tinyMod.code <= 0 || tinyMod.code >= goMod.code {
		t.Fatalf("TinyGo module measured at %d bytes of code (Go: %d); want less than the Go module's", tinyMod.code, goMod.code)
	}
	use := e.MemoryBudget()
	if use.Modules != goMod.cost()+tinyMod.cost() {
		t.Fatalf("modules charged %d, want each module once: %d + %d", use.Modules, goMod.cost(), tinyMod.cost())
	}
	var shares int64
	for _, v := range vs {
		shares += v.MemoryShare()
	}
	if d := shares - use.Used(); d < -n || d > n { // integer division leaves at most 1 byte per policy
		t.Fatalf("policies' shares sum to %d, budget use is %d", shares, use.Used())
	}
	for _, p := range ps {
		_ = p.Close(context.Background())
	}
	if use := e.MemoryBudget(); use.Modules != 0 || use.Instances != 0 || len(e.modules) != 0 {
		t.Fatalf("after closing every policy: %+v, %d modules; want nothing held", use, len(e.modules))
	}
}

// A module that does not fit the budget next to the loaded ones is refused
// with a LoadError that names the budget and the arg that raises it; the
// policies already loaded keep serving, and the refused module's code is
// freed.
func TestMemoryBudgetRefusesWhatCannotFit(t *testing.T) {
	e := newEngine(t)
	small := load(t, newPolicy(t, e, PolicySpec{Name: "small"}), testguests.PolicyBytes(t, testguests.TinyGo, "spread"))
	before := e.MemoryBudget()
	// Room for what is loaded and one more MiB: less than a Go module's
	// machine code alone (7 MiB or more).
	e.budget.limit = before.Modules + int64(theProcess.maxRunning())*small.instCost + 1<<20

	big := newPolicy(t, e, PolicySpec{Name: "big"})
	_, err := big.Load(context.Background(), testguests.PolicyBytes(t, testguests.Go, "spread"), "")
	var le *LoadError
	if !errors.As(err, &le) || le.Reason != "MemoryBudget" || le.Policy != "big" {
		t.Fatalf("load = %v, want a MemoryBudget LoadError for policy big", err)
	}
	for _, want := range []string{"memory budget of " + mib(e.budget.limit), "raise memoryBudget in the WasmPolicy args"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("refusal %q does not say %q", err, want)
		}
	}
	if big.Current() != nil {
		t.Fatal("the refused module serves")
	}
	serves(t, small)
	if after := e.MemoryBudget(); after.Modules != before.Modules || len(e.modules) != 1 {
		t.Fatalf("after the refusal modules hold %d bytes in %d modules, want %d in 1 (the refused one freed)", after.Modules, len(e.modules), before.Modules)
	}
}

// Instances are made on demand and closed when idle: a policy not called
// for IdleInstanceTimeout holds no instance, and its next call makes one.
func TestIdleInstancesAreClosed(t *testing.T) {
	e, err := NewEngine(EngineOptions{CacheDir: t.TempDir(), IdleInstanceTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	v := load(t, newPolicy(t, e, PolicySpec{}), testguests.PolicyBytes(t, testguests.TinyGo, "spread"))
	serves(t, v)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if live, _ := v.PoolStats(); live == 0 {
			break
		}
		if time.Now().After(deadline) {
			live, _ := v.PoolStats()
			t.Fatalf("%d instances still live after 10s idle, want 0", live)
		}
	}
	if use := e.MemoryBudget(); use.Instances != 0 {
		t.Fatalf("%d bytes charged for instances with none live", use.Instances)
	}
	serves(t, v)
	if live, _ := v.PoolStats(); live != 1 {
		t.Fatalf("%d live instances after a call, want 1", live)
	}
}

// When the budget is full, the instance a call needs is made after closing
// an idle instance of the policy used least recently.
func TestFullBudgetClosesLeastRecentlyUsedInstance(t *testing.T) {
	e := newEngine(t)
	m := testguests.PolicyBytes(t, testguests.TinyGo, "spread")
	old := load(t, newPolicy(t, e, PolicySpec{Name: "old"}), m)
	recent := load(t, newPolicy(t, e, PolicySpec{Name: "recent"}), m)
	serves(t, recent)
	// Room for exactly what is held now (one idle instance each) plus
	// less than one more instance.
	e.budget.limit = e.MemoryBudget().Used() + recent.instCost/2

	ctx := context.Background()
	a, err := recent.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := recent.acquire(ctx) // needs a second instance of "recent"
	if err != nil {
		t.Fatal(err)
	}
	recent.release(a, true)
	recent.release(b, true)
	if live, _ := old.PoolStats(); live != 0 {
		t.Fatalf("policy old (used least recently) holds %d instances, want its idle one closed", live)
	}
	if live, _ := recent.PoolStats(); live != 2 {
		t.Fatalf("policy recent holds %d instances, want 2", live)
	}
	if u := e.MemoryBudget(); u.Evictions != 1 || u.OverBudget != 0 || u.Used() > e.budget.limit {
		t.Fatalf("budget %+v (limit %d), want one eviction and use within the limit", u, e.budget.limit)
	}
	serves(t, old) // and the evicted policy still serves, with a new instance
}

// A call holds an instance only while it runs (it takes the running token
// first), so however many goroutines call a policy, it never needs more
// instances than guest calls can run at once. The guest spends about a
// millisecond per call, so that the callers overlap.
func TestInstancesStayWithinRunningCalls(t *testing.T) {
	defer theProcess.setRunningTokens(cap(*theProcess.running.Load()))
	// One token for two or more Ps: goroutines run while one guest call
	// holds the token, which is when one that took an instance first
	// would hold a second instance waiting.
	theProcess.setRunningTokens(1)
	v := load(t, newPolicy(t, newEngine(t), PolicySpec{MaxInstances: 16}), testguests.PolicyBytes(t, testguests.TinyGo, "testdata/adversary"))
	pod := NewPodState(st.MakePod().Name("slow").Namespace("default").UID("uid-slow").Labels(map[string]string{"attack": "slow"}).Obj())
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if _, _, err := v.Call(context.Background(), CallFilter, pod, nodeInfo("n", nil, false), new(PolicyCycle), nil); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if c := v.created.Load(); c != 1 {
		t.Fatalf("%d instances created for 16 goroutines calling with 1 running token, want 1", c)
	}
}

// forcedGCs counts the garbage collections the program forced.
func forcedGCs() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/forced:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// Measuring a module's host heap takes forced garbage collections; the
// measurement is kept in the compilation cache dir, so a restart loads the
// module with the same charge and without collecting.
func TestMeasurementsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	mod := testguests.PolicyBytes(t, testguests.Go, "spread")
	measure := func() (*sharedModule, uint64) {
		e, err := NewEngine(EngineOptions{CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		p := newPolicy(t, e, PolicySpec{})
		gcs := forcedGCs()
		v := load(t, p, mod)
		gcs = forcedGCs() - gcs
		_ = p.Close(context.Background())
		return v.sm, gcs
	}
	first, coldGCs := measure()
	again, warmGCs := measure()
	if coldGCs == 0 || warmGCs != 0 {
		t.Fatalf("forced collections: %d on the first load, %d on the restart; want some, then none", coldGCs, warmGCs)
	}
	// The code is measured again (a page may differ: wazero's per-engine
	// trampolines land with the first module of an engine).
	if again.heap != first.heap || again.instHeap.Load() != first.instHeap.Load() || again.code < first.code-64<<10 || again.code > first.code+64<<10 {
		t.Fatalf("restart measured heap %d, instance heap %d, code %d; first load %d, %d, %d", again.heap, again.instHeap.Load(), again.code, first.heap, first.instHeap.Load(), first.code)
	}
}

// The code a compilation adds is what is mapped now and was not before,
// whatever was unmapped meanwhile and however mappings merged.
func TestNewCodeBytes(t *testing.T) {
	for _, c := range []struct {
		name          string
		before, after mappings
		want          int64
	}{
		{"a new mapping", mappings{{0, 10}}, mappings{{0, 10}, {20, 30}}, 10},
		{"merged with its neighbour", mappings{{0, 10}}, mappings{{0, 25}}, 15},
		{"another unmapped meanwhile", mappings{{0, 10}, {40, 50}}, mappings{{0, 10}, {20, 28}}, 8},
		{"between two old ones, merged", mappings{{0, 10}, {20, 30}}, mappings{{0, 30}}, 10},
		{"nothing new", mappings{{0, 10}, {20, 30}}, mappings{{20, 30}}, 0},
	} {
		if got := c.after.newBytes(c.before); got != c.want {
			t.Errorf("%s: %d new bytes, want %d", c.name, got, c.want)
		}
	}
}

// The machine code of a compiled module is read from wazero's compiler
// engine. If a wazero upgrade moves the fields read, this fails (and the
// host falls back to measuring its executable mappings).
func TestCompiledCodeBytesReadsWazero(t *testing.T) {
	e := newEngine(t)
	v := load(t, newPolicy(t, e, PolicySpec{}), testguests.PolicyBytes(t, testguests.Go, "spread"))
	n, ok := compiledCodeBytes(v.sm.cm)
	if !ok || n < 1<<20 {
		t.Fatalf("compiledCodeBytes = %d, %v; want the Go module's megabytes of code", n, ok)
	}
	if v.sm.code != n {
		t.Fatalf("module charged %d bytes of code, wazero holds %d", v.sm.code, n)
	}
}

// When the budget has no room for another instance, a call of a policy
// that has one waits for it rather than closing another policy's only
// instance; and makeRoom closes a policy's second idle instance before any
// policy's only one.
func TestFullBudgetSharesAPolicysInstance(t *testing.T) {
	e := newEngine(t)
	wasm := testguests.PolicyBytes(t, testguests.TinyGo, "team-isolation")
	a := load(t, newPolicy(t, e, PolicySpec{Name: "a", Config: "key=team", MaxInstances: 2}), wasm)
	b := load(t, newPolicy(t, e, PolicySpec{Name: "b", Config: "key=team", MaxInstances: 2}), wasm)
	serves(t, a)
	serves(t, b)
	e.budget.limit = e.budget.used() // full: each has its one instance
	ctx := context.Background()
	held, err := a.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *instance)
	go func() {
		in, err := a.acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- in
	}()
	time.Sleep(shareWait / 4)
	a.release(held, true)
	if in := <-got; in != held {
		t.Errorf("the second call got another instance than the one released")
	} else {
		a.release(in, true)
	}
	if created := a.created.Load(); created != 1 {
		t.Errorf("policy a made %d instances, want 1", created)
	}
	if live, _ := b.PoolStats(); live != 1 {
		t.Errorf("policy b holds %d instances, want its one", live)
	}

	// With room again, a second instance of a; then the budget shrinks:
	// a's second instance goes, not b's only one.
	e.budget.limit = 0
	in1, _ := a.acquire(ctx)
	in2, _ := a.acquire(ctx)
	a.release(in1, true)
	a.release(in2, true)
	if v := e.budget.victim(nil); v != a {
		t.Errorf("victim %v, want policy a's second instance", v.p.name)
	}
}
