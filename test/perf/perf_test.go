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
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/native"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

func TestMain(m *testing.M) {
	// Keep benchmark output parseable: the host logs every module load.
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	schedmetrics.Register()
	code := m.Run()
	// The engines' compilation cache (sharedEngine): about 90 MB a run,
	// which filled the disk after a few hundred runs when it was left.
	if cacheDir != "" {
		os.RemoveAll(cacheDir)
	}
	os.Exit(code)
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
		ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: benchPodNamespace, UID: types.UID(uid), Labels: map[string]string{"team": "payments", "app": "api"}},
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

func sharedEngine(b testing.TB) *host.Engine {
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

// loadModule loads a policy with verdict reuse off (NoReuse): the per-call
// rows measure what evaluating a node costs, and they repeat one pod on
// the same nodes, which reuse would answer without the guest.
// BenchmarkShapes and the cycle benchmarks show reuse.
func loadModule(b *testing.B, mode host.Interruption, policy, cfg string, instances int, wasm []byte) (*host.Policy, *host.Version) {
	return loadSpec(b, mode, host.PolicySpec{Name: policy, Config: cfg, Timeout: time.Second, MaxInstances: instances, NoReuse: true}, wasm)
}

func loadSpec(b *testing.B, mode host.Interruption, spec host.PolicySpec, wasm []byte) (*host.Policy, *host.Version) {
	b.Helper()
	p, err := engineFor(b, mode).NewPolicy(context.Background(), spec)
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

// sizes are a benchmark's sizes; under -short (make bench-smoke, which
// only checks that every benchmark still runs) the largest is left out.
func sizes(all ...int) []int {
	if testing.Short() && len(all) > 1 {
		return all[:len(all)-1]
	}
	return all
}
