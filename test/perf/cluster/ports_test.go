package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	clientset "k8s.io/client-go/kubernetes"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"sigs.k8s.io/yaml"

	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

// The upstream scheduler_perf test cases run with the ports, and the sizes
// they run at. "performance" (make bench) takes upstream's own 500Nodes
// workload; "smoke" (make test) is a fifth of it in nodes, sized so that
// all of them under the three profiles stay within a few minutes of CI.
var portCases = []struct {
	name  string
	smoke map[string]int
}{
	{"SchedulingNodeAffinity", map[string]int{"initNodes": 100, "initPods": 100, "measurePods": 200}},
	{"TopologySpreading", map[string]int{"initNodes": 100, "initPods": 200, "measurePods": 200}},
	{"PreferredTopologySpreading", map[string]int{"initNodes": 100, "initPods": 200, "measurePods": 200}},
	{"SchedulingPodAntiAffinity", map[string]int{"initNodes": 100, "initPods": 20, "measurePods": 80}},
	{"SchedulingPreferredPodAffinity", map[string]int{"initNodes": 100, "initPods": 100, "measurePods": 200}},
}

// portProfiles are the scheduler configurations the cases run under:
// kube-scheduler's default profile, and the same profile with its ten
// Filter/Score plugins replaced by WasmPolicy running their ports.
var portProfiles = []string{"Default", "PortsTinyGo", "PortsGo"}

// portPolicies are the ten ports as WasmPolicy runs them in place of the
// default plugins: each with the default profile's weight for its upstream
// plugin (filter-only plugins have none), the reads it declares and its
// config (NodeResourcesFit's default strategy).
var portPolicies = []struct {
	module string
	weight int32
	reads  []string
	config string
}{
	{module: "nodeunschedulable"},
	{module: "nodename"},
	{module: "tainttoleration", weight: 3},
	{module: "nodeaffinity", weight: 2},
	{module: "nodeports", reads: []string{"NodePods"}},
	{module: "noderesourcesfit", weight: 1, config: "strategy=LeastAllocated"},
	{module: "balancedallocation", weight: 1},
	{module: "imagelocality", weight: 1, reads: []string{"Cluster"}},
	{module: "podtopologyspread", weight: 2, reads: []string{"Cluster"}},
	{module: "interpodaffinity", weight: 2, reads: []string{"Cluster", "Namespaces"}},
}

// replacedPlugins are the in-tree plugins the ports stand in for.
var replacedPlugins = []string{"NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
	"NodeResourcesBalancedAllocation", "ImageLocality", "PodTopologySpread", "InterPodAffinity"}

// portsSchedulerConfig is the profile's KubeSchedulerConfiguration. WasmPolicy
// combines its policies' scores as their weighted mean (0..100); its own
// weight, 12, the sum of the replaced plugins' weights, puts the total back
// on the default profile's scale.
func portsSchedulerConfig(profile, dir string) string {
	head := "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nclientConnection: {qps: 5000, burst: 5000}\n"
	if profile == "Default" {
		return head + "profiles:\n- schedulerName: default-scheduler\n"
	}
	tc := testguests.TinyGo
	if profile == "PortsGo" {
		tc = testguests.Go
	}
	var b strings.Builder
	b.WriteString(head + "profiles:\n- schedulerName: default-scheduler\n  plugins:\n    multiPoint:\n      enabled: [{name: WasmPolicy, weight: 12}]\n      disabled:\n")
	for _, p := range replacedPlugins {
		fmt.Fprintf(&b, "      - name: %s\n", p)
	}
	fmt.Fprintf(&b, "  pluginConfig:\n  - name: WasmPolicy\n    args:\n      compilationCacheDir: %s\n      policies:\n", filepath.Join(dir, "cache"))
	for _, p := range portPolicies {
		fmt.Fprintf(&b, "      - name: %s\n        source: {file: %q}\n", p.module, filepath.Join(dir, string(tc), p.module+".wasm"))
		if p.weight != 0 {
			fmt.Fprintf(&b, "        weight: %d\n", p.weight)
		}
		if p.config != "" {
			fmt.Fprintf(&b, "        config: %q\n", p.config)
		}
		if len(p.reads) > 0 {
			fmt.Fprintf(&b, "        reads: [%s]\n", strings.Join(p.reads, ", "))
		}
	}
	return b.String()
}

// upstreamDir is the scheduler_perf directory of the k8s.io/kubernetes
// module this test is built with (v1.37 or v1.34 line), found from where
// the compiler saw the harness's source: its test cases and templates are
// read from there, so that the workloads are upstream's own at the pinned
// version.
func upstreamDir() (string, error) {
	f := runtime.FuncForPC(reflect.ValueOf(perf.RunBenchmarkPerfScheduling).Pointer())
	if f == nil {
		return "", fmt.Errorf("cannot locate scheduler_perf's source")
	}
	file, _ := f.FileLine(f.Entry())
	dir := filepath.Dir(file)
	if _, err := os.Stat(filepath.Join(dir, "templates")); err != nil {
		return "", fmt.Errorf("scheduler_perf's templates are not next to its source %s (built with -trimpath?): %w", file, err)
	}
	return dir, nil
}

// portsPerformanceConfig writes scheduler_perf's test cases: each upstream
// case of portCases under each profile, as "<case>/<profile>", with
// upstream's ops and templates (their paths made absolute) and this file's
// workloads.
func portsPerformanceConfig(dir string) (string, error) {
	up, err := upstreamDir()
	if err != nil {
		return "", err
	}
	files, _ := filepath.Glob(filepath.Join(up, "*", "performance-config.yaml"))
	found := map[string]map[string]any{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		var cases []map[string]any
		if err := yaml.Unmarshal(data, &cases); err != nil {
			return "", fmt.Errorf("%s: %w", f, err)
		}
		for _, c := range cases {
			name, _ := c["name"].(string)
			c["__dir"] = filepath.Dir(f)
			found[name] = c
		}
	}
	var out []map[string]any
	for _, pc := range portCases {
		c := found[pc.name]
		if c == nil {
			return "", fmt.Errorf("scheduler_perf in %s has no test case %s", up, pc.name)
		}
		abs := func(m map[string]any, key string) {
			if p, ok := m[key].(string); ok && !filepath.IsAbs(p) {
				m[key] = filepath.Join(c["__dir"].(string), p)
			}
		}
		abs(c, "defaultPodTemplatePath")
		ops, _ := c["workloadTemplate"].([]any)
		for _, op := range ops {
			if m, ok := op.(map[string]any); ok {
				for _, key := range []string{"nodeTemplatePath", "podTemplatePath", "templatePath"} {
					abs(m, key)
				}
			}
		}
		var perfParams any
		for _, w := range c["workloads"].([]any) {
			if m := w.(map[string]any); m["name"] == "500Nodes" {
				perfParams = m["params"]
			}
		}
		if perfParams == nil {
			return "", fmt.Errorf("scheduler_perf's %s has no 500Nodes workload", pc.name)
		}
		for _, profile := range portProfiles {
			tc := map[string]any{}
			for k, v := range c {
				tc[k] = v
			}
			delete(tc, "__dir")
			delete(tc, "labels")
			tc["name"] = pc.name + "/" + profile
			tc["schedulerConfigPath"] = filepath.Join(dir, profile+".yaml")
			tc["metricsCollectorConfig"] = map[string]any{"metrics": map[string]any{
				"scheduler_framework_extension_point_duration_seconds": []any{map[string]any{"label": "extension_point", "values": []string{"PreFilter", "Filter", "PreScore", "Score"}}},
				"scheduler_scheduling_attempt_duration_seconds":        nil,
				"scheduler_pod_scheduling_duration_seconds":            nil,
			}}
			tc["workloads"] = []any{
				map[string]any{"name": "100Nodes", "labels": []string{"smoke"}, "params": pc.smoke},
				map[string]any{"name": "500Nodes", "labels": []string{"performance"}, "params": perfParams},
			}
			measuredPods[tc["name"].(string)+"/100Nodes"] = pc.smoke["measurePods"]
			if m, ok := perfParams.(map[string]any); ok {
				n, _ := m["measurePods"].(float64)
				measuredPods[tc["name"].(string)+"/500Nodes"] = int(n)
			}
			out = append(out, tc)
		}
	}
	data, err := yaml.Marshal(out)
	return string(data), err
}

// measuredPods is each workload's number of measured pods, by
// "<case>/<profile>/<workload>", reported with the placement so that pods/s
// can be computed from scheduler_perf's SchedulingDuration even when a run
// is too short for its once-a-second throughput samples.
var measuredPods = map[string]int{}

// BenchmarkPerfSchedulingPorts runs upstream scheduler_perf workloads that
// exercise node affinity, topology spreading and inter-pod affinity under
// the default profile and under the ports profile (TinyGo, then Go), and
// after each workload checks the placement: every pod scheduled, no node
// over its resources, and every required constraint of every pod holding
// (see placement.violations). It also reports how well the preferred
// constraints were met (soft_skew, preferred_affinity_met_%), so the ports'
// scoring can be compared with the default plugins'.
//
// Selected like BenchmarkPerfScheduling: -perf-scheduling-label-filter=smoke
// (make test) or performance (make bench).
func BenchmarkPerfSchedulingPorts(b *testing.B) {
	dir := b.TempDir()
	for _, tc := range testguests.Toolchains {
		_ = os.MkdirAll(filepath.Join(dir, string(tc)), 0o755)
		for _, p := range portPolicies {
			path, err := testguests.Build(tc, filepath.Join("plugins-wasm", "ports", p.module))
			if err != nil {
				b.Fatal(err)
			}
			src, err := os.ReadFile(path)
			if err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, string(tc), p.module+".wasm"), src, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, p := range portProfiles {
		if err := os.WriteFile(filepath.Join(dir, p+".yaml"), []byte(portsSchedulerConfig(p, dir)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	cfg, err := portsPerformanceConfig(dir)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "performance-config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		b.Fatal(err)
	}
	registry := frameworkruntime.Registry{wasmpolicy.Name: wasmpolicy.New}
	perf.RunBenchmarkPerfScheduling(b, path, "wasmsched-ports", registry, perf.WithPrepareFn(checkPlacementAfter))
}

// checkPlacementAfter is scheduler_perf's prepare hook: it registers a
// cleanup that runs when the workload has finished, while the apiserver
// still serves, reads the placement back and fails the workload on any
// violation. Generic over the test context for the reason startExtender is.
func checkPlacementAfter[C interface {
	Name() string
	Client() clientset.Interface
	Cleanup(func())
	Errorf(string, ...any)
}](tCtx C) error {
	b := benchmarkOf(tCtx)
	tCtx.Cleanup(func() {
		p, err := readPlacement(context.Background(), tCtx.Client())
		if err != nil {
			tCtx.Errorf("reading the placement back: %v", err)
			return
		}
		v := p.violations()
		for i, s := range v {
			if i == 20 {
				tCtx.Errorf("placement: ... and %d more violations", len(v)-i)
				break
			}
			tCtx.Errorf("placement: %s", s)
		}
		if b != nil {
			_, workload, _ := strings.Cut(tCtx.Name(), "/")
			if n := measuredPods[workload]; n > 0 {
				b.ReportMetric(float64(n), "measured_pods")
			}
			b.ReportMetric(float64(len(p.pods)), "pods_checked")
			skew, met := p.preferred()
			if skew >= 0 {
				b.ReportMetric(float64(skew), "soft_skew")
			}
			if met >= 0 {
				b.ReportMetric(100*met, "preferred_affinity_met_%")
			}
		}
	})
	return nil
}

// benchmarkOf returns the *testing.B behind a scheduler_perf test context, to
// report metrics on it. TContext.TB's result type is an interface of the
// ktesting package, which moved between the Kubernetes lines this file
// builds with, so it is called by reflection.
func benchmarkOf(tCtx any) *testing.B {
	m := reflect.ValueOf(tCtx).MethodByName("TB")
	if !m.IsValid() {
		return nil
	}
	b, _ := m.Call(nil)[0].Interface().(*testing.B)
	return b
}
