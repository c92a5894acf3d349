package host

import (
	"bytes"
	"fmt"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// Defaults of PolicySpec.OutputBurst and OutputRate: at most 50 + 5×60 =
// 350 lines per policy per minute reach the scheduler's log.
const (
	DefaultOutputBurst = 50
	DefaultOutputRate  = 5 // lines per second
)

// outputLimiter bounds the log lines one policy produces, across all its
// instances and both ways out (stdout/stderr and the log host function): a
// token bucket of burst lines refilled at rate lines per second. Lines over
// the limit are dropped and counted; the next line that may pass is
// preceded by one line saying how many were suppressed. A debugging
// fmt.Println left in a policy, or a hostile module writing newlines, can
// then never flood the cluster's logs.
type outputLimiter struct {
	mu         sync.Mutex
	rate       float64
	burst      float64
	tokens     float64
	last       time.Time
	suppressed int64
	total      int64 // suppressed since the policy was created
}

func newOutputLimiter(burst int, rate float64) *outputLimiter {
	return &outputLimiter{rate: rate, burst: float64(burst), tokens: float64(burst)}
}

// allow takes n lines' tokens. It returns how many of the n lines may be
// logged (the first ones; the rest are dropped and counted) and, when lines
// pass after some were dropped, how many were.
func (l *outputLimiter) allow(now time.Time, n int) (granted int, suppressed int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() {
		l.tokens = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.rate)
	}
	l.last = now
	granted = min(n, int(l.tokens))
	l.tokens -= float64(granted)
	if granted > 0 {
		suppressed, l.suppressed = l.suppressed, 0
	}
	dropped := int64(n - granted)
	l.suppressed += dropped
	l.total += dropped
	return granted, suppressed
}

// suppressedTotal is how many lines the policy has had dropped.
func (l *outputLimiter) suppressedTotal() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// pass reports how many of n lines of the policy may be logged, logging
// the count of suppressed lines first when there is one.
func (p *Policy) pass(n int) int {
	granted, dropped := p.output.allow(time.Now(), n)
	if dropped > 0 {
		klog.InfoS("Policy output suppressed", "policy", p.name, "lines", dropped, "limit", fmt.Sprintf("burst %d, then %g/s", int(p.output.burst), p.output.rate))
	}
	return granted
}

// SuppressedLines is how many of the policy's output lines (stdout, stderr
// and log calls) were dropped by its output limit.
func (p *Policy) SuppressedLines() int64 { return p.output.suppressedTotal() }

// lineLogger turns a guest's stdout/stderr into klog lines naming the
// policy, within the policy's output limit.
type lineLogger struct {
	p      *Policy
	stream string
	buf    []byte
}

func (l *lineLogger) Write(b []byte) (int, error) {
	l.buf = append(l.buf, b...)
	// One limiter call per write: a write of many lines costs one scan of
	// its bytes, however many of its lines are dropped.
	lines := bytes.Count(l.buf, []byte{'\n'})
	long := lines == 0 && len(l.buf) > MaxLogSize
	if lines == 0 && !long {
		return len(b), nil
	}
	granted := l.p.pass(max(lines, 1))
	for ; granted > 0 && lines > 0; granted-- {
		i := bytes.IndexByte(l.buf, '\n')
		klog.InfoS("Policy output", "policy", l.p.name, "stream", l.stream, "line", safeString(l.buf[:i]))
		l.buf = l.buf[i+1:]
		lines--
	}
	if long && granted > 0 {
		klog.InfoS("Policy output", "policy", l.p.name, "stream", l.stream, "line", safeString(l.buf[:MaxLogSize]))
	}
	if long || lines > 0 {
		// Dropped lines (and an over-long partial line) are discarded up to
		// the last newline; a partial line after it is kept for the next write.
		if j := bytes.LastIndexByte(l.buf, '\n'); j >= 0 {
			l.buf = l.buf[j+1:]
		} else {
			l.buf = l.buf[:0]
		}
	}
	if len(l.buf) > MaxLogSize {
		l.buf = l.buf[:0]
	}
	return len(b), nil
}
