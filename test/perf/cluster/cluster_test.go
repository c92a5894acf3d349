// Package cluster is the cluster benchmark: kube-scheduler's own
// scheduler_perf harness (in-process apiserver, etcd on PATH), run out of
// tree with our plugins registered, on a SchedulingBasic-like workload at
// 500 and 5000 nodes, under five profiles: the default plugins; plus the
// native team-isolation and bin-packing plugins; plus WasmPolicy running the
// same policies compiled with TinyGo, then with Go; plus the same policies
// served by the HTTP extender.
//
// Run by `make bench` (which puts etcd on PATH); `make test` runs the
// smallest workload once. Results: pods/s (SchedulingThroughput) and the
// Filter and Score extension point latencies.
package cluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientset "k8s.io/client-go/kubernetes"
	_ "k8s.io/component-base/logs/json/register"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"

	"github.com/wasmsched/wasmsched/internal/native"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	_ "github.com/wasmsched/wasmsched/pkg/apis/config/scheme" // WasmPolicyArgs in the scheduler config
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
	"github.com/wasmsched/wasmsched/pkg/extender"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

func TestMain(m *testing.M) {
	if err := perf.InitTests(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// profiles are the scheduler configurations compared, by test case name.
var profiles = []string{"Default", "Native", "WasmTinyGo", "WasmGo", "Extender"}

func schedulerConfig(profile, dir, extenderURL string) string {
	head := "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nclientConnection: {qps: 5000, burst: 5000}\n"
	policies := func(tc testguests.Toolchain) string {
		var b strings.Builder
		for _, p := range []struct{ name, cfg string }{{"team-isolation", "key=team"}, {"bin-packing", "cpu=1,memory=1"}} {
			fmt.Fprintf(&b, "      - name: %s\n        source: {file: %q}\n        config: %q\n", p.name, filepath.Join(dir, string(tc), p.name+".wasm"), p.cfg)
		}
		return b.String()
	}
	switch profile {
	case "Native":
		return head + `profiles:
- schedulerName: default-scheduler
  plugins:
    filter: {enabled: [{name: ` + native.TeamIsolationName + `}]}
    score: {enabled: [{name: ` + native.BinPackingName + `, weight: 1}]}
`
	case "WasmTinyGo", "WasmGo":
		tc := testguests.TinyGo
		if profile == "WasmGo" {
			tc = testguests.Go
		}
		return head + `profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint: {enabled: [{name: WasmPolicy, weight: 1}]}
  pluginConfig:
  - name: WasmPolicy
    args:
      compilationCacheDir: ` + filepath.Join(dir, "cache") + `
      policies:
` + policies(tc)
	case "Extender":
		return head + `extenders:
- urlPrefix: ` + extenderURL + `
  filterVerb: filter
  prioritizeVerb: prioritize
  weight: 1
  nodeCacheCapable: true
  enableHTTPS: false
profiles:
- schedulerName: default-scheduler
`
	}
	return head + "profiles:\n- schedulerName: default-scheduler\n"
}

func performanceConfig(dir string) string {
	var b strings.Builder
	for _, p := range profiles {
		fmt.Fprintf(&b, `- name: %s
  schedulerConfigPath: %s
  defaultPodTemplatePath: %s
  metricsCollectorConfig:
    metrics:
      scheduler_framework_extension_point_duration_seconds:
      - label: extension_point
        values: [Filter, Score]
      scheduler_scheduling_attempt_duration_seconds:
      scheduler_pod_scheduling_duration_seconds:
  workloadTemplate:
  - opcode: createNodes
    countParam: $initNodes
    nodeTemplatePath: %s
  - opcode: createPods
    countParam: $initPods
  - opcode: createPods
    countParam: $measurePods
    collectMetrics: true
  workloads:
  - name: 100Nodes
    labels: [smoke]
    params: {initNodes: 100, initPods: 50, measurePods: 100}
  - name: 500Nodes
    labels: [performance]
    params: {initNodes: 500, initPods: 500, measurePods: 1000}
  - name: 5000Nodes
    labels: [performance]
    params: {initNodes: 5000, initPods: 1000, measurePods: 1000}
`, p, filepath.Join(dir, p+".yaml"), filepath.Join(mustAbs("pod.yaml")), mustAbs("node.yaml"))
	}
	for _, p := range profiles {
		measuredPods[p+"/100Nodes"], measuredPods[p+"/500Nodes"], measuredPods[p+"/5000Nodes"] = 100, 1000, 1000
	}
	return b.String()
}

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		panic(err)
	}
	return a
}

// BenchmarkPerfScheduling runs the workloads; select them with
// -perf-scheduling-label-filter (performance, or smoke for the 100-node one).
func BenchmarkPerfScheduling(b *testing.B) {
	dir := b.TempDir()
	for _, tc := range testguests.Toolchains {
		_ = os.MkdirAll(filepath.Join(dir, string(tc)), 0o755)
		for _, p := range []string{"team-isolation", "bin-packing"} {
			src, err := os.ReadFile(testguests.Policy(b, tc, p))
			if err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, string(tc), p+".wasm"), src, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	// The extender serves the TinyGo policies on a fixed local port; each
	// Extender workload starts it against that workload's apiserver.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	extenderAddr := l.Addr().String()
	l.Close()
	for _, p := range profiles {
		if err := os.WriteFile(filepath.Join(dir, p+".yaml"), []byte(schedulerConfig(p, dir, "http://"+extenderAddr)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "performance-config.yaml")
	if err := os.WriteFile(cfg, []byte(performanceConfig(dir)), 0o644); err != nil {
		b.Fatal(err)
	}
	registry := frameworkruntime.Registry{
		wasmpolicy.Name:          wasmpolicy.New,
		native.TeamIsolationName: native.NewTeamIsolation,
		native.BinPackingName:    native.NewBinPacking,
	}
	extenderSetup.dir, extenderSetup.addr = dir, extenderAddr
	perf.RunBenchmarkPerfScheduling(b, cfg, "wasmsched", registry, perf.WithPrepareFn(prepareCluster))
}

// prepareCluster is the cluster benchmark's prepare hook: it starts the
// extender for Extender workloads, and checks and records every run as
// the ports' runs are (checkPlacementAfter): scheduler_perf's one-second
// throughput samples are two or three per 500-node run, too few to compare
// profiles by, so the pod watch's rate of the measured pods is recorded
// next to them.
func prepareCluster[C workloadContext](tCtx C) error {
	if err := startExtender(tCtx); err != nil {
		return err
	}
	return checkPlacementAfter(tCtx)
}

// extenderSetup is what startExtender needs, set before the run.
var extenderSetup struct{ dir, addr string }

// startExtender is scheduler_perf's prepare hook: for Extender workloads it
// serves the TinyGo policies on extenderSetup.addr against the workload's
// apiserver. It is generic over the test context so that it names no
// ktesting package: that package moved in Kubernetes v1.37, and the older
// build line compiles this file too.
func startExtender[C interface {
	Name() string
	Client() clientset.Interface
	Cleanup(func())
}](tCtx C) error {
	if !strings.Contains(tCtx.Name(), "/Extender/") {
		return nil
	}
	args := &config.WasmPolicyArgs{MaxInstancesPerPolicy: 16, FilePollInterval: time.Hour, CompilationCacheDir: filepath.Join(extenderSetup.dir, "cache")}
	for _, p := range []struct{ name, cfg string }{{"team-isolation", "key=team"}, {"bin-packing", "cpu=1,memory=1"}} {
		pc := configv1.DefaultPolicy(p.name, config.Source{File: filepath.Join(extenderSetup.dir, "tinygo", p.name+".wasm")})
		pc.Config = p.cfg
		args.Policies = append(args.Policies, pc)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := extender.New(ctx, tCtx.Client(), nil, args, extender.Options{})
	if err != nil {
		cancel()
		return err
	}
	hs := &http.Server{Addr: extenderSetup.addr, Handler: srv.Handler()}
	ln, err := net.Listen("tcp", extenderSetup.addr)
	if err != nil {
		cancel()
		return err
	}
	go func() { _ = hs.Serve(ln) }()
	tCtx.Cleanup(func() { _ = hs.Close(); srv.Close(); cancel() })
	return nil
}
