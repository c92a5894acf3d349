package host

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// expiry says what ended a call that did not finish in time.
type expiry uint8

const (
	expiredByTimeout expiry = iota // the call's (or batch node's) timeout
	expiredByBudget                // the cycle budget's deadline
	expiredByStop                  // the budget stopped (another call failed)
)

// arm starts the deadline for the next guest call: d from now, or the
// budget's deadline (monotonic, 0 for none) when that comes first. It
// returns false, without arming, when the call's budget has already stopped.
func (in *instance) arm(d time.Duration, deadline int64) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.stopReq.Load() {
		return false
	}
	in.limit = d
	in.deadline = deadline
	in.expiredBy = expiredByTimeout
	in.ticks = 0
	in.checks, in.slept = 0, false
	now := monotonic()
	in.started.Store(now)
	in.armed.Store(true)
	if in.timer != nil {
		if deadline != 0 && time.Duration(deadline-now) < d {
			d = time.Duration(deadline - now)
		}
		in.timer.Reset(d)
	}
	return true
}

// disarm ends the call and reports whether it finished in time. A false
// answer means a deadline check or an interrupt ended it first, or it
// returned past its deadline: a late answer is not used, as when the
// deadline stopped it.
func (in *instance) disarm() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.timer != nil {
		in.timer.Stop()
	}
	if !in.armed.Swap(false) {
		return false
	}
	if by, late := in.overdue(monotonic()); late {
		in.expiredBy = by
		return false
	}
	return true
}

// overdue reports whether the call is past its deadline at now, and which
// deadline came first: the call's (or batch node's) timeout or the budget's.
func (in *instance) overdue(now int64) (expiry, bool) {
	left := in.limit - time.Duration(now-in.started.Load())
	if in.deadline != 0 && time.Duration(in.deadline-now) < left {
		return expiredByBudget, in.deadline <= now
	}
	return expiredByTimeout, left <= 0
}

// errDeadline is what a deadline check panics with to unwind the guest;
// wazero returns it, wrapped, from the call, and disarm's false answer
// classifies the call.
var errDeadline = errors.New("wasmsched: call stopped at its deadline")

// checkDeadline runs on the calling goroutine, from refuel and every
// hostCheckEvery host calls. The deadline counts from the last arm or
// select_node (each node of a batch gets the full limit), capped by the
// budget's deadline. A call past it, or one interrupted because its
// budget stopped, is unwound by a panic, which wazero turns into the
// call's error; the budget is stopped so the cycle's other calls end too.
func (in *instance) checkDeadline() {
	in.checks++
	if in.CallTable != nil && in.TableProgress(in.mod.Memory()) {
		in.NodeStarted()
	}
	if in.armed.Load() && !in.stopReq.Load() {
		if _, late := in.overdue(monotonic()); !late {
			return
		}
	}
	in.mu.Lock()
	by, fired := in.expiredBy, false
	if in.armed.Load() {
		if in.stopReq.Load() {
			by = expiredByStop
		} else {
			by, _ = in.overdue(monotonic())
		}
		fired = in.armed.Swap(false)
		in.expiredBy = by
	}
	in.killed = true
	b := in.budget
	in.mu.Unlock()
	if fired && b != nil && by != expiredByStop {
		b.Stop(in.deadlineCause(by, b))
	}
	panic(errDeadline)
}

// timerFired runs on the timer goroutine under InterruptCloseOnDone. A
// batch node's deadline moves with select_node, which only records its
// start: a timer that fires early re-arms for what is left.
func (in *instance) timerFired() {
	in.mu.Lock()
	if !in.armed.Load() {
		in.mu.Unlock()
		return
	}
	// (A table batch's progress restarts a node's deadline only under
	// InterruptFuel, where the guest's checks see it as it happens: seen
	// from here, at the deadline, it would restart a late node's clock.)
	now := monotonic()
	by, late := in.overdue(now)
	if !late {
		left := in.limit - time.Duration(now-in.started.Load())
		if in.deadline != 0 && time.Duration(in.deadline-now) < left {
			left = time.Duration(in.deadline - now)
		}
		in.timer.Reset(left)
		in.mu.Unlock()
		return
	}
	in.armed.Store(false)
	in.expiredBy = by
	in.killed = true
	close(in.cctx.done)
	b := in.budget
	in.mu.Unlock()
	if b != nil {
		b.Stop(in.deadlineCause(by, b))
	}
}

// deadlineCause is why a call's deadline stops its cycle's budget: the
// call's timeout or the spent budget, unless the machine starved it.
func (in *instance) deadlineCause(by expiry, b *Budget) *CallError {
	switch {
	case in.starved(by, b):
		return in.starvedError()
	case by == expiredByBudget:
		return b.spentError()
	}
	return &CallError{Outcome: OutcomeTimeout, Err: context.DeadlineExceeded}
}

// starvedChecks: a call that reached its deadline after fewer deadline
// checks than this (its cycle's calls together, for the cycle budget) ran
// at most a few tens of thousands of loop iterations and function entries,
// well under a millisecond of CPU, against a timeout of 10 ms or more.
// Its time went to waiting for the machine (other processes, the
// scheduler's own goroutines), not to the policy: a looping guest reaches
// hundreds of checks in 10 ms even when it gets a third of a core.
const starvedChecks = 5

// starved reports whether the call that expired by by did next to no work
// (starvedChecks). Only instrumented modules count their work; a guest
// that slept chose to spend its time.
func (in *instance) starved(by expiry, b *Budget) bool {
	if in.v.p.e.interruption != InterruptFuel || in.slept || by == expiredByStop {
		return false
	}
	work := int64(in.checks)
	if by == expiredByBudget && b != nil {
		if b.slept.Load() {
			return false
		}
		work += b.work.Load()
	}
	return work < starvedChecks
}

// ErrStarved is in the error of a call that reached its deadline having
// had almost no CPU: the machine was overloaded, the policy did nothing
// wrong. Like ErrNotStarted, callers must not hold it against the policy.
var ErrStarved = errors.New("the call reached its deadline with almost no CPU time: the machine was overloaded")

func (in *instance) starvedError() *CallError {
	return &CallError{Outcome: OutcomeUnavailable, Err: fmt.Errorf("%w (%d deadline checks in %s)", ErrStarved, in.checks, time.Duration(monotonic()-in.started.Load()).Round(time.Millisecond))}
}

// interrupt stops the instance's call because its budget stopped. Called
// with the budget's lock held, only for a call the budget has in flight:
// the guest is trapped at its next deadline check, and a call that
// returns before reaching one still counts as stopped.
func (in *instance) interrupt() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.stopReq.Store(true)
	if in.armed.Swap(false) {
		in.expiredBy = expiredByStop
		if in.cctx.done != nil {
			in.killed = true // wazero closes the module
			close(in.cctx.done)
		}
	}
}

// monotonic is a cheap monotonic clock in nanoseconds.
func monotonic() int64 { return int64(time.Since(clockBase)) }

var clockBase = time.Now()
