package wasmpolicy

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
)

// breakerState is where a policy's circuit breaker is.
type breakerState int32

const (
	// breakerClosed: the policy is called.
	breakerClosed breakerState = iota
	// breakerOpen: the policy is not called; its failurePolicy applies at
	// once until the backoff ends.
	breakerOpen
	// breakerHalfOpen: the backoff ended; the next cycle probes the policy
	// and its first call decides.
	breakerHalfOpen
)

func (s breakerState) String() string {
	return [...]string{"closed", "open", "half-open"}[s]
}

// breakerConfig is the part of the plugin args that shapes every policy's
// breaker.
type breakerConfig struct {
	threshold  int           // consecutive failed cycles that open it
	backoff    time.Duration // first open period
	maxBackoff time.Duration // the period doubles up to this
}

// breaker stops calling a policy that keeps failing. A cycle budget bounds
// what one scheduling cycle pays for a broken policy; the breaker bounds
// what the cluster pays across cycles: after threshold consecutive cycles in
// which a call failed (timeout, trap, exit, spent budget), the policy is not
// called for a backoff that doubles from backoff to maxBackoff, and then one
// probe call decides whether it closes. A module reload closes it.
type breaker struct {
	cfg breakerConfig
	now func() time.Time
	// changed reports each transition (logs, events, the metric, and waking
	// the pods the open breaker rejected when a probe is due); it runs
	// without the breaker's lock held.
	changed func(from, to breakerState, why string, pod *v1.Pod)

	// clean is true while closed with no failure counted: the fast path
	// of success, which every successful call takes.
	clean atomic.Bool

	mu       sync.Mutex
	state    breakerState
	failures int           // consecutive failed cycles
	period   time.Duration // the current (or last) open period
	until    time.Time     // when an open breaker becomes half-open
	probeAt  time.Time     // when the half-open breaker let a cycle probe
	lastErr  string        // what the last failure was
	timer    *time.Timer
}

func newBreaker(cfg breakerConfig, changed func(from, to breakerState, why string, pod *v1.Pod)) *breaker {
	b := &breaker{cfg: cfg, now: time.Now, changed: changed}
	b.clean.Store(true)
	return b
}

// probeTimeout is how long a half-open breaker waits for the probing
// cycle's first call before it lets another cycle probe: a probing cycle
// may end before it calls the policy (another plugin rejected every node).
const probeTimeout = 10 * time.Second

// admit is asked once per scheduling cycle, of pod. It returns "" when the
// policy may be called in the cycle, and otherwise why not (for the pod's
// status).
func (b *breaker) admit(pod *v1.Pod) string {
	if b.clean.Load() {
		return ""
	}
	b.mu.Lock()
	now := b.now()
	var from breakerState
	switch b.state {
	case breakerClosed:
		b.mu.Unlock()
		return ""
	case breakerOpen:
		if now.Before(b.until) {
			why := b.openReason(now)
			b.mu.Unlock()
			return why
		}
		from = b.state
		b.state, b.probeAt = breakerHalfOpen, now
	case breakerHalfOpen:
		if now.Sub(b.probeAt) < probeTimeout {
			why := fmt.Sprintf("circuit breaker half-open: another scheduling cycle is probing the policy after %d consecutive failures (last: %s)", b.failures, b.lastErr)
			b.mu.Unlock()
			return why
		}
		b.probeAt = now
	}
	b.mu.Unlock()
	if from == breakerOpen {
		b.changed(breakerOpen, breakerHalfOpen, "backoff ended; this scheduling cycle probes the policy", pod)
	}
	return ""
}

func (b *breaker) openReason(now time.Time) string {
	return fmt.Sprintf("circuit breaker open after %d consecutive failures (last: %s); not called for %s more", b.failures, b.lastErr, b.until.Sub(now).Round(time.Second))
}

// succeeded records a call of pod's cycle that completed.
func (b *breaker) succeeded(pod *v1.Pod) {
	if b.clean.Load() {
		return
	}
	b.mu.Lock()
	from := b.state
	b.state, b.failures, b.period = breakerClosed, 0, 0
	b.stopTimer()
	b.clean.Store(true)
	b.mu.Unlock()
	if from != breakerClosed {
		b.changed(from, breakerClosed, "a probe call succeeded", pod)
	}
}

// failed records a cycle (of pod) in which a call of the policy failed with
// err, and returns the breaker's state after it, phrased for the pod's status.
func (b *breaker) failed(err string, pod *v1.Pod) string {
	b.mu.Lock()
	b.clean.Store(false)
	b.failures++
	b.lastErr = err
	from := b.state
	if from == breakerOpen || from == breakerClosed && b.failures < b.cfg.threshold {
		// Open: a cycle admitted before it opened. Closed: not yet.
		note := b.note()
		b.mu.Unlock()
		return note
	}
	// Closed at the threshold, or a failed probe: open for the next period.
	b.period = min(max(2*b.period, b.cfg.backoff), b.cfg.maxBackoff)
	b.state = breakerOpen
	b.until = b.now().Add(b.period)
	b.stopTimer()
	b.timer = time.AfterFunc(b.period, b.probeDue)
	note := b.note()
	why := fmt.Sprintf("%d consecutive failures, the last: %s; not called for %s", b.failures, err, b.period)
	b.mu.Unlock()
	b.changed(from, breakerOpen, why, pod)
	return note
}

// probeDue runs when an open period ends: the pods the open breaker
// rejected are woken so that one of them probes the policy.
func (b *breaker) probeDue() {
	b.mu.Lock()
	due := b.state == breakerOpen && !b.now().Before(b.until)
	if due {
		b.state, b.probeAt = breakerHalfOpen, time.Time{}
	}
	b.mu.Unlock()
	if due {
		b.changed(breakerOpen, breakerHalfOpen, "backoff ended; the next scheduling cycle probes the policy", nil)
	}
}

// note phrases the state for a pod's status (under mu).
func (b *breaker) note() string {
	switch b.state {
	case breakerOpen:
		return fmt.Sprintf("circuit breaker opened after %d consecutive failures, policy not called for %s", b.failures, b.period)
	case breakerHalfOpen:
		return "circuit breaker half-open"
	}
	return fmt.Sprintf("circuit breaker closed, %d of %d consecutive failures", b.failures, b.cfg.threshold)
}

// reset closes the breaker: a new module version gets a fresh start.
func (b *breaker) reset(why string) {
	b.mu.Lock()
	from := b.state
	b.state, b.failures, b.period, b.lastErr = breakerClosed, 0, 0, ""
	b.stopTimer()
	b.clean.Store(true)
	b.mu.Unlock()
	if from != breakerClosed {
		b.changed(from, breakerClosed, why, nil)
	}
}

// snapshot returns the state and the consecutive failures, for explain.
func (b *breaker) snapshot() (breakerState, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state, b.failures
}

// stop cancels a pending probe wake-up (the plugin is closing).
func (b *breaker) stop() {
	b.mu.Lock()
	b.stopTimer()
	b.mu.Unlock()
}

func (b *breaker) stopTimer() {
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
}
