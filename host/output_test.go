package host

import (
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/wasmsched/wasmsched/internal/testguests"
)

// A module that writes 64 Ki lines per call gets at most its burst, then
// its rate, into the log, and one line says how many were dropped.
func TestOutputIsRateLimited(t *testing.T) {
	logs := testguests.CaptureKlog(t)
	p := newPolicy(t, newEngine(t), PolicySpec{OutputBurst: 20, OutputRate: 10})
	v := load(t, p, testguests.Fixture(t, "logflood"))
	start := time.Now()
	const calls = 50
	for i := 0; i < calls; i++ {
		if r, err := filter(v, nodeInfo("n", nil, false)); err != nil || r.Code != 0 {
			t.Fatalf("call %d: %+v, %v", i, r, err)
		}
	}
	time.Sleep(200 * time.Millisecond) // two tokens come back
	if _, err := filter(v, nodeInfo("n", nil, false)); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	klog.Flush()
	out := logs.String()
	lines := strings.Count(out, `"Policy output"`)
	if max := 20 + int(elapsed.Seconds()*10) + 1; lines > max || lines < 20 {
		t.Fatalf("%d output lines in %s, want between the burst (20) and %d", lines, elapsed, max)
	}
	if !strings.Contains(out, `"Policy output suppressed"`) {
		t.Fatalf("no line reports the suppressed output:\n%s", out[:min(len(out), 2000)])
	}
	written := int64(calls+1) * 65536
	if got := p.SuppressedLines(); got != written-int64(lines) {
		t.Fatalf("SuppressedLines = %d, want %d written - %d logged", got, written, lines)
	}
}

func TestOutputLimiter(t *testing.T) {
	l := newOutputLimiter(3, 2)
	now := time.Unix(0, 0)
	if g, s := l.allow(now, 5); g != 3 || s != 0 {
		t.Fatalf("burst: granted %d, suppressed %d", g, s)
	}
	if g, _ := l.allow(now.Add(100*time.Millisecond), 1); g != 0 {
		t.Fatalf("0.2 tokens granted a line")
	}
	if g, s := l.allow(now.Add(time.Second), 4); g != 2 || s != 3 {
		t.Fatalf("after 1s at 2/s: granted %d, suppressed before %d; want 2 and 3", g, s)
	}
	if l.suppressedTotal() != 5 {
		t.Fatalf("total suppressed %d, want 5", l.suppressedTotal())
	}
}

// The 16 KiB line limit holds for what reaches the log, after klog's
// escaping: a line of NUL bytes (\x00 each) or of quotes (\" each) as long
// as the limit is written within it, cut and marked truncated.
func TestOutputLineLimitHoldsAfterEscaping(t *testing.T) {
	logs := testguests.CaptureKlog(t)
	v := load(t, newPolicy(t, newEngine(t), PolicySpec{}), testguests.Fixture(t, "escapes"))
	if r, err := filter(v, nodeInfo("n", nil, false)); err != nil || r.Code != 0 {
		t.Fatalf("filter: %+v, %v", r, err)
	}
	klog.Flush()
	var lines []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `"Policy output"`) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("%d output lines, want 2", len(lines))
	}
	for _, l := range lines {
		// The line's value within MaxLogSize; the rest is klog's header
		// and the other keys.
		if len(l) > MaxLogSize+256 {
			t.Errorf("a logged line is %d bytes, over the %d-byte limit: %.200s…", len(l), MaxLogSize, l)
		}
		if !strings.Contains(l, "truncatedAt=16384") {
			t.Errorf("a line cut by escaping is not marked truncated: %.200s…", l)
		}
	}
}
