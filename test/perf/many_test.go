package perf

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	kruntime "k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/wasmsched/wasmsched/internal/framework"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/native"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

// manyCounts are the policy counts of the many-policies table.
var manyCounts = []int{1, 10, 50, 200}

// manyArgs returns default WasmPolicy args (the default memory budget) with
// n policies: copies of team-isolation (Filter) and bin-packing (Score),
// alternating, each with a distinct config.
func manyArgs(b testing.TB, tc testguests.Toolchain, n int, cacheDir string) *config.WasmPolicyArgs {
	var ps []config.Policy
	for i := 0; i < n; i++ {
		name, cfg := "team-isolation", "key=team"
		if i%2 == 1 {
			name, cfg = "bin-packing", "cpu=1,memory=1"
		}
		pc := configv1.DefaultPolicy(fmt.Sprintf("%s-%d", name, i), config.Source{File: testguests.Policy(b, tc, name)})
		pc.Config, pc.Timeout = fmt.Sprintf("%s,copy=%d", cfg, i), time.Second
		pc.CycleBudget = 2 * pc.Timeout
		ps = append(ps, pc)
	}
	args := configv1.DefaultArgs(ps...)
	args.CompilationCacheDir, args.FilePollInterval = cacheDir, time.Hour
	return args
}

// BenchmarkManyPolicies is the many-policies table of docs/performance.md:
// n policies on one plugin, for n = 1, 10, 50 and 200, under the default
// memory budget, next to n native plugins.
//   - load-cold, load-warm: starting the plugin until every policy serves,
//     with an empty compilation cache and with one filled by a previous
//     start. MiB-charged is what the memory budget charges after the load
//     (compiled modules and the instances made), MiB-rss the growth of the
//     process's resident set.
//   - cycle: one scheduling cycle over 1000 nodes per op, as
//     BenchmarkCycle runs it, with n policies (n/2 filter, n/2 score).
func BenchmarkManyPolicies(b *testing.B) {
	const nodes = 1000
	infos := make([]fwk.NodeInfo, nodes)
	for i := range infos {
		infos[i] = realisticNode(i)
	}
	for _, n := range sizes(manyCounts...) {
		for _, variant := range []string{"native", "wasm-tinygo", "wasm-go"} {
			tc := testguests.Toolchain(strings.TrimPrefix(variant, "wasm-"))
			if variant != "native" {
				warmDir := b.TempDir()
				for _, phase := range []string{"load-cold", "load-warm"} {
					b.Run(fmt.Sprintf("policies=%d/%s/%s", n, variant, phase), func(b *testing.B) {
						if phase == "load-warm" {
							loadMany(b, manyArgs(b, tc, n, warmDir)) // fill the cache
						}
						var total time.Duration
						var charged, rss float64
						for i := 0; i < b.N; i++ {
							dir := warmDir
							if phase == "load-cold" {
								dir = b.TempDir()
							}
							d, c, r := loadMany(b, manyArgs(b, tc, n, dir))
							total += d
							charged, rss = charged+c, rss+r
						}
						b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/load")
						b.ReportMetric(charged/float64(b.N), "MiB-charged")
						b.ReportMetric(rss/float64(b.N), "MiB-rss")
					})
				}
			}
			b.Run(fmt.Sprintf("policies=%d/%s/cycle", n, variant), func(b *testing.B) {
				var fw intree.Framework
				var list []fwk.NodeInfo
				if variant == "native" {
					fw, list = nativeFramework(b, n, infos)
				} else {
					fw, list = cycleFrameworkWith(b, variant, infos, func(a *config.WasmPolicyArgs) {
						m := manyArgs(b, tc, n, cacheDir)
						a.Policies, a.MemoryBudget = m.Policies, m.MemoryBudget
					})
				}
				// The first cycles of a pod template evaluate every
				// policy (and, with more policies than the budget holds
				// instances of, make instances); later pods of it take
				// remembered verdicts (docs/abi.md §3.4). Both are
				// reported: ms/first-cycles is the first three, untimed.
				start := time.Now()
				cycles(b, fw, list, "many-warm-", 3)
				first := time.Since(start)
				runCycles(b, fw, list, "many-")
				b.ReportMetric(float64(first.Microseconds())/1000, "ms/first-cycles")
			})
		}
	}
}

// loadMany starts a plugin with args, waits until every policy serves, and
// returns how long that took, what the memory budget charges (MiB), and how
// much the process's resident set grew (MiB).
func loadMany(b *testing.B, args *config.WasmPolicyArgs) (time.Duration, float64, float64) {
	b.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	base := rssBytes()
	start := time.Now()
	w, err := wasmpolicy.NewWithArgs(context.Background(), args, nil, wasmpolicy.WithInitialLoadTimeout(10*time.Minute))
	if err != nil {
		b.Fatal(err)
	}
	d := time.Since(start)
	defer w.Close()
	if missing := w.Unloaded(); len(missing) > 0 {
		b.Fatalf("%d policies did not load: %s", len(missing), strings.Join(missing, "; "))
	}
	return d, float64(w.MemoryUse().Used()) / (1 << 20), float64(rssBytes()-base) / (1 << 20)
}

// namedFilter and namedScore are the native plugins under a name of their
// own, so that a profile can run n copies.
type namedFilter struct {
	native.TeamIsolation
	name string
}

func (p namedFilter) Name() string { return p.name }

type namedScore struct {
	native.BinPacking
	name string
}

func (p namedScore) Name() string { return p.name }

// nativeFramework builds a framework with n native plugins: copies of the
// team-isolation Filter and the bin-packing Score, alternating.
func nativeFramework(b *testing.B, n int, infos []fwk.NodeInfo) (intree.Framework, []fwk.NodeInfo) {
	registry := frameworkruntime.Registry{queuesort.Name: queuesort.New, defaultbinder.Name: defaultbinder.New}
	plugins := &schedconfig.Plugins{
		QueueSort: schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: queuesort.Name}}},
		Bind:      schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: defaultbinder.Name}}},
	}
	for i := 0; i < n; i++ {
		if i%2 == 0 {
			name := fmt.Sprintf("team-isolation-%d", i)
			registry[name] = func(context.Context, kruntime.Object, framework.Handle) (framework.Plugin, error) {
				return namedFilter{name: name}, nil
			}
			plugins.Filter.Enabled = append(plugins.Filter.Enabled, schedconfig.Plugin{Name: name})
		} else {
			name := fmt.Sprintf("bin-packing-%d", i)
			registry[name] = func(context.Context, kruntime.Object, framework.Handle) (framework.Plugin, error) {
				return namedScore{name: name}, nil
			}
			plugins.Score.Enabled = append(plugins.Score.Enabled, schedconfig.Plugin{Name: name, Weight: 1})
		}
	}
	return frameworkFor(b, registry, plugins, nil, infos)
}

// BenchmarkStartDistinctModules is the worst case of a scheduler start:
// every policy's module has bytes of its own (the same code under a
// distinct custom section), so nothing is shared and every module compiles,
// from an empty compilation cache: 200 TinyGo policies and 40 Go policies.
func BenchmarkStartDistinctModules(b *testing.B) {
	for _, c := range []struct {
		tc testguests.Toolchain
		n  int
	}{{testguests.TinyGo, 200}, {testguests.Go, 40}} {
		if testing.Short() {
			c.n /= 20 // bench-smoke: the same path, 10 and 2 modules
		}
		b.Run(fmt.Sprintf("%s/policies=%d", c.tc, c.n), func(b *testing.B) {
			dir := b.TempDir()
			mod := testguests.PolicyBytes(b, c.tc, "team-isolation")
			var ps []config.Policy
			for i := 0; i < c.n; i++ {
				path := filepath.Join(dir, fmt.Sprintf("p%03d.wasm", i))
				if err := os.WriteFile(path, withCustomSection(mod, fmt.Sprintf("copy-%d", i)), 0o644); err != nil {
					b.Fatal(err)
				}
				pc := configv1.DefaultPolicy(fmt.Sprintf("p%03d", i), config.Source{File: path})
				pc.Config, pc.Timeout, pc.CycleBudget = "key=team", time.Second, 2*time.Second
				ps = append(ps, pc)
			}
			var total time.Duration
			var charged, rss float64
			for i := 0; i < b.N; i++ {
				args := configv1.DefaultArgs(ps...)
				args.CompilationCacheDir, args.FilePollInterval = b.TempDir(), time.Hour
				d, ch, r := loadMany(b, args)
				total, charged, rss = total+d, charged+ch, rss+r
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/load")
			b.ReportMetric(charged/float64(b.N), "MiB-charged")
			b.ReportMetric(rss/float64(b.N), "MiB-rss")
		})
	}
}

// withCustomSection appends a custom section to a module: the same code
// under other bytes.
func withCustomSection(m []byte, name string) []byte {
	leb := func(n int) []byte {
		var out []byte
		for {
			c := byte(n & 0x7f)
			if n >>= 7; n != 0 {
				out = append(out, c|0x80)
				continue
			}
			return append(out, c)
		}
	}
	body := append(append(leb(len(name)), name...), "wasmsched-perf"...)
	out := append(append([]byte(nil), m...), 0)
	out = append(out, leb(len(body))...)
	return append(out, body...)
}
