package cluster

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/component-base/metrics/legacyregistry"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"sigs.k8s.io/yaml"

	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

// The upstream scheduler_perf test cases run with the ports, and the sizes
// they run at. "performance" (make bench) takes upstream's own 500Nodes
// workload; "smoke" (make test, the TinyGo ports) and "smoke-all" (every
// profile) are a fifth of it in nodes.
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
	// Each policy gets a 1s timeout (the default is 100ms): CI shares 2
	// cores with the apiserver and etcd, and a timed-out call would reject a
	// node or fail an attempt, which would show here as an unscheduled pod,
	// not as the port's cost.
	for _, p := range portPolicies {
		fmt.Fprintf(&b, "      - name: %s\n        source: {file: %q}\n        timeout: 1s\n", p.module, filepath.Join(dir, string(tc), p.module+".wasm"))
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

// upstreamCases reads scheduler_perf's test cases from the
// performance-config.yaml of its directories matching pattern, by name,
// each with the directory it came from under "__dir" (for absPaths); up is
// scheduler_perf's directory.
func upstreamCases(pattern string) (found map[string]map[string]any, up string, err error) {
	if up, err = upstreamDir(); err != nil {
		return nil, "", err
	}
	files, _ := filepath.Glob(filepath.Join(up, pattern, "performance-config.yaml"))
	found = map[string]map[string]any{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, "", err
		}
		var cases []map[string]any
		if err := yaml.Unmarshal(data, &cases); err != nil {
			return nil, "", fmt.Errorf("%s: %w", f, err)
		}
		for _, c := range cases {
			name, _ := c["name"].(string)
			c["__dir"] = filepath.Dir(f)
			found[name] = c
		}
	}
	return found, up, nil
}

// portsPerformanceConfig writes scheduler_perf's test cases: each upstream
// case of portCases under each profile, as "<case>/<profile>", with
// upstream's ops and templates (their paths made absolute) and this file's
// workloads.
func portsPerformanceConfig(dir string) (string, error) {
	found, up, err := upstreamCases("*")
	if err != nil {
		return "", err
	}
	var out []map[string]any
	for _, pc := range portCases {
		c := found[pc.name]
		if c == nil {
			return "", fmt.Errorf("scheduler_perf in %s has no test case %s", up, pc.name)
		}
		absPaths(c, c["__dir"].(string))
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
			// make test's smoke runs the TinyGo ports only: the upstream
			// profile tests nothing of ours, and the Go ports' decisions are
			// the TinyGo ports' (test/ports holds both to upstream, pair by
			// pair); the others' 100-node runs are labelled smoke-all.
			smoke := "smoke-all"
			if profile == "PortsTinyGo" {
				smoke = "smoke"
			}
			tc["workloads"] = []any{
				map[string]any{"name": "100Nodes", "labels": []string{smoke}, "params": pc.smoke},
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
// "<case>/<profile>/<workload>": the last pods scheduled, whose rate
// schedulingWatch measures.
var measuredPods = map[string]int{}

// absPaths makes the template paths of a test case absolute, relative to
// dir, wherever they are: every string under a key ending in "Path" and
// every string of a list under a key ending in "Paths".
func absPaths(v any, dir string) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			switch {
			case strings.HasSuffix(k, "Path"):
				if p, ok := x.(string); ok && !filepath.IsAbs(p) {
					v[k] = filepath.Join(dir, p)
				}
			case strings.HasSuffix(k, "Paths"):
				if l, ok := x.([]any); ok {
					for i, e := range l {
						if p, ok := e.(string); ok && !filepath.IsAbs(p) {
							l[i] = filepath.Join(dir, p)
						}
					}
				}
			default:
				absPaths(x, dir)
			}
		}
	case []any:
		for _, x := range v {
			absPaths(x, dir)
		}
	}
}

// BenchmarkPerfSchedulingPorts runs upstream scheduler_perf workloads that
// exercise node affinity, topology spreading and inter-pod affinity under
// the default profile and under the ports profile (TinyGo, then Go), and
// after each workload checks the placement: every pod scheduled, no node
// over its resources, and every required constraint of every pod holding
// (see placement.violations). It also records the measured pods' rate
// (see schedulingWatch) and how well the preferred constraints were met,
// so the ports' scoring can be compared with the default plugins'
// (placementRecord).
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
	path := writeCases(b, dir, portProfiles, portsSchedulerConfig, portsPerformanceConfig)
	registry := frameworkruntime.Registry{wasmpolicy.Name: wasmpolicy.New}
	perf.RunBenchmarkPerfScheduling(b, path, "wasmsched-ports", registry, perf.WithPrepareFn(checkPlacementAfter))
}

// writeCases writes each profile's scheduler configuration and the test
// cases into dir, and returns the path of the cases' file.
func writeCases(b *testing.B, dir string, profiles []string, schedulerConfig func(profile, dir string) string, cases func(dir string) (string, error)) string {
	for _, p := range profiles {
		if err := os.WriteFile(filepath.Join(dir, p+".yaml"), []byte(schedulerConfig(p, dir)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	cfg, err := cases(dir)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "performance-config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}

// placementRecord is what checkPlacementAfter learns from one run, written
// as JSON next to scheduler_perf's data items (placement-*.json in
// -data-items-dir) for hack/benchreport: go test's benchmark lines are no
// place for it, as the harness's log output splits them after the first
// run of a -count.
type placementRecord struct {
	// Name is "<case>/<profile>/<workload>".
	Name string `json:"name"`
	// Pods is how many pods were read back and checked.
	Pods int `json:"pods"`
	// Violations are the broken constraints (placement.violations), or
	// the error reading the placement back; empty for a valid run.
	Violations []string `json:"violations,omitempty"`
	// PodsPerSecond is the measured pods' rate (schedulingWatch); 0 with
	// RateError when it could not be measured.
	PodsPerSecond float64 `json:"podsPerSecond"`
	RateError     string  `json:"rateError,omitempty"`
	// SoftSkew and PreferredAffinityMet are placement.preferred's measures
	// (-1: the workload has no such preference).
	SoftSkew             int     `json:"softSkew"`
	PreferredAffinityMet float64 `json:"preferredAffinityMet"`
	// PolicyCalls is the guest time of the workload (init pods included)
	// by "<policy>/<extension point>", from WasmPolicy's
	// policy_call_duration_seconds: where a profile of ports spends what
	// it spends more than the default plugins.
	PolicyCalls map[string]policyCallTime `json:"policyCalls,omitempty"`
}

// policyCallTime is one policy's guest calls at one extension point.
type policyCallTime struct {
	Calls   uint64  `json:"calls"`
	Seconds float64 `json:"seconds"`
}

// policyCalls reads WasmPolicy's call durations from the process's
// metrics registry, by "<policy>/<extension point>".
func policyCalls() (map[string]policyCallTime, error) {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]policyCallTime{}
	for _, f := range families {
		if f.GetName() != "wasmsched_policy_call_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			var policy, point string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "policy":
					policy = l.GetValue()
				case "extension_point":
					point = l.GetValue()
				}
			}
			h := m.GetHistogram()
			out[policy+"/"+point] = policyCallTime{Calls: h.GetSampleCount(), Seconds: h.GetSampleSum()}
		}
	}
	return out, nil
}

// workloadContext is what the prepare hooks use of scheduler_perf's test
// context, named by its methods: its package moved in Kubernetes v1.37,
// and the older build line compiles these files too.
type workloadContext interface {
	Name() string
	Client() clientset.Interface
	Cleanup(func())
	Errorf(string, ...any)
}

// checkPlacementAfter is scheduler_perf's prepare hook: it registers a
// cleanup that runs when the workload has finished, while the apiserver
// still serves, reads the placement back, fails the workload on any
// violation, and records the run (placementRecord). Generic over the test
// context for the reason startExtender is.
func checkPlacementAfter[C workloadContext](tCtx C) error {
	ctx, cancel := context.WithCancel(context.Background())
	watch := watchScheduling(ctx, tCtx.Client())
	tCtx.Cleanup(func() {
		defer cancel()
		_, name, _ := strings.Cut(tCtx.Name(), "/")
		rec := placementRecord{Name: name, SoftSkew: -1, PreferredAffinityMet: -1}
		defer writeRecord(tCtx, rec.Name, &rec)
		p, err := readPlacement(context.Background(), tCtx.Client())
		if err != nil {
			rec.Violations = append(rec.Violations, fmt.Sprintf("reading the placement back: %v", err))
			tCtx.Errorf("placement: %s", rec.Violations[0])
			return
		}
		rec.Pods = len(p.pods)
		rec.Violations = p.violations()
		for i, s := range rec.Violations {
			if i == 20 {
				tCtx.Errorf("placement: ... and %d more violations", len(rec.Violations)-i)
				break
			}
			tCtx.Errorf("placement: %s", s)
		}
		rec.SoftSkew, rec.PreferredAffinityMet = p.preferred()
		scheduled := 0
		for _, pod := range p.pods {
			if pod.Spec.NodeName != "" {
				scheduled++
			}
		}
		rate, err := watch.rate(scheduled, measuredPods[name])
		if err != nil {
			rec.RateError = err.Error()
			tCtx.Errorf("measuring pods/s: %v", err)
		}
		rec.PodsPerSecond = rate
		if rec.PolicyCalls, err = policyCalls(); err != nil {
			tCtx.Errorf("reading the policies' call durations: %v", err)
		}
	})
	return nil
}

// writeRecord writes rec into scheduler_perf's -data-items-dir, when set.
func writeRecord[C interface{ Errorf(string, ...any) }](tCtx C, name string, rec *placementRecord) {
	f := flag.Lookup("data-items-dir")
	if f == nil || f.Value.String() == "" {
		return
	}
	data, err := json.Marshal(rec)
	if err == nil {
		file := fmt.Sprintf("placement-%s-%d.json", strings.ReplaceAll(name, "/", "_"), time.Now().UnixNano())
		err = os.WriteFile(filepath.Join(f.Value.String(), file), data, 0o644)
	}
	if err != nil {
		tCtx.Errorf("writing the placement record: %v", err)
	}
}

// schedulingWatch records when each pod is first seen bound to a node,
// from a watch opened before the workload creates any pod. The measured
// pods are the last ones scheduled (scheduler_perf waits for each
// createPods op to be scheduled before the next), so their rate is their
// number over the time between the first and the last of them: exact to
// the watch's delivery, where scheduler_perf's SchedulingThroughput needs
// a run of several seconds (one-second samples) and its SchedulingDuration
// ends at a poll once a second.
type schedulingWatch struct {
	mu    sync.Mutex
	times []time.Time
	err   error
}

func watchScheduling(ctx context.Context, c clientset.Interface) *schedulingWatch {
	w := &schedulingWatch{}
	fail := func(err error) {
		w.mu.Lock()
		w.err = err
		w.mu.Unlock()
	}
	list, err := c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		fail(err)
		return w
	}
	go func() {
		seen := map[types.UID]bool{}
		// The apiserver ends a watch after a while; each new one resumes
		// from the last resource version seen.
		for rv := list.ResourceVersion; ctx.Err() == nil; {
			wi, err := c.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
			if err != nil {
				if ctx.Err() == nil {
					fail(fmt.Errorf("watching pods: %w", err))
				}
				return
			}
			for ev := range wi.ResultChan() {
				if ev.Type == watch.Error {
					wi.Stop()
					fail(fmt.Errorf("watching pods: %v", apierrors.FromObject(ev.Object)))
					return
				}
				pod, ok := ev.Object.(*v1.Pod)
				if !ok {
					continue
				}
				rv = pod.ResourceVersion
				if pod.Spec.NodeName == "" || seen[pod.UID] {
					continue
				}
				seen[pod.UID] = true
				w.mu.Lock()
				w.times = append(w.times, time.Now())
				w.mu.Unlock()
			}
			wi.Stop()
		}
	}()
	return w
}

// rate waits (up to 10s) until the watch has seen scheduled pods bound, and
// returns the pods/s of the last n of them (n: the workload's measured
// pods, at least 2).
func (w *schedulingWatch) rate(scheduled, n int) (float64, error) {
	if n < 2 {
		return 0, fmt.Errorf("%d measured pods: not a workload of this benchmark", n)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		w.mu.Lock()
		times, err := w.times, w.err
		w.mu.Unlock()
		switch {
		case len(times) >= scheduled && len(times) >= n:
			last := times[len(times)-n:]
			return float64(n-1) / last[n-1].Sub(last[0]).Seconds(), nil
		case err != nil:
			return 0, err
		case time.Now().After(deadline):
			return 0, fmt.Errorf("the pod watch saw %d of %d scheduled pods", len(times), scheduled)
		}
	}
}
