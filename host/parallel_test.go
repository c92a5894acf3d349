package host

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/internal/testguests"
)

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
