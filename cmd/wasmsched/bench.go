package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/parallelize"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/native"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
)

type benchOptions struct {
	nodes      int
	iterations int
	pod        string
	config     string
	reads      string
	native     string
	snapshot   bool
}

// BenchResult is the latency of one kind of measurement.
type BenchResult struct {
	Measure string        `json:"measure"`
	Calls   int           `json:"calls"`
	Mean    time.Duration `json:"mean"`
	P50     time.Duration `json:"p50"`
	P90     time.Duration `json:"p90"`
	P99     time.Duration `json:"p99"`
	Max     time.Duration `json:"max"`
	// Errors counts the calls whose verdict was an Error (an undeclared
	// read, a policy error): their latency is the error path's.
	Errors int `json:"errors,omitempty"`
	// FirstError is the first such Error's reason.
	FirstError string `json:"firstError,omitempty"`
}

// BenchReport is the result of wasmsched bench.
type BenchReport struct {
	Policy  string        `json:"policy"`
	Nodes   int           `json:"nodes"`
	Exports string        `json:"exports"`
	Reads   []string      `json:"reads,omitempty"`
	Load    time.Duration `json:"load"`
	Results []BenchResult `json:"results"`
	// Native is the same cycle run by a native plugin that does what the
	// policy does, or why there is none.
	Native NativeReference `json:"native"`
}

// NativeReference is bench's native baseline: a framework plugin with the
// policy's logic, run over the same nodes, pod and parallelism.
type NativeReference struct {
	// Plugin names the native plugin; empty when there is none.
	Plugin string `json:"plugin,omitempty"`
	// Cycle is its Filter and Score cycle; Ratio the policy's cycle mean
	// over it.
	Cycle *BenchResult `json:"cycle,omitempty"`
	Ratio float64      `json:"ratio,omitempty"`
	// None says why there is no reference.
	None string `json:"none,omitempty"`
}

// nativeTwin is a native plugin that does what an example policy does with
// one config (internal/native: the baseline of make bench).
type nativeTwin struct {
	plugin string
	config []string // the configs it implements
	filter func(*v1.Pod, fwk.NodeInfo) *fwk.Status
	score  func(*v1.Pod, fwk.NodeInfo) int64
}

// nativeTwins are the example policies with a native twin, by name.
var nativeTwins = map[string]nativeTwin{
	"team-isolation": {plugin: native.TeamIsolationName, config: []string{"", "key=team"}, filter: native.FilterTeam},
	"bin-packing":    {plugin: native.BinPackingName, config: []string{"", "cpu=1,memory=1"}, score: native.ScorePacking},
}

func newBenchCommand(g *globalOptions) *cobra.Command {
	o := &benchOptions{}
	cmd := &cobra.Command{
		Use:   "bench POLICY.wasm [--nodes N] [--pod POD.yaml]",
		Short: "Measure per-call latency percentiles of a policy, and a whole Filter/Score cycle, on synthetic or live nodes",
		Long: `Measures, through the scheduler's host code: Filter and Score latency per
call (one node per call), and a full cycle (PreFilter, Filter over every
node at parallelism 16 with 32-node batches, then PreScore, Score and
NormalizeScore) as the plugin runs it. Nodes are synthetic (--nodes N,
labelled team=a/b/none, with a few pods each) or, with --snapshot, the
nodes of the cluster in --kubeconfig.

--reads declares the policy's reads as policies[].reads does, so a policy
that reads the pods on a node or the cluster is measured on the path the
scheduler runs, not on its NotDeclared error. Next to the policy's cycle it
runs the cycle of a native plugin that does the same, where one exists
(the example policies' twins in internal/native, picked by the module's
file name or --native), and prints the ratio; otherwise it says that there
is none.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd, g, args[0])
		},
	}
	cmd.Flags().IntVar(&o.nodes, "nodes", 1000, "number of synthetic nodes")
	cmd.Flags().IntVar(&o.iterations, "iterations", 20, "passes over the nodes")
	cmd.Flags().StringVar(&o.pod, "pod", "", "the pod to place (default: a 500m pod labelled team=a)")
	cmd.Flags().StringVar(&o.config, "config", "", "the policy's config string")
	cmd.Flags().StringVar(&o.reads, "reads", "", "the policy's declared reads, comma-separated (NodePods, WholeObjects, Cluster, Namespaces, Volumes), as policies[].reads")
	cmd.Flags().StringVar(&o.native, "native", "", "the example policy whose native twin to compare with (team-isolation, bin-packing; default: the module's file name; none: no comparison)")
	cmd.Flags().BoolVar(&o.snapshot, "snapshot", false, "use the nodes of the cluster in --kubeconfig")
	return cmd
}

func syntheticNodes(n int) ([]*v1.Node, []*v1.Pod) {
	nodes := make([]*v1.Node, n)
	var pods []*v1.Pod
	for i := range nodes {
		labels := map[string]string{"kubernetes.io/hostname": fmt.Sprintf("node-%05d", i), "topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", i%3)}
		switch i % 3 {
		case 0:
			labels["team"] = "a"
		case 1:
			labels["team"] = "b"
		}
		res := v1.ResourceList{v1.ResourceCPU: resource.MustParse("8"), v1.ResourceMemory: resource.MustParse("32Gi"), v1.ResourcePods: resource.MustParse("110")}
		nodes[i] = &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: labels["kubernetes.io/hostname"], Labels: labels}, Status: v1.NodeStatus{Capacity: res, Allocatable: res}}
		for k := 0; k < i%4; k++ {
			pods = append(pods, &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("run-%d-%d", i, k), Namespace: "default", UID: "x"},
				Spec: v1.PodSpec{NodeName: nodes[i].Name, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
					v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("2Gi")}}}}},
			})
		}
	}
	return nodes, pods
}

func defaultPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: "default", UID: "bench", Labels: map[string]string{"team": "a"}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("1Gi")}}}}},
	}
}

func (o *benchOptions) run(cmd *cobra.Command, g *globalOptions, file string) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return err
	}
	src, err := os.ReadFile(abs)
	if err != nil {
		return err
	}
	pod := defaultPod()
	if o.pod != "" {
		if pod, err = readPod(o.pod); err != nil {
			return err
		}
	}
	var nodes []*v1.Node
	var pods []*v1.Pod
	if o.snapshot {
		client, err := clientFor(g)
		if err != nil {
			return err
		}
		if nodes, pods, err = snapshot(ctx, client); err != nil {
			return err
		}
	} else {
		if o.nodes < 1 {
			return fmt.Errorf("--nodes must be at least 1")
		}
		nodes, pods = syntheticNodes(o.nodes)
	}
	infos := intree.NodeInfos(nodes, pods)
	name := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	report := &BenchReport{Policy: name, Nodes: len(infos)}

	// Per call, through the host.
	engine, err := host.NewEngine(host.EngineOptions{CacheDir: cacheDir()})
	if err != nil {
		return err
	}
	defer engine.Close()
	reads := splitList(o.reads)
	report.Reads = reads
	hp, err := engine.NewPolicy(ctx, host.PolicySpec{Name: name, Config: o.config, Timeout: time.Second, MaxInstances: 1, Reads: reads})
	if err != nil {
		return err
	}
	defer hp.Close(ctx)
	start := time.Now()
	v, err := hp.Load(ctx, src, "")
	if err != nil {
		return err
	}
	report.Load, report.Exports = time.Since(start), v.Exports().String()
	prog := newProgress("benchmarking")
	total := o.iterations * len(infos) * 2
	done := 0
	for _, kind := range []host.CallKind{host.CallFilter, host.CallScore} {
		if (kind == host.CallFilter && !v.Exports().Has(host.CallFilter)) || (kind == host.CallScore && !v.Exports().Has(host.CallScore)) {
			continue
		}
		var lat []time.Duration
		var errs int
		var firstErr string
		for it := 0; it < o.iterations; it++ {
			ps := host.NewPodState(pod)
			if slices.Contains(reads, "Cluster") || slices.Contains(reads, "Namespaces") {
				// The cluster the plugin's cycle sees: these nodes.
				ps.Cluster = &host.ClusterView{Nodes: infos,
					NamespaceLabels:       func(string) (map[string]string, bool) { return nil, false },
					DefaultSpreadSelector: func(*v1.Pod) []metav1.LabelSelectorRequirement { return nil }}
			}
			var pc host.PolicyCycle
			for _, ni := range infos {
				t := time.Now()
				_, res, cerr := v.Call(ctx, kind, ps, ni, &pc, nil)
				if cerr != nil {
					prog.done()
					return fmt.Errorf("%s on %s: %v", kind, ni.Node().Name, cerr)
				}
				lat = append(lat, time.Since(t))
				if res.Code == abi.CodeError {
					if errs++; firstErr == "" {
						firstErr = res.Reason
					}
				}
				done++
				if done%1000 == 0 {
					prog.update(done, total)
				}
			}
		}
		r := summarize(kind.String()+" per call", lat)
		r.Errors, r.FirstError = errs, firstErr
		report.Results = append(report.Results, r)
	}

	// Whole cycles, through the plugin.
	pc := configv1.DefaultPolicy(name, config.Source{File: abs})
	pc.Config, pc.Timeout, pc.Reads = o.config, time.Second, reads
	args := &config.WasmPolicyArgs{MaxInstancesPerPolicy: 16, FilePollInterval: time.Hour, CompilationCacheDir: cacheDir(), Policies: []config.Policy{
		pc,
	}}
	plugin, err := loadPlugin(ctx, args, nil)
	if err != nil {
		return err
	}
	defer plugin.Close()
	schedmetrics.Register() // the parallelizer reports goroutine gauges
	par := parallelize.NewParallelizer(16)
	var cycles []time.Duration
	for it := 0; it < o.iterations; it++ {
		t := time.Now()
		state := intree.NewCycleState()
		p := pod.DeepCopy()
		p.UID = types.UID(fmt.Sprint("bench-", it))
		if _, st := plugin.PreFilter(ctx, state, p, infos); !st.IsSuccess() && !st.IsSkip() {
			return fmt.Errorf("PreFilter: %v", st.AsError())
		}
		feasible := make([]bool, len(infos))
		par.Until(ctx, len(infos), func(i int) {
			feasible[i] = plugin.Filter(ctx, state, p, infos[i]).IsSuccess()
		}, "bench")
		var ok []fwk.NodeInfo
		for i, f := range feasible {
			if f {
				ok = append(ok, infos[i])
			}
		}
		if len(ok) > 0 && plugin.PreScore(ctx, state, p, ok).IsSuccess() {
			list := make(framework.NodeScoreList, len(ok))
			var mu sync.Mutex
			par.Until(ctx, len(ok), func(i int) {
				s, _ := plugin.Score(ctx, state, p, ok[i])
				mu.Lock()
				list[i] = framework.NodeScore{Name: ok[i].Node().Name, Score: s}
				mu.Unlock()
			}, "bench")
			_ = plugin.NormalizeScore(ctx, state, p, list)
		}
		cycles = append(cycles, time.Since(t))
		done += 2 * len(infos)
		prog.update(min(done, total), total)
	}
	prog.done()
	cycle := summarize(fmt.Sprintf("cycle (%d nodes, parallelism 16)", len(infos)), cycles)
	report.Results = append(report.Results, cycle)
	report.Native = o.nativeReference(ctx, name, pod, infos, par, cycle)
	return print(cmd.OutOrStdout(), g.output, report, func(tw *tabwriter.Writer) {
		fmt.Fprintf(tw, "Policy %s (%s), %d nodes, load %s\n\n", report.Policy, report.Exports, report.Nodes, report.Load.Round(time.Millisecond))
		row(tw, "MEASURE", "CALLS", "MEAN", "P50", "P90", "P99", "MAX")
		for _, r := range report.Results {
			row(tw, r.Measure, r.Calls, dur(r.Mean), dur(r.P50), dur(r.P90), dur(r.P99), dur(r.Max))
		}
		for _, r := range report.Results {
			if r.Errors > 0 {
				fmt.Fprintf(tw, "\n%s: %d of %d calls ended in an Error, so their latency is the error path's: %s\n", r.Measure, r.Errors, r.Calls, r.FirstError)
			}
		}
		if n := report.Native; n.Cycle != nil {
			r := n.Cycle
			row(tw, r.Measure, r.Calls, dur(r.Mean), dur(r.P50), dur(r.P90), dur(r.P99), dur(r.Max))
			fmt.Fprintf(tw, "\nThe policy's cycle costs %.1f× the native %s's (mean %s against %s; %s against %s per node).\n",
				n.Ratio, n.Plugin, dur(cycle.Mean), dur(r.Mean), dur(cycle.Mean/time.Duration(len(infos))), dur(r.Mean/time.Duration(len(infos))))
		} else {
			fmt.Fprintf(tw, "\nNo native reference: %s\n", n.None)
		}
	})
}

// nativeReference runs the cycle of the policy's native twin, if it has
// one, over the same nodes and pod with the same parallelizer.
func (o *benchOptions) nativeReference(ctx context.Context, name string, pod *v1.Pod, infos []fwk.NodeInfo, par parallelize.Parallelizer, policyCycle BenchResult) NativeReference {
	which := o.native
	if which == "" {
		which = name
	}
	if which == "none" {
		return NativeReference{None: "--native none"}
	}
	twin, ok := nativeTwins[which]
	if !ok {
		return NativeReference{None: fmt.Sprintf("%s has no native twin here (internal/native has team-isolation and bin-packing, the example policies make bench compares); measure a policy of your own against its native version in a Go benchmark (docs/performance.md)", which)}
	}
	if !slices.Contains(twin.config, o.config) {
		return NativeReference{None: fmt.Sprintf("the native %s implements %s with config %q; the policy runs with %q", twin.plugin, which, twin.config[len(twin.config)-1], o.config)}
	}
	var cycles []time.Duration
	for it := 0; it < o.iterations; it++ {
		t := time.Now()
		feasible := make([]bool, len(infos))
		par.Until(ctx, len(infos), func(i int) {
			feasible[i] = twin.filter == nil || twin.filter(pod, infos[i]).IsSuccess()
		}, "bench")
		if twin.score != nil {
			scores := make([]int64, len(infos))
			par.Until(ctx, len(infos), func(i int) {
				if feasible[i] {
					scores[i] = twin.score(pod, infos[i])
				}
			}, "bench")
		}
		cycles = append(cycles, time.Since(t))
	}
	r := summarize(fmt.Sprintf("native %s cycle", twin.plugin), cycles)
	return NativeReference{Plugin: twin.plugin, Cycle: &r, Ratio: float64(policyCycle.Mean) / float64(max(r.Mean, 1))}
}

func summarize(name string, lat []time.Duration) BenchResult {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	q := func(f float64) time.Duration { return lat[min(len(lat)-1, int(f*float64(len(lat))))] }
	return BenchResult{Measure: name, Calls: len(lat), Mean: sum / time.Duration(len(lat)), P50: q(0.5), P90: q(0.9), P99: q(0.99), Max: lat[len(lat)-1]}
}
