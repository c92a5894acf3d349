package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/testguests"
)

// withCustomSection appends a custom section to a module: the same code
// under other bytes, so that each copy is compiled on its own (as distinct
// policies are) instead of coming from the compilation cache.
func withCustomSection(m []byte, name string) []byte {
	leb := func(n int) []byte {
		var b []byte
		for {
			c := byte(n & 0x7f)
			n >>= 7
			if n != 0 {
				b = append(b, c|0x80)
				continue
			}
			return append(b, c)
		}
	}
	// A payload after the name: wazero v1.12 refuses an empty one.
	body := append(append(leb(len(name)), name...), "wasmsched-e2e"...)
	out := append([]byte(nil), m...)
	out = append(out, 0)
	out = append(out, leb(len(body))...)
	return append(out, body...)
}

// A scheduler that starts with 40 Go policies of distinct bytes
// (failurePolicy Fail; about 13 s to compile cold on 2 cores, more than the
// plugin waits before scheduling begins) rejects no pod because a policy is
// still loading: a pod scheduled meanwhile waits with a reason naming the
// loading policy, and every pod is bound once the policies are ready.
// (TestPodsWaitForALoadingPolicy drives the waiting path deterministically.)
func TestStartupWaitsForLoadingPolicies(t *testing.T) {
	const policies, pods = 40, 10
	e := newEnv(t, "startup")
	for i := 0; i < 3; i++ {
		e.node(fmt.Sprintf("n-%d", i), nil, "16")
	}
	mod := testguests.PolicyBytes(t, testguests.Go, "maintenance-avoidance")
	var cfg strings.Builder
	for i := 0; i < policies; i++ {
		path := filepath.Join(e.dir, fmt.Sprintf("p%02d.wasm", i))
		if err := os.WriteFile(path, withCustomSection(mod, fmt.Sprintf("copy-%d", i)), 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&cfg, "      - name: p%02d\n        source: {file: %s}\n        failurePolicy: Fail\n", i, path)
	}
	e.log = filepath.Join(e.dir, "kube-scheduler.log")
	start := time.Now()
	// 40 distinct Go modules charge about 500 MiB (12.5 MiB each), at the
	// edge of the default memoryBudget (512Mi) with the room two running
	// calls need: the budget is not what this test is about.
	path := e.writeConfig(cfg.String(), "leaderElection: {leaderElect: false}")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), "      policies:\n", "      memoryBudget: 1Gi\n      policies:\n", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	e.sched = e.run(path, e.log)
	var names []string
	for i := 0; i < pods; i++ {
		name := fmt.Sprintf("early-%d", i)
		names = append(names, name)
		e.pod(name, nil, "100m")
	}
	e.waitLog(`"Policy module active"`, policies, 3*time.Minute)
	loaded := time.Since(start)
	waitBound(t, e, names, 2*time.Minute, "the policies loaded")
	waited := 0
	for _, n := range names {
		switch note := e.failedScheduling(n); {
		case note == "":
		case strings.Contains(note, "policy is loading its module"):
			waited++
		default: // e.g. "policy has no module loaded": the failurePolicy applied
			t.Errorf("%s was rejected while the policies loaded: %s", n, note)
		}
	}
	stillLoading := e.logMatchCount(regexp.MustCompile(`"Policy is still loading; pods it evaluates wait until it has loaded"`))
	t.Logf("%d Go policies (distinct bytes) loaded cold in %s; the scheduler started with %d still loading; %d of %d pods waited with the loading reason, all bound", policies, loaded.Round(time.Millisecond), stillLoading, waited, pods)
	if twice := scheduledTwice(t, e); len(twice) > 0 {
		t.Errorf("pods bound twice: %v", twice)
	}
}
