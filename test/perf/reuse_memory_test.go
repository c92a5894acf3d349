package perf

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/legacyregistry"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/parallelize"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/wasmsched/wasmsched/internal/framework"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

// reuseMemoryChild names the verdictReuse a child process of
// TestVerdictReuseMemoryIsBudgeted runs with.
const reuseMemoryChild = "WASMSCHED_REUSE_MEMORY_CHILD"

// reuseMemoryResult is what a child reports.
type reuseMemoryResult struct {
	Reuse                     string
	PeakRSS, PeakCharged      int64
	Budget, Verdicts, MaxMemo int64
	Remembered                int64
	// LiveHeap is the Go heap in use after a collection at the end, and
	// EndVerdicts what the remembered verdicts were charged then.
	LiveHeap, EndVerdicts int64
}

// TestVerdictReuseMemoryIsBudgeted is the worst case for remembered
// verdicts: 200 policies and pods that are all different, so that every
// cycle adds templates and rows and no verdict is ever reused. It runs the
// same workload twice, each in a process of its own (peak RSS is per
// process), with verdictReuse Enabled and Disabled, and holds the first to
// the memory budget plus what the second needs beside its budget: the
// remembered verdicts and the templates behind them are charged within
// the budget, so reuse that never hits costs no memory past it.
// REUSE_MEMORY_PODS sets the pods (default 400; make soak: 1500).
func TestVerdictReuseMemoryIsBudgeted(t *testing.T) {
	if mode := os.Getenv(reuseMemoryChild); mode != "" {
		reuseMemoryWorkload(t, mode)
		return
	}
	results := map[string]reuseMemoryResult{}
	for _, mode := range []string{"Disabled", "Enabled"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestVerdictReuseMemoryIsBudgeted$", "-test.v")
		cmd.Env = append(os.Environ(), reuseMemoryChild+"="+mode)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("verdictReuse %s: %v\n%s", mode, err, tail(out))
		}
		var r reuseMemoryResult
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if l, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "REUSE-MEMORY "); ok {
				if err := json.Unmarshal([]byte(l), &r); err != nil {
					t.Fatal(err)
				}
			}
		}
		if r.Reuse != mode {
			t.Fatalf("verdictReuse %s: no result\n%s", mode, tail(out))
		}
		results[mode] = r
		t.Logf("verdictReuse %s: peak RSS %d MiB, peak charged %d MiB of a %d MiB budget, remembered verdicts %.1f MiB (cap %d MiB), %d verdicts reused; at the end %.1f MiB live heap, %.1f MiB remembered",
			mode, r.PeakRSS>>20, r.PeakCharged>>20, r.Budget>>20, float64(r.Verdicts)/(1<<20), r.MaxMemo>>20, r.Remembered, float64(r.LiveHeap)/(1<<20), float64(r.EndVerdicts)/(1<<20))
	}
	off, on := results["Disabled"], results["Enabled"]
	// What the scheduler holds beside its budget, measured with reuse off.
	overhead := off.PeakRSS - off.PeakCharged
	if on.PeakCharged > on.Budget {
		t.Errorf("with reuse, %d bytes were charged against a budget of %d", on.PeakCharged, on.Budget)
	}
	if on.PeakRSS > on.Budget+overhead {
		t.Errorf("with reuse the peak RSS was %d MiB, past the budget (%d MiB) and the %d MiB the scheduler holds beside it without reuse", on.PeakRSS>>20, on.Budget>>20, overhead>>20)
	}
	// The charge is what remembering holds: the live heap with reuse
	// is at most the verdicts charged (and 4 MiB) above the one without.
	if extra := on.LiveHeap - off.LiveHeap; extra > on.EndVerdicts+4<<20 {
		t.Errorf("with reuse the live heap was %.1f MiB larger, and the remembered verdicts were charged %.1f MiB: the charge undercounts them", float64(extra)/(1<<20), float64(on.EndVerdicts)/(1<<20))
	}
	t.Logf("peak RSS with reuse %d MiB, without %d MiB (%+.1f%%); bound: budget %d MiB + %d MiB beside it without reuse",
		on.PeakRSS>>20, off.PeakRSS>>20, 100*float64(on.PeakRSS-off.PeakRSS)/float64(off.PeakRSS), on.Budget>>20, overhead>>20)
}

func tail(b []byte) string {
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// reuseMemoryWorkload is one child's run.
func reuseMemoryWorkload(t *testing.T, reuse string) {
	pods := 400
	if s := os.Getenv("REUSE_MEMORY_PODS"); s != "" {
		pods, _ = strconv.Atoi(s)
	}
	const budget = 128 << 20
	infos := make([]fwk.NodeInfo, 100)
	for i := range infos {
		infos[i] = realisticNode(i)
	}
	args := manyArgs(t, testguests.TinyGo, 200, cacheDir)
	sharedEngine(t)
	args.CompilationCacheDir = cacheDir
	args.MemoryBudget, args.MaxInstancesPerPolicy = budget, 16
	for i := range args.Policies {
		args.Policies[i].VerdictReuse = config.VerdictReuse(reuse)
	}
	var w *wasmpolicy.WasmPolicy
	registry := frameworkruntime.Registry{queuesort.Name: queuesort.New, defaultbinder.Name: defaultbinder.New,
		wasmpolicy.Name: func(ctx context.Context, obj kruntime.Object, h framework.Handle) (framework.Plugin, error) {
			p, err := wasmpolicy.New(ctx, obj, h)
			if err == nil {
				w = p.(*wasmpolicy.WasmPolicy)
			}
			return p, err
		}}
	en := schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: wasmpolicy.Name}}}
	plugins := &schedconfig.Plugins{
		QueueSort: schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: queuesort.Name}}},
		Bind:      schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: defaultbinder.Name}}},
		PreFilter: en, Filter: en, PreScore: en,
		Score: schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: wasmpolicy.Name, Weight: 1}}},
	}
	fw, list := frameworkFor(t, registry, plugins, []schedconfig.PluginConfig{{Name: wasmpolicy.Name, Args: args}}, infos)
	if missing := w.Unloaded(); len(missing) > 0 {
		t.Fatalf("%d policies did not load", len(missing))
	}
	ctx := context.Background()
	par := parallelize.NewParallelizer(16)
	feasible := make([]fwk.NodeInfo, len(list))
	var peakCharged, maxMemo int64
	for i := 0; i < pods; i++ {
		// Every pod differs in what the policies read: its team label
		// (team-isolation) and its requests (bin-packing).
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("p", i), Namespace: benchPodNamespace, UID: types.UID(fmt.Sprint("u", i)),
				Labels: map[string]string{"team": fmt.Sprint("team-", i), "app": fmt.Sprint("app-", i)}},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
				v1.ResourceCPU: *resource.NewMilliQuantity(int64(100+i), resource.DecimalSI), v1.ResourceMemory: *resource.NewQuantity(int64(1+i)<<20, resource.BinarySI)}}}}},
		}
		state := intree.NewCycleState()
		if _, st, _ := fw.RunPreFilterPlugins(ctx, state, pod); !st.IsSuccess() && !st.IsSkip() {
			t.Fatal(st)
		}
		filterAll(ctx, fw, par, state, pod, list, feasible)
		// No node fits a team no node has; every node is scored all the
		// same, so that the score policies meet every pod too.
		if st := fw.RunPreScorePlugins(ctx, state, pod, list); !st.IsSuccess() && !st.IsSkip() {
			t.Fatal(st)
		}
		if _, st := fw.RunScorePlugins(ctx, state, pod, list); !st.IsSuccess() {
			t.Fatal(st)
		}
		u := w.MemoryUse()
		peakCharged, maxMemo = max(peakCharged, u.Used()), max(maxMemo, u.Verdicts)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	runtime.KeepAlive(fw)
	u := w.MemoryUse()
	var remembered int64
	if mfs, err := legacyregistry.DefaultGatherer.Gather(); err == nil {
		for _, mf := range mfs {
			if mf.GetName() != "wasmsched_policy_rows_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "result" && l.GetValue() == "remembered" {
						remembered += int64(m.GetCounter().GetValue())
					}
				}
			}
		}
	}
	r := reuseMemoryResult{Reuse: reuse, PeakRSS: peakRSS(), PeakCharged: peakCharged, Budget: u.Budget, Verdicts: maxMemo, MaxMemo: budget / 8, Remembered: remembered,
		LiveHeap: int64(ms.HeapAlloc), EndVerdicts: u.Verdicts}
	b, _ := json.Marshal(r)
	fmt.Printf("REUSE-MEMORY %s\n", b)
}

// peakRSS is the process's peak resident set (VmHWM).
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
