package host

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Budget bounds how much of a scheduling cycle one policy may take. Without
// it, a policy that loops costs its timeout on every node: 200 nodes at
// 100 ms each kept the scheduler busy for seconds per attempt.
//
// The clock of a budget runs while at least one call of the policy is in
// flight, so calls running in parallel on different nodes are charged once
// for the time they overlap: the budget bounds the wall time the policy adds
// to the cycle, not the sum of its calls. While the clock runs, the moment
// the budget ends is fixed, and every call in flight shares it as its
// deadline.
//
// After a call times out, traps, exits or spends the budget, the budget
// stops: the calls still in flight are interrupted, and later calls fail at
// once with OutcomeStopped, without running the guest. A caller can also
// stop a budget before any call (an open circuit breaker).
type Budget struct {
	limit time.Duration

	mu        sync.Mutex
	spent     time.Duration // closed busy intervals
	busySince int64         // monotonic time the current busy interval began
	inflight  []*instance
	// stopped is written under mu and read without it: every batch of a
	// cycle asks whether the budget stopped, and the mutex they shared cost
	// 1% of a 1000-node cycle (BenchmarkCycle).
	stopped atomic.Pointer[CallError]
	// work is the deadline checks of the calls that ended, slept whether
	// one of them slept: whether a spent budget went to the policy's work
	// or to waiting for the machine (instance.starved).
	work  atomic.Int64
	slept atomic.Bool
	// onSpent, when set, is told each busy interval as it closes (under
	// mu): a tenant's share of scheduling time is charged as it is spent.
	onSpent func(time.Duration)
}

// NewBudget returns a budget of limit guest time; limit <= 0 means no
// budget beyond each call's timeout, but the budget still stops after a
// failed call.
func NewBudget(limit time.Duration) *Budget { return &Budget{limit: limit} }

// OnSpent makes the budget tell f each busy interval as it closes, the
// time just charged. Set it before the first call.
func (b *Budget) OnSpent(f func(time.Duration)) { b.onSpent = f }

// Limit is the budget's size.
func (b *Budget) Limit() time.Duration { return b.limit }

// Spent is the guest time charged so far, including calls still running.
func (b *Budget) Spent() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.spent
	if len(b.inflight) > 0 {
		s += time.Duration(monotonic() - b.busySince)
	}
	return s
}

// Stopped returns why the budget stopped, or nil while calls may run.
func (b *Budget) Stopped() *CallError {
	if b == nil {
		return nil
	}
	return b.stopped.Load()
}

// Stop ends the cycle for the policy because of cause: calls in flight are
// interrupted and fail with OutcomeStopped, and so do later calls. Only the
// first cause is kept.
func (b *Budget) Stop(cause *CallError) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopLocked(cause)
}

func (b *Budget) stopLocked(cause *CallError) {
	if b.stopped.Load() != nil {
		return
	}
	b.stopped.Store(cause)
	for _, in := range b.inflight {
		in.interrupt()
	}
}

// stoppedCall returns the error of a call made after the budget stopped.
func (b *Budget) stoppedCall() *CallError {
	if b == nil {
		return nil
	}
	stopped := b.stopped.Load()
	if stopped == nil {
		return nil
	}
	return &CallError{Outcome: OutcomeStopped, Err: stopped}
}

// begin registers a call on in and returns the budget's deadline on the
// monotonic clock (0: none), or why the call must not run.
func (b *Budget) begin(in *instance) (int64, *CallError) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if stopped := b.stopped.Load(); stopped != nil {
		return 0, &CallError{Outcome: OutcomeStopped, Err: stopped}
	}
	now := monotonic()
	if len(b.inflight) == 0 {
		b.busySince = now
	}
	var deadline int64
	if b.limit > 0 {
		deadline = b.busySince + int64(b.limit-b.spent)
		if deadline <= now { // spent by the calls that ran before
			b.stopLocked(b.spentError())
			return 0, &CallError{Outcome: OutcomeStopped, Err: b.stopped.Load()}
		}
	}
	in.stopReq.Store(false)
	in.budget = b
	b.inflight = append(b.inflight, in)
	return deadline, nil
}

// end unregisters a call and charges the busy interval when it was the
// last one in flight. cerr is how the call ended: a failure stops the
// budget for the rest of the cycle.
func (b *Budget) end(in *instance, cerr *CallError) *CallError {
	b.mu.Lock()
	defer b.mu.Unlock()
	in.stopReq.Store(false) // no later interrupt can reach in for this call
	in.budget = nil
	b.work.Add(int64(in.checks))
	if in.slept {
		b.slept.Store(true)
	}
	if i := slices.Index(b.inflight, in); i >= 0 {
		b.inflight = slices.Delete(b.inflight, i, i+1)
		if len(b.inflight) == 0 {
			d := time.Duration(monotonic() - b.busySince)
			b.spent += d
			if b.onSpent != nil {
				b.onSpent(d)
			}
		}
	}
	if cerr == nil {
		return nil
	}
	switch {
	case cerr.Outcome == OutcomeStopped:
		// Interrupted, or not started, because another call failed first:
		// report that cause.
		return &CallError{Outcome: OutcomeStopped, Err: b.stopped.Load()}
	case cerr.Outcome == OutcomeBudget:
		cerr = b.spentError()
	}
	if cerr.Outcome != OutcomeUnavailable {
		b.stopLocked(cerr)
	}
	return cerr
}

func (b *Budget) spentError() *CallError {
	return &CallError{Outcome: OutcomeBudget, Err: fmt.Errorf("spent its cycle budget of %s", b.limit)}
}
