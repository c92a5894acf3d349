package perf

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

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
