package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/guest-sdk/casetest"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

// The memory acceptance of many policies: one scheduler (bin/kube-scheduler)
// hosts 200 TinyGo and 40 Go policies, distinct configs of the examples,
// under the default memory budget, with 1000 nodes. Its peak resident set
// (VmHWM) after the cold load and after scheduling pods across the 1000
// nodes stays under 900 MiB, leaving room in the deployment's 1 GiB limit;
// every pod is bound. A restart over the same compilation cache measures
// the warm load. (test/policies TestManyPoliciesInOnePlugin checks every
// policy's verdicts against its example's case table.)
func TestManyPoliciesFitTheDeployment(t *testing.T) {
	const nodes, pods, limitMiB = 1000, 30, 900
	counts := map[testguests.Toolchain]int{testguests.TinyGo: 200, testguests.Go: 40}
	e := newEnv(t, "many")
	var cfg strings.Builder
	total := 0
	for _, tc := range testguests.Toolchains {
		for i := 0; i < counts[tc]; i++ {
			ex := testguests.Policies[i%len(testguests.Policies)]
			table, err := casetest.Load(filepath.Join(root, "plugins-wasm", ex, "testdata.json"))
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&cfg, "      - name: %s-%s-%d\n        source: {file: %s}\n        config: %q\n        timeout: 5s\n",
				strings.ToLower(string(tc)), ex, i, testguests.Policy(t, tc, ex), table.Config+",copy="+strconv.Itoa(i))
			if len(table.Reads) > 0 {
				fmt.Fprintf(&cfg, "        reads: [%s]\n", strings.Join(table.Reads, ", "))
			}
			if len(table.PatchPrefixes) > 0 {
				fmt.Fprintf(&cfg, "        patchPrefixes: [%s]\n", strings.Join(table.PatchPrefixes, ", "))
			}
			total++
		}
	}
	createNodes(t, e, nodes)

	start := func(what string) (loaded time.Duration, peak int64) {
		t.Helper()
		e.log = filepath.Join(e.dir, what+".log")
		began := time.Now()
		e.sched = e.run(e.writeConfig(cfg.String(), "leaderElection: {leaderElect: false}"), e.log)
		e.waitLogMatch(regexp.MustCompile(`"Loading policies" serving=`+strconv.Itoa(total)+` failed=0 loading=0`), 1, 5*time.Minute)
		return time.Since(began), peakRSS(t, e.sched.Process.Pid)
	}
	cold, coldPeak := start("cold")
	var names []string
	for i := 0; i < pods; i++ {
		names = append(names, fmt.Sprintf("p-%d", i))
		e.pod(names[i], nil, "100m")
	}
	waitBound(t, e, names, 5*time.Minute, "they were created")
	cyclesPeak := peakRSS(t, e.sched.Process.Pid)
	e.stopScheduler()
	warm, warmPeak := start("warm")
	t.Logf("%d policies (%d TinyGo, %d Go), %d nodes: cold load %s (peak RSS %d MiB), %d pods bound (peak RSS %d MiB); warm load %s (peak RSS %d MiB)",
		total, counts[testguests.TinyGo], counts[testguests.Go], nodes, cold.Round(time.Millisecond), coldPeak>>20, pods, cyclesPeak>>20, warm.Round(time.Millisecond), warmPeak>>20)
	for what, b := range map[string]int64{"the cold load": coldPeak, "scheduling": cyclesPeak, "the warm load": warmPeak} {
		if b>>20 >= limitMiB {
			t.Errorf("peak RSS during %s is %d MiB, want under %d MiB", what, b>>20, limitMiB)
		}
	}
}

// createNodes creates n nodes for the test, 8 requests at a time.
func createNodes(t *testing.T, e *env, n int) {
	t.Helper()
	var wg sync.WaitGroup
	work := make(chan int)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				e.node(fmt.Sprintf("n-%04d", i), nil, "16")
			}
		}()
	}
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}
