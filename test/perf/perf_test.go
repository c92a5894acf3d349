// Package perf holds the benchmarks behind docs/performance.md: per call
// (native plugin vs TinyGo vs Go guest), per scheduling cycle over 100, 1000
// and 5000 nodes, memory per instance, module load time and reload latency.
// `make bench` runs them with real iteration counts and regenerates the doc;
// `make test` runs each once (-benchtime 1x) so they cannot rot.
package perf

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework/parallelize"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
	"github.com/wasmsched/wasmsched/test/perf/native"
)

func TestMain(m *testing.M) {
	// Keep benchmark output parseable: the host logs every module load.
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	schedmetrics.Register()
	os.Exit(m.Run())
}

// realisticNode is shaped like a cloud node: a dozen well-known labels, a
// few long annotations, cpu/memory/pods/ephemeral-storage, and 0-3 running
// pods. A third are team a, a third team b, a third shared.
func realisticNode(i int) fwk.NodeInfo {
	name := fmt.Sprintf("ip-10-%d-%d-%d.eu-west-1.compute.internal", i/65536%256, i/256%256, i%256)
	labels := map[string]string{
		"kubernetes.io/hostname":                   name,
		"kubernetes.io/os":                         "linux",
		"kubernetes.io/arch":                       "amd64",
		"beta.kubernetes.io/os":                    "linux",
		"beta.kubernetes.io/arch":                  "amd64",
		"node.kubernetes.io/instance-type":         "m6i.2xlarge",
		"beta.kubernetes.io/instance-type":         "m6i.2xlarge",
		"topology.kubernetes.io/region":            "eu-west-1",
		"topology.kubernetes.io/zone":              fmt.Sprintf("eu-west-1%c", 'a'+i%3),
		"failure-domain.beta.kubernetes.io/region": "eu-west-1",
		"failure-domain.beta.kubernetes.io/zone":   fmt.Sprintf("eu-west-1%c", 'a'+i%3),
		"karpenter.sh/capacity-type":               "on-demand",
		"node-pool":                                "general",
	}
	switch i % 3 {
	case 0:
		labels["team"] = "payments"
	case 1:
		labels["team"] = "search"
	}
	res := v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("8"), v1.ResourceMemory: resource.MustParse("31Gi"),
		v1.ResourcePods: resource.MustParse("110"), v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), Labels: labels, Annotations: map[string]string{
			"node.alpha.kubernetes.io/ttl":                           "0",
			"volumes.kubernetes.io/controller-managed-attach-detach": "true",
			"csi.volume.kubernetes.io/nodeid":                        `{"ebs.csi.aws.com":"i-0123456789abcdef0","efs.csi.aws.com":"i-0123456789abcdef0"}`,
			"alpha.kubernetes.io/provided-node-ip":                   "10.0.0.1",
		}},
		Spec:   v1.NodeSpec{ProviderID: "aws:///eu-west-1a/i-0123456789abcdef0"},
		Status: v1.NodeStatus{Capacity: res.DeepCopy(), Allocatable: res},
	}
	var pods []*v1.Pod
	for k := 0; k < i%4; k++ {
		pods = append(pods, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, k), Namespace: "default", UID: types.UID(fmt.Sprintf("%s-%d", name, k))},
			Spec: v1.PodSpec{NodeName: name, Containers: []v1.Container{{Name: "app", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
				v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("2Gi")}}}}},
		})
	}
	ni := intree.NewNodeInfo(pods...)
	ni.SetNode(node)
	return ni
}

func benchPod(uid string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "payments", UID: types.UID(uid), Labels: map[string]string{"team": "payments", "app": "api"}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("1Gi")}}}}},
	}
}

var (
	engineOnce sync.Once
	engine     *host.Engine
	cacheDir   string
	// closeOnDone is an engine stopping calls the way the host did before
	// it instrumented modules (host.InterruptCloseOnDone), for rows that
	// compare the two in one run.
	closeOnDoneOnce sync.Once
	closeOnDone     *host.Engine
)

func sharedEngine(b *testing.B) *host.Engine {
	engineOnce.Do(func() {
		cacheDir, _ = os.MkdirTemp("", "wasmsched-perf-cache")
		var err error
		if engine, err = host.NewEngine(host.EngineOptions{CacheDir: cacheDir}); err != nil {
			panic(err)
		}
	})
	return engine
}

func engineFor(b *testing.B, mode host.Interruption) *host.Engine {
	if mode == host.InterruptFuel {
		return sharedEngine(b)
	}
	sharedEngine(b) // for cacheDir
	closeOnDoneOnce.Do(func() {
		var err error
		if closeOnDone, err = host.NewEngine(host.EngineOptions{CacheDir: cacheDir, Interruption: host.InterruptCloseOnDone}); err != nil {
			panic(err)
		}
	})
	return closeOnDone
}

// guestName names a toolchain's rows: "tinygo", or "tinygo-close-on-done"
// for the engine that runs modules uninstrumented.
func guestName(tc testguests.Toolchain, mode host.Interruption) string {
	if mode == host.InterruptFuel {
		return string(tc)
	}
	return string(tc) + "-" + mode.String()
}

// interruptions are the modes the per-node rows compare.
var interruptions = []host.Interruption{host.InterruptFuel, host.InterruptCloseOnDone}

func loadVersionIn(b *testing.B, mode host.Interruption, tc testguests.Toolchain, policy, cfg string, instances int) (*host.Policy, *host.Version) {
	return loadModule(b, mode, policy, cfg, instances, testguests.PolicyBytes(b, tc, policy))
}

func loadModule(b *testing.B, mode host.Interruption, policy, cfg string, instances int, wasm []byte) (*host.Policy, *host.Version) {
	b.Helper()
	p, err := engineFor(b, mode).NewPolicy(context.Background(), host.PolicySpec{Name: policy, Config: cfg, Timeout: time.Second, MaxInstances: instances})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close(context.Background()) })
	v, err := p.Load(context.Background(), wasm, "")
	if err != nil {
		b.Fatal(err)
	}
	return p, v
}

// BenchmarkFilter is one Filter evaluation per op (ns/op is per node) of the
// team-isolation logic on an admitted node: the native plugin, and the wasm
// policy through the host with one guest call per node or 32 nodes per call
// (what the plugin does); each guest instrumented (how the host runs it)
// and as uploaded under close-on-context-done (how it ran before), and
// built against the SDK without node tables (-abi1: ABI v1).
func BenchmarkFilter(b *testing.B) {
	ni := realisticNode(0)
	pod := benchPod("p")
	b.Run("native", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if st := native.FilterTeam(pod, ni); st != nil {
				b.Fatal(st)
			}
		}
	})
	for _, tc := range testguests.Toolchains {
		for _, mode := range interruptions {
			_, v := loadVersionIn(b, mode, tc, "team-isolation", "key=team", 1)
			benchGuest(b, guestName(tc, mode), v, host.CallFilter, pod, ni)
		}
		for _, mode := range interruptions {
			_, v := loadModule(b, mode, "team-isolation", "key=team", 1, testguests.PolicyBytesABI1(b, tc, "team-isolation"))
			benchGuest(b, guestName(tc+"-abi1", mode), v, host.CallFilter, pod, ni)
		}
	}
}

// BenchmarkScore is BenchmarkFilter for the bin-packing Score.
func BenchmarkScore(b *testing.B) {
	ni := realisticNode(3)
	pod := benchPod("p")
	want := native.ScorePacking(pod, ni)
	b.Run("native", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if s := native.ScorePacking(pod, ni); s != want {
				b.Fatal(s)
			}
		}
	})
	for _, tc := range testguests.Toolchains {
		for _, mode := range interruptions {
			_, v := loadVersionIn(b, mode, tc, "bin-packing", "cpu=1,memory=1", 1)
			benchGuest(b, guestName(tc, mode), v, host.CallScore, pod, ni)
		}
		for _, mode := range interruptions {
			_, v := loadModule(b, mode, "bin-packing", "cpu=1,memory=1", 1, testguests.PolicyBytesABI1(b, tc, "bin-packing"))
			benchGuest(b, guestName(tc+"-abi1", mode), v, host.CallScore, pod, ni)
		}
	}
}

func benchGuest(b *testing.B, name string, v *host.Version, kind host.CallKind, pod *v1.Pod, ni fwk.NodeInfo) {
	ps := host.NewPodState(pod)
	blob := new(host.PolicyCycle)
	ctx := context.Background()
	b.Run(name+"/single", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, r, err := v.Call(ctx, kind, ps, ni, blob, nil); err != nil || r.Code != 0 {
				b.Fatal(err, r)
			}
		}
	})
	b.Run(name+"/batch32", func(b *testing.B) {
		nodes := make([]fwk.NodeInfo, 32)
		for i := range nodes {
			nodes[i] = ni
		}
		results := make([]host.Result, 32)
		var scores []int64
		if kind == host.CallScore {
			scores = make([]int64, 32)
		}
		b.ReportAllocs()
		for i := 0; i < b.N; i += 32 {
			if _, err := v.CallNodes(ctx, kind, ps, nodes, blob, results, scores); err != nil || results[31].Code != 0 {
				b.Fatal(err, results[31])
			}
		}
	})
}

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
func frameworkFor(b *testing.B, registry frameworkruntime.Registry, plugins *schedconfig.Plugins, pluginConfig []schedconfig.PluginConfig, infos []fwk.NodeInfo) (intree.Framework, []fwk.NodeInfo) {
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
	par := parallelize.NewParallelizer(16)
	ctx := context.Background()
	feasible := make([]fwk.NodeInfo, len(infos))
	var uid atomic.Int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
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

// BenchmarkCycle is one scheduling cycle per op, as the scheduler runs it:
// PreFilter, Filter on every node through the framework's parallelizer at
// parallelism 16, then PreScore and Score (also parallel) on the feasible
// third, with NormalizeScore. Native plugins vs WasmPolicy (TinyGo, Go).
func BenchmarkCycle(b *testing.B) {
	for _, n := range []int{100, 1000, 5000} {
		infos := make([]fwk.NodeInfo, n)
		for i := range infos {
			infos[i] = realisticNode(i)
		}
		for _, variant := range []string{"native", "wasm-tinygo", "wasm-go"} {
			b.Run(fmt.Sprintf("nodes=%d/%s", n, variant), func(b *testing.B) {
				fw, infos := cycleFramework(b, variant, infos)
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
	for _, n := range []int{1000, 5000} {
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

// rssBytes is the process's resident set.
func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var size, res int64
	fmt.Sscan(string(b), &size, &res)
	return res * int64(os.Getpagesize())
}

// BenchmarkInstanceMemory reports what the host's memory budget charges
// for a policy, as the host measures it: the compiled module (machine code
// and host heap; shared by every policy with the same bytes) and one
// instance (host heap and linear memory). A policy holds at most one
// instance per running guest call (GOMAXPROCS), and none when idle.
func BenchmarkInstanceMemory(b *testing.B) {
	for _, tc := range testguests.Toolchains {
		b.Run(string(tc), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				e, err := host.NewEngine(host.EngineOptions{CacheDir: b.TempDir()})
				if err != nil {
					b.Fatal(err)
				}
				p, err := e.NewPolicy(context.Background(), host.PolicySpec{Name: "m", Config: "key=team", Timeout: time.Second})
				if err != nil {
					b.Fatal(err)
				}
				v, err := p.Load(context.Background(), testguests.PolicyBytes(b, tc, "team-isolation"), "")
				if err != nil {
					b.Fatal(err)
				}
				u := e.MemoryBudget()
				linear := float64(v.MemoryBytes()) / 1024
				b.ReportMetric(linear, "KiB-linear/instance")
				b.ReportMetric(float64(u.Instances)/1024-linear, "KiB-heap/instance")
				b.ReportMetric(float64(u.Instances)/1024, "KiB/instance")
				b.ReportMetric(float64(u.Modules)/(1<<20), "MiB/module")
				b.ReportMetric(float64(u.Modules+int64(runtime.GOMAXPROCS(0))*u.Instances)/(1<<20), "MiB/policy-busy")
				_ = p.Close(context.Background())
				_ = e.Close()
			}
		})
	}
}

// BenchmarkLoad measures loading a module version (decode, compile,
// validate, instantiate, initialize): cold, with an empty compilation cache,
// and warm, with the cache filled by a previous engine.
func BenchmarkLoad(b *testing.B) {
	for _, tc := range testguests.Toolchains {
		mod := testguests.PolicyBytes(b, tc, "team-isolation")
		for _, warm := range []bool{false, true} {
			name := string(tc) + "/cold"
			if warm {
				name = string(tc) + "/warm-cache"
			}
			b.Run(name, func(b *testing.B) {
				dir := b.TempDir()
				if warm {
					e, _ := host.NewEngine(host.EngineOptions{CacheDir: dir})
					p, _ := e.NewPolicy(context.Background(), host.PolicySpec{Name: "l", Timeout: time.Second, MaxInstances: 1})
					if _, err := p.Load(context.Background(), mod, ""); err != nil {
						b.Fatal(err)
					}
					_ = p.Close(context.Background())
					_ = e.Close()
				}
				var total time.Duration
				for i := 0; i < b.N; i++ {
					cdir := dir
					if !warm {
						cdir = b.TempDir()
					}
					e, err := host.NewEngine(host.EngineOptions{CacheDir: cdir})
					if err != nil {
						b.Fatal(err)
					}
					p, _ := e.NewPolicy(context.Background(), host.PolicySpec{Name: "l", Timeout: time.Second, MaxInstances: 1})
					start := time.Now()
					if _, err := p.Load(context.Background(), mod, ""); err != nil {
						b.Fatal(err)
					}
					total += time.Since(start)
					_ = p.Close(context.Background())
					_ = e.Close()
				}
				b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/load")
			})
		}
	}
}

// BenchmarkReload measures a ConfigMap update until the new module serves,
// through the plugin's ConfigMap source (an informer on a fake clientset:
// the apiserver round trip is in e2e.TestConfigMapUpdateTakesEffect).
func BenchmarkReload(b *testing.B) {
	mods := [][]byte{testguests.PolicyBytes(b, testguests.TinyGo, "bin-packing"), testguests.PolicyBytes(b, testguests.TinyGo, "spread")}
	client := fake.NewClientset(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "placement", Namespace: "p"}, BinaryData: map[string][]byte{"policy.wasm": mods[0]}})
	sharedEngine(b)
	w, err := wasmpolicy.NewWithArgs(context.Background(), &config.WasmPolicyArgs{MaxInstancesPerPolicy: 4, FilePollInterval: time.Hour, CompilationCacheDir: cacheDir, Policies: []config.Policy{
		withTimeout(configv1.DefaultPolicy("placement", config.Source{ConfigMap: &config.ConfigMapSource{Namespace: "p", Name: "placement", Key: "policy.wasm"}}), time.Second),
	}}, wasmpolicy.NewClientHandle(client, nil))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	var total time.Duration
	for i := 0; i < b.N; i++ {
		next := mods[(i+1)%2]
		want := host.SHA256Of(next)
		start := time.Now()
		if _, err := client.CoreV1().ConfigMaps("p").Update(context.Background(), &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "placement", Namespace: "p"}, BinaryData: map[string][]byte{"policy.wasm": next}}, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		for w.Serving("placement") != want {
			if time.Since(start) > 10*time.Second {
				b.Fatal("the new module did not serve within 10s")
			}
			time.Sleep(100 * time.Microsecond)
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/reload")
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
