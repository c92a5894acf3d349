package perf

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework/parallelize"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/native"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

// cycleFramework builds a scheduler framework whose Filter and Score plugins
// are either the native plugins or WasmPolicy with the same two policies.
func cycleFramework(b *testing.B, variant string, infos []fwk.NodeInfo) (intree.Framework, []fwk.NodeInfo) {
	b.Helper()
	return cycleFrameworkWith(b, variant, infos, nil)
}

// cycleFrameworkWith is cycleFramework with the WasmPolicy args changed by
// edit (wasm variants only).
func cycleFrameworkWith(b *testing.B, variant string, infos []fwk.NodeInfo, edit func(*config.WasmPolicyArgs)) (intree.Framework, []fwk.NodeInfo) {
	b.Helper()
	registry := frameworkruntime.Registry{queuesort.Name: queuesort.New, defaultbinder.Name: defaultbinder.New,
		native.TeamIsolationName: native.NewTeamIsolation, native.BinPackingName: native.NewBinPacking, wasmpolicy.Name: wasmpolicy.New}
	plugins := &schedconfig.Plugins{
		QueueSort: schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: queuesort.Name}}},
		Bind:      schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: defaultbinder.Name}}},
	}
	var pluginConfig []schedconfig.PluginConfig
	if variant == "native" {
		plugins.Filter.Enabled = []schedconfig.Plugin{{Name: native.TeamIsolationName}}
		plugins.Score.Enabled = []schedconfig.Plugin{{Name: native.BinPackingName, Weight: 1}}
	} else {
		tc := testguests.Toolchain(strings.TrimPrefix(variant, "wasm-"))
		en := schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: wasmpolicy.Name}}}
		plugins.PreFilter, plugins.Filter, plugins.PreScore = en, en, en
		plugins.Score.Enabled = []schedconfig.Plugin{{Name: wasmpolicy.Name, Weight: 1}}
		pol := func(name, cfg string) config.Policy {
			pc := configv1.DefaultPolicy(name, config.Source{File: testguests.Policy(b, tc, name)})
			pc.Config, pc.Timeout = cfg, time.Second
			return pc
		}
		sharedEngine(b)
		args := &config.WasmPolicyArgs{
			MaxInstancesPerPolicy: 16, FilePollInterval: time.Hour, CompilationCacheDir: cacheDir,
			Policies: []config.Policy{pol("team-isolation", "key=team"), pol("bin-packing", "cpu=1,memory=1")},
		}
		if edit != nil {
			edit(args)
		}
		pluginConfig = []schedconfig.PluginConfig{{Name: wasmpolicy.Name, Args: args}}
	}
	return frameworkFor(b, registry, plugins, pluginConfig, infos)
}

// frameworkFor builds a framework with the given plugins over a snapshot of
// infos, at parallelism 16, and returns it with the snapshot's NodeInfos.
func frameworkFor(b testing.TB, registry frameworkruntime.Registry, plugins *schedconfig.Plugins, pluginConfig []schedconfig.PluginConfig, infos []fwk.NodeInfo) (intree.Framework, []fwk.NodeInfo) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	var nodes []*v1.Node
	var pods []*v1.Pod
	for _, ni := range infos {
		nodes = append(nodes, ni.Node())
		for _, p := range ni.GetPods() {
			pods = append(pods, p.GetPod())
		}
	}
	snapshot := cache.NewSnapshot(pods, nodes)
	fw, err := frameworkruntime.NewFramework(ctx, registry, &schedconfig.KubeSchedulerProfile{SchedulerName: "perf", Plugins: plugins, PluginConfig: pluginConfig},
		frameworkruntime.WithClientSet(fake.NewClientset()),
		frameworkruntime.WithSnapshotSharedLister(snapshot),
		frameworkruntime.WithParallelism(16),
	)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = fw.Close() })
	// The scheduler filters the snapshot's NodeInfos, the list PreFilter gets.
	list, err := snapshot.NodeInfos().List()
	if err != nil {
		b.Fatal(err)
	}
	return fw, list
}

// runCycles runs b.N scheduling cycles of fresh pods over infos, as the
// scheduler does: PreFilter, Filter on every node through the parallelizer
// at parallelism 16, then PreScore and Score on the feasible nodes, which
// must be the third of the realistic nodes the pod's team may use.
func runCycles(b *testing.B, fw intree.Framework, infos []fwk.NodeInfo, uidPrefix string) {
	b.ResetTimer()
	cycles(b, fw, infos, uidPrefix, b.N)
}

// cycles runs n scheduling cycles, timed or not as b is.
func cycles(b *testing.B, fw intree.Framework, infos []fwk.NodeInfo, uidPrefix string, n int) {
	par := parallelize.NewParallelizer(16)
	ctx := context.Background()
	feasible := make([]fwk.NodeInfo, len(infos))
	var uid atomic.Int64
	for i := 0; i < n; i++ {
		pod := benchPod(fmt.Sprint(uidPrefix, uid.Add(1)))
		state := intree.NewCycleState()
		if _, st, _ := fw.RunPreFilterPlugins(ctx, state, pod); !st.IsSuccess() && !st.IsSkip() {
			b.Fatal(st)
		}
		ok := filterAll(ctx, fw, par, state, pod, infos, feasible)
		if want := (len(infos) + 2) / 3; len(ok) != want {
			b.Fatalf("%d feasible nodes, want %d", len(ok), want)
		}
		if st := fw.RunPreScorePlugins(ctx, state, pod, ok); !st.IsSuccess() && !st.IsSkip() {
			b.Fatal(st)
		}
		if _, st := fw.RunScorePlugins(ctx, state, pod, ok); !st.IsSuccess() {
			b.Fatal(st)
		}
	}
}

// filterAll runs Filter on every node through the framework's parallelizer,
// as the scheduler does, and returns the feasible nodes (in feasible's
// storage).
func filterAll(ctx context.Context, fw intree.Framework, par parallelize.Parallelizer, state fwk.CycleState, pod *v1.Pod, infos, feasible []fwk.NodeInfo) []fwk.NodeInfo {
	var found atomic.Int32
	par.Until(ctx, len(infos), func(k int) {
		if fw.RunFilterPlugins(ctx, state, pod, infos[k]).IsSuccess() {
			feasible[found.Add(1)-1] = infos[k]
		}
	}, "Filter")
	return feasible[:found.Load()]
}

// benchPodNamespace is the namespace of the benchmarks' pods.
const benchPodNamespace = "payments"

// BenchmarkCycle is one scheduling cycle per op, as the scheduler runs it:
// PreFilter, Filter on every node through the framework's parallelizer at
// parallelism 16, then PreScore and Score (also parallel) on the feasible
// third, with NormalizeScore. Native plugins vs WasmPolicy (TinyGo, Go).
func BenchmarkCycle(b *testing.B) {
	for _, n := range sizes(100, 1000, 5000) {
		infos := make([]fwk.NodeInfo, n)
		for i := range infos {
			infos[i] = realisticNode(i)
		}
		// wasm-tinygo-team runs the same policies as a team's: namespaced
		// (the pod's namespace), so each cycle charges the namespace's
		// share of scheduling time and reads inside it (docs/security.md,
		// teams); its cost over wasm-tinygo is the accounting's.
		for _, variant := range []string{"native", "wasm-tinygo", "wasm-tinygo-team", "wasm-go"} {
			b.Run(fmt.Sprintf("nodes=%d/%s", n, variant), func(b *testing.B) {
				var fw intree.Framework
				if team, ok := strings.CutSuffix(variant, "-team"); ok {
					fw, infos = cycleFrameworkWith(b, team, infos, func(a *config.WasmPolicyArgs) {
						for i := range a.Policies {
							a.Policies[i].Scope.Namespace = benchPodNamespace
						}
						// The share is not what is measured: a whole one.
						a.PolicyObjects.Tenants = configv1.DefaultTenants(a.MemoryBudget)
						a.PolicyObjects.Tenants.Default.SchedulingTimePercent = 100
					})
				} else {
					fw, infos = cycleFramework(b, variant, infos)
				}
				b.ReportAllocs()
				runCycles(b, fw, infos, "cycle-")
			})
		}
	}
}

// BenchmarkCycleBadPolicy is BenchmarkCycle (TinyGo guests) with a third,
// misbehaving policy: the adversary test policy, timeout 100ms and the
// default cycle budget (200ms), attacking every call. "loop" spins forever
// (each call would run to its timeout); "slow" spends about a millisecond
// or more per node and passes (no call times out, but 1000 nodes take
// seconds). With the breaker closed a cycle must cost at most the budget
// plus 10ms more than baseline; with it open, about baseline
// (docs/security.md, "What a bad policy costs").
func BenchmarkCycleBadPolicy(b *testing.B) {
	for _, n := range sizes(1000, 5000) {
		infos := make([]fwk.NodeInfo, n)
		for i := range infos {
			infos[i] = realisticNode(i)
		}
		for _, c := range []struct {
			name, attack string
			fp           config.FailurePolicy
			open         bool
		}{
			{"baseline", "", "", false},
			{"loop/Fail", "loop", config.FailurePolicyFail, false},
			{"loop/Ignore", "loop", config.FailurePolicyIgnore, false},
			{"slow/Fail", "slow", config.FailurePolicyFail, false},
			{"slow/Ignore", "slow", config.FailurePolicyIgnore, false},
			{"breaker-open/Fail", "loop", config.FailurePolicyFail, true},
			{"breaker-open/Ignore", "loop", config.FailurePolicyIgnore, true},
		} {
			b.Run(fmt.Sprintf("nodes=%d/%s", n, c.name), func(b *testing.B) {
				fw, infos := cycleFrameworkWith(b, "wasm-tinygo", infos, func(a *config.WasmPolicyArgs) {
					if c.attack == "" {
						return
					}
					bad := configv1.DefaultPolicy("adversary", config.Source{File: testguests.Policy(b, testguests.TinyGo, "testdata/adversary")})
					bad.FailurePolicy = c.fp
					a.Policies = append(a.Policies, bad)
					// Closed: the breaker must not open during the run.
					a.CircuitBreaker = config.CircuitBreaker{FailureThreshold: 1000}
					if c.open {
						a.CircuitBreaker = config.CircuitBreaker{FailureThreshold: 1, Backoff: time.Hour, MaxBackoff: time.Hour}
					}
				})
				par := parallelize.NewParallelizer(16)
				ctx := context.Background()
				feasible := make([]fwk.NodeInfo, n)
				var uid atomic.Int64
				cycle := func() int {
					pod := benchPod(fmt.Sprint("bad-", uid.Add(1)))
					if c.attack != "" {
						pod.Labels["attack"] = c.attack
					}
					state := intree.NewCycleState()
					if _, st, _ := fw.RunPreFilterPlugins(ctx, state, pod); !st.IsSuccess() {
						return 0
					}
					ok := filterAll(ctx, fw, par, state, pod, infos, feasible)
					if len(ok) == 0 {
						return 0
					}
					if st := fw.RunPreScorePlugins(ctx, state, pod, ok); !st.IsSuccess() {
						return len(ok)
					}
					_, _ = fw.RunScorePlugins(ctx, state, pod, ok)
					return len(ok)
				}
				if c.open {
					cycle() // the first failure opens the breaker
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					got := cycle()
					// What the pod's cycle decided: a looping Fail policy
					// rejects it; Ignore (and no bad policy) leaves team
					// isolation's third of the nodes.
					want := (n + 2) / 3
					if c.attack == "loop" && c.fp == config.FailurePolicyFail {
						want = 0
					}
					if c.attack != "slow" && got != want {
						b.Fatalf("%d feasible nodes, want %d", got, want)
					}
				}
			})
		}
	}
}

func withTimeout(p config.Policy, d time.Duration) config.Policy {
	p.Timeout = d
	return p
}

// BenchmarkCycleScoped is BenchmarkCycle (TinyGo guests, 1000 nodes) with
// ten more filter policies (team-isolation copies): "out-of-scope" when
// their podSelector does not take the pod, so they must cost the cycle
// nothing (ratio to "baseline" about 1.0); "in-scope" when it does, what
// the same ten cost when they run.
func BenchmarkCycleScoped(b *testing.B) {
	infos := make([]fwk.NodeInfo, 1000)
	for i := range infos {
		infos[i] = realisticNode(i)
	}
	for _, c := range []struct {
		name  string
		extra int
		match bool
	}{{"baseline", 0, false}, {"out-of-scope", 10, false}, {"in-scope", 10, true}} {
		b.Run("nodes=1000/"+c.name, func(b *testing.B) {
			fw, infos := cycleFrameworkWith(b, "wasm-tinygo", infos, func(a *config.WasmPolicyArgs) {
				for i := 0; i < c.extra; i++ {
					p := configv1.DefaultPolicy(fmt.Sprintf("scoped-%d", i), config.Source{File: testguests.Policy(b, testguests.TinyGo, "team-isolation")})
					p.Config, p.Timeout = "key=team", time.Second
					value := "web"
					if c.match {
						value = "api" // benchPod's app label
					}
					p.Scope.PodSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": value}}
					a.Policies = append(a.Policies, p)
				}
			})
			b.ReportAllocs()
			runCycles(b, fw, infos, "scoped-")
		})
	}
}
