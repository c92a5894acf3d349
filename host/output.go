package host

import (
	"bytes"
	"fmt"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/wasmsched/wasmsched/host/internal/hostabi"
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
// policy, within the policy's output limit. A line is cut at MaxLogSize
// before it is copied: what follows, up to its newline, is dropped
// unread. A write is scanned in chunks of outputChunk bytes with a
// deadline check after each, so one fd_write of many large buffers ends at
// the call's deadline (one of 400 buffers of 63 MiB took 13 s, and one
// buffer made a 63 MiB line, before).
type lineLogger struct {
	p      *Policy
	in     *instance
	stream string
	buf    []byte
	// cut is set once the current line reached MaxLogSize: it was logged
	// (cut), and its rest is dropped up to the next newline.
	cut bool
	// quiet is set while the output limit drops lines: the rest of a
	// chunk is counted, not scanned line by line; prepaid is how many of
	// its lines the limit let through then.
	// counted is how many of the next lines that count covered.
	quiet            bool
	prepaid, counted int
}

// outputChunk is how much of a write is scanned between deadline checks.
const outputChunk = 1 << 20

func (l *lineLogger) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		chunk := b[:min(len(b), outputChunk)]
		b = b[len(chunk):]
		l.scan(chunk)
		if len(b) > 0 && l.in != nil && l.in.armed.Load() {
			l.in.checkDeadline()
		}
	}
	return n, nil
}

// scan takes the lines of one chunk.
func (l *lineLogger) scan(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		piece := b
		if i >= 0 {
			piece = b[:i]
		}
		if !l.cut {
			room := MaxLogSize - len(l.buf)
			l.buf = append(l.buf, piece[:min(len(piece), room)]...)
			if len(piece) > room {
				l.emit(true)
				l.cut = true
			}
		}
		if i < 0 {
			return
		}
		if !l.cut {
			l.emit(false)
		}
		l.buf, l.cut = l.buf[:0], false
		b = b[i+1:]
		if l.quiet && l.counted == 0 {
			// The limit is dropping lines: take the rest of this chunk's
			// lines in one call instead of one per line.
			if lines := bytes.Count(b, []byte{'\n'}); lines > 0 {
				if l.prepaid = l.p.pass(lines); l.prepaid == 0 {
					b = b[bytes.LastIndexByte(b, '\n')+1:]
				} else {
					l.counted = lines
				}
			}
		}
	}
}

// emit logs the buffered line, if the output limit lets it through.
func (l *lineLogger) emit(cut bool) {
	switch {
	case l.counted > 0:
		// Counted already: logged if the limit let it through then.
		l.counted--
		if l.prepaid == 0 {
			return
		}
		l.prepaid--
	case l.p.pass(1) == 0:
		l.quiet = true
		return
	}
	l.quiet = false
	// MaxLogSize bounds the line as written to the log, after klog's
	// escaping, not only as the guest wrote it.
	line, _, escapedCut := hostabi.LogSafe(l.buf, MaxLogSize)
	if cut || escapedCut {
		klog.InfoS("Policy output", "policy", l.p.name, "stream", l.stream, "line", line, "truncatedAt", MaxLogSize)
		return
	}
	klog.InfoS("Policy output", "policy", l.p.name, "stream", l.stream, "line", line)
}
