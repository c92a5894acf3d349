package wasmpolicy

import (
	"fmt"
	"sort"
	"strings"
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

// breaker stops calling a policy that fails on most pods. A cycle budget
// bounds what one scheduling cycle pays for a broken policy, and the
// quarantine (quarantine.go) stops calling it for the pods it failed on;
// the breaker bounds what the cluster pays when the policy is broken for
// everyone: when, within breakerWindow, the failed cycles span at least
// threshold distinct pod inputs and more than twice the pods the policy
// answered meanwhile, out of at least breakerMinPods pods seen, the
// policy is not called for a backoff that doubles from backoff to
// maxBackoff, and then one probe cycle, of a pod not in quarantine,
// decides whether it closes. A module reload closes it. A few pods that
// loop the policy, among many it answers, never open it, nor do a few
// arriving before any it answers (the quarantine holds them).
//
// An open breaker holds back the pods of the namespaces whose pods failed
// in the window, not everyone's: a burst of one team's failing pods can
// stop the policy for that team's pods only. Another namespace's pod is
// still called; if it fails too, its namespace joins them.
type breaker struct {
	cfg breakerConfig
	now func() time.Time
	// changed reports each transition (logs, events, the metric, and waking
	// the pods the open breaker rejected when a probe is due); it runs
	// without the breaker's lock held.
	changed func(from, to breakerState, why string, pod *v1.Pod)

	// clean is true while closed: the fast path of admit and of success,
	// which every cycle and successful call takes.
	clean atomic.Bool
	// The pods answered: lastOK is the pod of the last successful call
	// (a cycle's calls share one), okNow and okPrev count the distinct
	// pods answered in the current and the previous window (okEpoch).
	lastOK        atomic.Pointer[v1.Pod]
	okNow, okPrev atomic.Int64
	okEpoch       atomic.Int64

	mu      sync.Mutex
	state   breakerState
	failing map[[32]byte]failure // inputs that failed, within the window
	// scope is the namespaces an open or half-open breaker holds back:
	// those of the inputs that failed in the window.
	scope    map[string]bool
	failures int           // failed cycles since the breaker was last clean
	period   time.Duration // the current (or last) open period
	until    time.Time     // when an open breaker becomes half-open
	probeAt  time.Time     // when the half-open breaker let a cycle probe
	lastErr  string        // what the last failure was
	timer    *time.Timer
}

// breakerWindow is how far back failures and answered pods count.
const breakerWindow = time.Minute

// breakerMinPods is how many distinct pods (failed and answered) the
// breaker must have seen in the window before it judges the policy broken
// for everyone: a few looping pods created before any other reached the
// policy opened it with 3 failed and 0 answered, and it then held back
// every ordinary pod for a second.
const breakerMinPods = 12

// failure is an input that failed: when, and its pod's namespace.
type failure struct {
	at time.Time
	ns string
}

func newBreaker(cfg breakerConfig, changed func(from, to breakerState, why string, pod *v1.Pod)) *breaker {
	b := &breaker{cfg: cfg, now: time.Now, changed: changed, failing: map[[32]byte]failure{}, scope: map[string]bool{}}
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
	if pod != nil && !b.scope[pod.Namespace] {
		// Not a namespace whose pods failed: called as usual.
		b.mu.Unlock()
		return ""
	}
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
			why := fmt.Sprintf("circuit breaker half-open: another scheduling cycle is probing the policy after %d failed cycles (last: %s)", b.failures, b.lastErr)
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
	return fmt.Sprintf("circuit breaker open after %d failed cycles of %d distinct pods (last: %s); not called for %s more", b.failures, len(b.failing), b.lastErr, b.until.Sub(now).Round(time.Second))
}

// succeeded records a call of pod's cycle that completed.
func (b *breaker) succeeded(pod *v1.Pod) {
	// A load first: the calls of one cycle, in parallel, share the pod,
	// and a swap by each would contend on the line for nothing.
	if b.lastOK.Load() != pod && b.lastOK.Swap(pod) != pod {
		b.answered()
	}
	if b.clean.Load() {
		return
	}
	b.mu.Lock()
	from := b.state
	if from == breakerClosed || !b.scope[pod.Namespace] {
		// Closed, or a pod of a namespace it does not hold back: not
		// the probe.
		b.mu.Unlock()
		return
	}
	b.state, b.period, b.failures = breakerClosed, 0, 0
	clear(b.failing)
	clear(b.scope)
	b.stopTimer()
	b.clean.Store(true)
	b.mu.Unlock()
	b.changed(from, breakerClosed, "a probe call succeeded", pod)
}

// answered counts a pod the policy answered in the current window.
func (b *breaker) answered() {
	epoch := b.now().UnixNano() / int64(breakerWindow)
	if cur := b.okEpoch.Load(); cur != epoch && b.okEpoch.CompareAndSwap(cur, epoch) {
		if epoch == cur+1 {
			b.okPrev.Store(b.okNow.Swap(0))
		} else {
			b.okPrev.Store(0)
			b.okNow.Store(0)
		}
	}
	b.okNow.Add(1)
}

// answeredInWindow is how many distinct pods the policy answered lately.
func (b *breaker) answeredInWindow() int64 {
	epoch := b.now().UnixNano() / int64(breakerWindow)
	switch b.okEpoch.Load() {
	case epoch:
		return b.okNow.Load() + b.okPrev.Load()
	case epoch - 1:
		return b.okNow.Load()
	}
	return 0
}

// failed records a cycle of pod, whose input is input, in which a call of
// the policy failed with err, and returns the breaker's state after it,
// phrased for the pod's status.
func (b *breaker) failed(err string, pod *v1.Pod, input [32]byte) string {
	b.mu.Lock()
	now := b.now()
	b.failures++
	b.lastErr = err
	for in, f := range b.failing {
		if now.Sub(f.at) > breakerWindow {
			delete(b.failing, in)
		}
	}
	if len(b.failing) < maxQuarantined {
		b.failing[input] = failure{at: now, ns: pod.Namespace}
	}
	from := b.state
	if from != breakerClosed {
		b.scope[pod.Namespace] = true
	}
	answered := b.answeredInWindow()
	if from == breakerOpen || from == breakerClosed && !b.brokenLocked(answered) {
		// Open: a cycle admitted before it opened. Closed: the failures
		// are a few pods' (the quarantine holds them), not everyone's.
		note := b.note(answered)
		b.mu.Unlock()
		return note
	}
	// Closed with most pods failing, or a failed probe: open for the next
	// period, for the namespaces whose pods failed.
	for _, f := range b.failing {
		b.scope[f.ns] = true
	}
	b.period = min(max(2*b.period, b.cfg.backoff), b.cfg.maxBackoff)
	b.state = breakerOpen
	b.clean.Store(false)
	b.until = now.Add(b.period)
	b.stopTimer()
	b.timer = time.AfterFunc(b.period, b.probeDue)
	note := b.note(answered)
	why := fmt.Sprintf("%d distinct pods failed within %s while %d were answered, the last: %s; not called for %s for the pods of namespace %s", len(b.failing), breakerWindow, answered, err, b.period, b.scopeString())
	b.mu.Unlock()
	b.changed(from, breakerOpen, why, pod)
	return note
}

// brokenLocked reports whether the failures in the window say the policy
// is broken for everyone: at least threshold distinct inputs, and more
// than twice the pods answered meanwhile (two in three pods fail).
func (b *breaker) brokenLocked(answered int64) bool {
	return len(b.failing) >= b.cfg.threshold && int64(len(b.failing)) > 2*answered && int64(len(b.failing))+answered >= breakerMinPods
}

// scopeString lists the namespaces held back, sorted (under mu).
func (b *breaker) scopeString() string {
	names := make([]string, 0, len(b.scope))
	for ns := range b.scope {
		names = append(names, ns)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
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

// note phrases the state for a pod's status (under mu): nothing while
// it is closed, which a failure of a few pods leaves it.
func (b *breaker) note(answered int64) string {
	switch b.state {
	case breakerOpen:
		return fmt.Sprintf("circuit breaker opened: %d distinct pods failed within %s, more than twice the %d answered; policy not called for %s", len(b.failing), breakerWindow, answered, b.period)
	case breakerHalfOpen:
		return "circuit breaker half-open"
	}
	return ""
}

// reset closes the breaker: a new module version gets a fresh start.
func (b *breaker) reset(why string) {
	b.mu.Lock()
	from := b.state
	b.state, b.failures, b.period, b.lastErr = breakerClosed, 0, 0, ""
	clear(b.failing)
	clear(b.scope)
	// The pods answered were answered by the previous module.
	b.okNow.Store(0)
	b.okPrev.Store(0)
	b.lastOK.Store(nil)
	b.stopTimer()
	b.clean.Store(true)
	b.mu.Unlock()
	if from != breakerClosed {
		b.changed(from, breakerClosed, why, nil)
	}
}

// snapshot returns the state and the failed cycles since it was last closed, for explain.
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
