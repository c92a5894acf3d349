package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
)

type benchOptions struct {
	nodes      int
	iterations int
	pod        string
	config     string
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
}

// BenchReport is the result of wasmsched bench.
type BenchReport struct {
	Policy  string        `json:"policy"`
	Nodes   int           `json:"nodes"`
	Exports string        `json:"exports"`
	Load    time.Duration `json:"load"`
	Results []BenchResult `json:"results"`
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
nodes of the cluster in --kubeconfig.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd, g, args[0])
		},
	}
	cmd.Flags().IntVar(&o.nodes, "nodes", 1000, "number of synthetic nodes")
	cmd.Flags().IntVar(&o.iterations, "iterations", 20, "passes over the nodes")
	cmd.Flags().StringVar(&o.pod, "pod", "", "the pod to place (default: a 500m pod labelled team=a)")
	cmd.Flags().StringVar(&o.config, "config", "", "the policy's config string")
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
	hp, err := engine.NewPolicy(ctx, host.PolicySpec{Name: name, Config: o.config, Timeout: time.Second, MaxInstances: 1})
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
		for it := 0; it < o.iterations; it++ {
			ps := host.NewPodState(pod)
			var pc host.PolicyCycle
			for _, ni := range infos {
				t := time.Now()
				if _, _, cerr := v.Call(ctx, kind, ps, ni, &pc, nil); cerr != nil {
					prog.done()
					return fmt.Errorf("%s on %s: %v", kind, ni.Node().Name, cerr)
				}
				lat = append(lat, time.Since(t))
				done++
				if done%1000 == 0 {
					prog.update(done, total)
				}
			}
		}
		report.Results = append(report.Results, summarize(kind.String()+" per call", lat))
	}

	// Whole cycles, through the plugin.
	pc := configv1.DefaultPolicy(name, config.Source{File: abs})
	pc.Config, pc.Timeout = o.config, time.Second
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
	report.Results = append(report.Results, summarize(fmt.Sprintf("cycle (%d nodes, parallelism 16)", len(infos)), cycles))
	return print(cmd.OutOrStdout(), g.output, report, func(tw *tabwriter.Writer) {
		fmt.Fprintf(tw, "Policy %s (%s), %d nodes, load %s\n\n", report.Policy, report.Exports, report.Nodes, report.Load.Round(time.Millisecond))
		row(tw, "MEASURE", "CALLS", "MEAN", "P50", "P90", "P99", "MAX")
		for _, r := range report.Results {
			row(tw, r.Measure, r.Calls, dur(r.Mean), dur(r.P50), dur(r.P90), dur(r.P99), dur(r.Max))
		}
	})
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
