package wasmpolicy

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/host"
)

// BatchSize is how many nodes one batched guest call evaluates. A call has a
// fixed cost of about 1-2 µs (deadline, pool, wazero's call path); batching
// pays it once per BatchSize nodes. Small enough that the scheduler's early
// stop (percentageOfNodesToScore) wastes little work.
const BatchSize = 32

// batch is one batched guest call's results, computed by the first Filter
// or Score call that needs one of its nodes.
type batch struct {
	gate    batchGate
	results []host.Result
	scores  []int64
	done    int             // results[:done] are valid
	err     *host.CallError // failure while evaluating node done
}

// newBatches allocates the batches for n nodes.
func newBatches(n int) []batch { return make([]batch, (n+BatchSize-1)/BatchSize) }

// batchResult returns policy i's batched verdict for the node at pos of list,
// evaluating its batch on first use. ok is false when the node must be
// evaluated with a single call instead.
func batchResult(ctx context.Context, p *policy, m module, c *cycleData, i int, kind host.CallKind, batches []batch, list []fwk.NodeInfo, pos int) (res host.Result, score int64, cerr *host.CallError, ok bool) {
	bi := pos / BatchSize
	b := &batches[bi]
	start := bi * BatchSize
	b.gate.do(func() {
		end := min(start+BatchSize, len(list))
		b.results = make([]host.Result, end-start)
		if kind == host.CallScore {
			b.scores = make([]int64, end-start)
		}
		t := time.Now()
		b.done, b.err = m.CallNodes(ctx, kind, c.pod, list[start:end], &c.runs[i].pc, b.results, b.scores)
		p.observe(c, kind, t, b.err)
		if b.err == nil || kind != host.CallScore { // a failed score batch's nodes are called again, and counted then
			p.countBatch(kind, b.results[:b.done])
		}
	})
	k := pos - start
	switch {
	case k < b.done && (b.err == nil || kind != host.CallScore): // a failed score batch reports no scores
		if b.scores != nil {
			score = b.scores[k]
		}
		return b.results[k], score, nil, true
	case k == b.done && b.err != nil:
		return host.Result{}, 0, b.err, true
	}
	return host.Result{}, 0, nil, false
}

// batchGate runs a batch's evaluation once, in the first call that needs
// it, and holds the calls for its other nodes until it is done. It wakes
// them all at once: sync.Once, which it replaces, woke its waiters one at
// a time through its mutex (each woken goroutine took the mutex, found the
// batch evaluated and woke the next), so the scheduler's workers waiting on
// one batch ran one scheduling delay after another.
type batchGate struct {
	state atomic.Uint32 // gateIdle, gateClaimed, gateRunning, gateDone
	wg    sync.WaitGroup
}

const (
	gateIdle uint32 = iota
	gateClaimed
	gateRunning
	gateDone
)

// do runs f if no call has, else waits for the call that does. A panic in
// f marks the gate done, as sync.Once does.
func (g *batchGate) do(f func()) {
	if g.state.Load() == gateDone {
		return
	}
	if g.state.CompareAndSwap(gateIdle, gateClaimed) {
		g.wg.Add(1)
		g.state.Store(gateRunning) // a waiter seeing it waits on the Add
		defer func() {
			g.state.Store(gateDone)
			g.wg.Done()
		}()
		f()
		return
	}
	for g.state.Load() == gateClaimed { // the two statements between the claim and the Add
		runtime.Gosched()
	}
	g.wg.Wait() // returns at once when done
}

// countBatch counts the verdicts of a batch's evaluated nodes, once per
// result rather than once per node: the scheduler's goroutines read one
// policy's batches on both cores, and a counter incremented per node and
// policy moved its cache line between them on every node (200 policies'
// cycle, BenchmarkManyPolicies). A node the scheduler never asks for after
// its batch was evaluated (Filter's early stop) still counts: the guest
// gave it a verdict.
func (p *policy) countBatch(kind host.CallKind, results []host.Result) {
	var n [numResults]int
	for _, r := range results {
		n[resultOf(r.Code)]++
	}
	for r, k := range n {
		if k > 0 {
			p.m.eval[kind][r].Add(float64(k))
		}
	}
}

// call runs one single guest call and records its duration.
func (p *policy) call(ctx context.Context, m module, kind host.CallKind, c *cycleData, i int, node fwk.NodeInfo, scores []int64) (int64, host.Result, *host.CallError) {
	start := time.Now()
	s, res, cerr := m.Call(ctx, kind, c.pod, node, &c.runs[i].pc, scores)
	p.observe(c, kind, start, cerr)
	return s, res, cerr
}

// observe records a guest call's duration and, when it completed, tells the
// breaker. Stopped calls (not made, or interrupted because another call of
// the cycle failed) are not timed: the failed call is.
func (p *policy) observe(c *cycleData, kind host.CallKind, start time.Time, cerr *host.CallError) {
	if cerr != nil && cerr.Outcome == host.OutcomeStopped {
		return
	}
	p.m.observe(kind, start)
	switch {
	case cerr == nil:
		p.breaker.succeeded(c.pod.Pod)
		p.quarantine.release(c.pod.Pod)
	case cerr.Outcome == host.OutcomeTimeout || cerr.Outcome == host.OutcomeBudget:
		p.m.overrun.Observe(cerr.Late.Seconds())
	}
}
