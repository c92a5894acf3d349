package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/wasmgen"
)

// A module that would take hundreds of MiB to compile (1.5 million tiny
// functions: 6 MB, a few KB gzipped, so it fits a ConfigMap) is refused
// before compiling, whether it is there when the scheduler starts or
// uploaded over a working policy. The scheduler keeps scheduling, the
// refusal names the limit and the arg that raises it, and the scheduler's
// peak RSS stays under 512 MiB.
func TestTooLargeModuleIsRefused(t *testing.T) {
	e := newEnv(t, "toolarge")
	e.node("team-a", map[string]string{"team": "a"}, "4")
	gz := gzipped(t, wasmgen.Module(wasmgen.Shape{Functions: 1_500_000}))
	e.policyConfigMap("team", module(t, "team-isolation"))
	e.policyConfigMap("bomb", gz)
	e.startScheduler(`      - name: team-isolation
        source: `+cmSource(e, "team")+`
        config: key=team
      - name: bomb
        source: `+cmSource(e, "bomb")+`
        failurePolicy: Ignore
`, "team-isolation")

	refused := func(cm, policy string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			notes := strings.Join(configMapEvents(e.name+"-"+cm, "Warning", "PolicyLoadFailed"), "|")
			if strings.Contains(notes, "WasmPolicy/"+policy+": TooLarge") && strings.Contains(notes, "compileLimits.maxFunctions") {
				return
			}
			if time.Now().After(deadline) {
				var lines []string
				for _, l := range strings.Split(readLog(e), "\n") {
					if strings.Contains(l, `policy="`+policy+`"`) {
						lines = append(lines, l)
					}
				}
				t.Fatalf("no PolicyLoadFailed Warning on %s naming TooLarge and compileLimits.maxFunctions (got %q); the policy's log lines:\n%s", cm, notes, strings.Join(lines, "\n"))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// At start: only the bomb policy failed, and the log says why (the
	// first load runs while the plugin is built, before the scheduler's
	// event broadcaster starts, so there is no Event for it); the
	// scheduler schedules.
	e.waitLog(`reason="TooLarge"`, 1, 30*time.Second)
	if log := readLog(e); !strings.Contains(log, `policy="bomb"`) || !strings.Contains(log, "raise compileLimits.maxFunctions") {
		t.Fatal("the refusal at start does not name the policy and the limit's arg")
	}
	e.pod("a-1", map[string]string{"team": "a"}, "250m")
	if got := e.placed("a-1"); got != "team-a" {
		t.Fatalf("a-1 landed on %q", got)
	}
	// Uploaded over a working policy: refused, the last good version serves.
	e.policyConfigMap("team", gz)
	refused("team", "team-isolation")
	e.pod("a-2", map[string]string{"team": "a"}, "250m")
	if got := e.placed("a-2"); got != "team-a" {
		t.Fatalf("a-2 landed on %q", got)
	}
	e.pod("b-1", map[string]string{"team": "b"}, "250m")
	if msg := e.rejected("b-1"); !strings.Contains(msg, "rejected by WasmPolicy/team-isolation") {
		t.Fatalf("b-1: %q: team-isolation's last good version should still reject it", msg)
	}
	if hwm := peakRSS(t, e.sched.Process.Pid); hwm >= 512<<20 {
		t.Fatalf("scheduler peak RSS %d MiB, want under 512 MiB", hwm>>20)
	} else {
		t.Logf("scheduler peak RSS %d MiB", hwm>>20)
	}
}

// peakRSS is a process's peak resident set size (VmHWM) in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmHWM:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}
