package host

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

// A scheduler restart loads every policy at once from a warm file
// compilation cache. With 40 Go policies sharing 5 modules (8 policies per
// module's bytes) wazero v1.12.0 handed a half-built module to concurrent
// loads of the same bytes and the process panicked, about once in 5
// starts (Engine.compile, wazero#2547). Each start here is a new engine
// over the same cache directory, as a restarted scheduler is; a panic
// fails the test binary. WASMSCHED_WARM_STARTS sets the number of starts
// (default 50).
func TestIdenticalModulesWarmStarts(t *testing.T) {
	starts := 50
	if s, err := strconv.Atoi(os.Getenv("WASMSCHED_WARM_STARTS")); err == nil && s > 0 {
		starts = s
	}
	const policies = 40
	names := []string{"team-isolation", "bin-packing", "spread", "maintenance-avoidance", "gpu-fit"}
	mods := make([][]byte, len(names))
	for i, n := range names {
		mods[i] = testguests.PolicyBytes(t, testguests.Go, n)
	}
	dir := t.TempDir()
	ctx := context.Background()
	engine := func() *Engine {
		e, err := NewEngine(EngineOptions{CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	// Fill the file cache, as the scheduler's previous run did.
	warm := engine()
	for i, m := range mods {
		p := newPolicy(t, warm, PolicySpec{Name: names[i], MaxInstances: 1})
		load(t, p, m)
		_ = p.Close(ctx)
	}
	_ = warm.Close()

	for s := 0; s < starts; s++ {
		e := engine()
		ps := make([]*Policy, policies)
		var wg sync.WaitGroup
		for i := range ps {
			p, err := e.NewPolicy(ctx, PolicySpec{Name: "p" + strconv.Itoa(i), Timeout: time.Second, MaxInstances: 2})
			if err != nil {
				t.Fatal(err)
			}
			ps[i] = p
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := p.Load(ctx, mods[i%len(mods)], ""); err != nil {
					t.Errorf("start %d, policy %d: %v", s, i, err)
				}
			}()
		}
		wg.Wait()
		// Every policy serves: one Filter (or Score) call each.
		for i, p := range ps {
			v := p.Current()
			kind := CallFilter
			if !v.Exports().Has(CallFilter) {
				kind = CallScore
			}
			if _, r, err := v.Call(ctx, kind, testPod(), nodeInfo("n", nil, false), new(PolicyCycle), nil); err != nil || (r.Code != abi.CodeSuccess && r.Code != abi.CodeUnschedulable && r.Code != abi.CodeUnschedulableAndUnresolvable) {
				t.Fatalf("start %d, policy %d (%s): %+v, %v", s, i, names[i%len(names)], r, err)
			}
			_ = p.Close(ctx)
		}
		_ = e.Close()
		if t.Failed() {
			return
		}
	}
}
