// Package ports holds the differential test of the ports of kube-scheduler's
// default plugins (plugins-wasm/ports): each port runs inside WasmPolicy in
// one scheduler framework, the upstream plugin of the pinned
// k8s.io/kubernetes in another, over the same generated cluster, and every
// Filter code and every final normalized score must agree.
package ports

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/wasmsched/wasmsched/guest-sdk/casetest"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
	"github.com/wasmsched/wasmsched/pkg/casetable"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

func TestMain(m *testing.M) {
	klog.LogToStderr(false) // the host logs every module load
	klog.SetOutput(io.Discard)
	schedmetrics.Register()
	os.Exit(m.Run())
}

// port is one upstream plugin and its wasm port.
type port struct {
	name   string // the test's name, when not module
	plugin string // upstream plugin name
	module string // directory under plugins-wasm/ports
	// The upstream plugin's extension points, as in the default profile.
	preFilter, filter, preScore, score bool
	args                               runtime.Object // upstream args, nil if none
	reads                              []string
	config                             string // the port's config
}

func (p port) String() string {
	if p.name != "" {
		return p.name
	}
	return p.module
}

var ports = []port{
	{plugin: names.NodeUnschedulable, module: "nodeunschedulable", filter: true},
	{plugin: names.VolumeZone, module: "volumezone", preFilter: true, filter: true, reads: []string{"Volumes"}},
	{plugin: names.NodeName, module: "nodename", preFilter: true, filter: true},
	{plugin: names.TaintToleration, module: "tainttoleration", filter: true, preScore: true, score: true},
	{plugin: names.NodeAffinity, module: "nodeaffinity", preFilter: true, filter: true, preScore: true, score: true, args: &schedconfig.NodeAffinityArgs{}},
	{plugin: names.NodePorts, module: "nodeports", preFilter: true, filter: true, reads: []string{"NodePods"}},
	{plugin: names.NodeResourcesFit, module: "noderesourcesfit", preFilter: true, filter: true, args: fitArgs(schedconfig.LeastAllocated)},
	{name: "noderesourcesfit/LeastAllocated", plugin: names.NodeResourcesFit, module: "noderesourcesfit", preScore: true, score: true, args: fitArgs(schedconfig.LeastAllocated), config: "strategy=LeastAllocated"},
	{name: "noderesourcesfit/MostAllocated", plugin: names.NodeResourcesFit, module: "noderesourcesfit", preScore: true, score: true, args: fitArgs(schedconfig.MostAllocated), config: "strategy=MostAllocated"},
	{name: "noderesourcesfit/RequestedToCapacityRatio", plugin: names.NodeResourcesFit, module: "noderesourcesfit", preScore: true, score: true, args: fitArgs(schedconfig.RequestedToCapacityRatio), config: "strategy=RequestedToCapacityRatio"},
	{plugin: names.NodeResourcesBalancedAllocation, module: "balancedallocation", preScore: true, score: true,
		args: &schedconfig.NodeResourcesBalancedAllocationArgs{Resources: []schedconfig.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}}}},
	{plugin: names.ImageLocality, module: "imagelocality", score: true, reads: []string{"Cluster"}},
	{plugin: names.PodTopologySpread, module: "podtopologyspread", preFilter: true, filter: true, preScore: true, score: true, reads: []string{"Cluster"},
		args: &schedconfig.PodTopologySpreadArgs{DefaultingType: schedconfig.SystemDefaulting}},
	{plugin: names.InterPodAffinity, module: "interpodaffinity", preFilter: true, filter: true, preScore: true, score: true, reads: []string{"Cluster", "Namespaces"},
		args: &schedconfig.InterPodAffinityArgs{HardPodAffinityWeight: 1}},
}

// fitArgs are NodeResourcesFit's default args with a scoring strategy;
// RequestedToCapacityRatio gets the default shape (0→0, 100→10).
func fitArgs(strategy schedconfig.ScoringStrategyType) *schedconfig.NodeResourcesFitArgs {
	s := &schedconfig.ScoringStrategy{Type: strategy, Resources: []schedconfig.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}}}
	if strategy == schedconfig.RequestedToCapacityRatio {
		s.RequestedToCapacityRatio = &schedconfig.RequestedToCapacityRatioParam{Shape: []schedconfig.UtilizationShapePoint{{Utilization: 0, Score: 0}, {Utilization: 100, Score: 10}}}
	}
	return &schedconfig.NodeResourcesFitArgs{ScoringStrategy: s}
}

// Sizes: pods × nodes pairs per cluster; clusters per port, at least
// minClusters and more (up to maxClusters) until minPairs pairs were
// compared at each of the port's extension points.
const (
	clusterNodes = 40
	clusterPods  = 50
	minClusters  = 6
	maxClusters  = 20
	minPairs     = 10000
)

// TestPortsMatchUpstream is the differential test: for every port, every
// generated pod on every generated node gets the same Filter code from the
// port as from the upstream plugin (after PreFilter and its node subset, as
// the scheduler runs them), and every node both find feasible the same
// final score (after NormalizeScore). Both toolchains.
func TestPortsMatchUpstream(t *testing.T) {
	for _, tc := range testguests.Toolchains {
		for _, p := range ports {
			t.Run(string(tc)+"/"+p.String(), func(t *testing.T) {
				module, err := testguests.Build(tc, filepath.Join("plugins-wasm", "ports", p.module))
				if err != nil {
					t.Fatal(err)
				}
				var st stats
				r := rand.New(rand.NewPCG(uint64(len(p.module)), 2026))
				// At least minClusters; more while the pairs an extension
				// point needs are short (Score sees only feasible nodes).
				for c := 0; c < minClusters || (c < maxClusters && (st.filterPairs < minPairs || (p.score && st.scorePairs < minPairs))); c++ {
					generated, existing := generateNodes(r, clusterNodes)
					snapshot, nodes := snapshotOf(generated, existing)
					objects := append(spreadObjects(r), volumeObjects(r)...)
					upstream := newFramework(t, p, "", snapshot, objects)
					wasm := newFramework(t, p, module, snapshot, objects)
					st.mix.nodes(nodes)
					for i := range clusterPods {
						pod := generatePod(r, fmt.Sprintf("p%d", i), nodes)
						st.mix.pod(pod)
						want := runCycle(t, upstream, pod, nodes)
						got := runCycle(t, wasm, pod, nodes)
						st.compare(t, pod, want, got)
					}
				}
				t.Logf("%s (%s) vs upstream %s: %s\n  generated: %s", p, tc, p.plugin, st.summary(p.score), st.mix)
				if p.filter && st.filterPairs < minPairs {
					t.Errorf("only %d Filter pairs; the acceptance asks for %d", st.filterPairs, minPairs)
				}
				if p.score && st.scorePairs < minPairs {
					t.Errorf("only %d scored pairs; the acceptance asks for %d", st.scorePairs, minPairs)
				}
			})
		}
	}
}

// outcome is one pod's cycle: each node's Filter code, and the final score
// of each feasible node (absent when not scored).
type outcome struct {
	codes  []fwk.Code
	scores map[string]int64
	scored bool
	// failed is PreScore's or Score's code when one of them failed the
	// cycle (upstream's NodeAffinity on a preferred term it cannot parse).
	failed fwk.Code
}

// runCycle runs PreFilter, Filter on every node (nodes outside PreFilter's
// node subset fail as UnschedulableAndUnresolvable, as in the scheduler),
// then PreScore, Score and NormalizeScore on the feasible nodes.
func runCycle(t testing.TB, fw intree.Framework, pod *v1.Pod, infos []fwk.NodeInfo) outcome {
	t.Helper()
	ctx := context.Background()
	state := intree.NewCycleState()
	out := outcome{codes: make([]fwk.Code, len(infos)), scores: map[string]int64{}}
	res, st, _ := fw.RunPreFilterPlugins(ctx, state, pod)
	var feasible []fwk.NodeInfo
	for i, ni := range infos {
		switch {
		case !st.IsSuccess():
			out.codes[i] = st.Code()
		case res != nil && !res.AllNodes() && !res.NodeNames.Has(ni.Node().Name):
			out.codes[i] = fwk.UnschedulableAndUnresolvable
		default:
			out.codes[i] = fw.RunFilterPlugins(ctx, state, pod, ni).Code()
		}
		if out.codes[i] == fwk.Success {
			feasible = append(feasible, ni)
		}
	}
	if len(feasible) == 0 {
		return out
	}
	if st := fw.RunPreScorePlugins(ctx, state, pod, feasible); !st.IsSuccess() {
		if st.IsSkip() {
			return out
		}
		out.failed = st.Code()
		return out
	}
	scores, st2 := fw.RunScorePlugins(ctx, state, pod, feasible)
	if !st2.IsSuccess() {
		out.failed = st2.Code()
		return out
	}
	out.scored = true
	for _, s := range scores {
		out.scores[s.Name] = s.TotalScore
	}
	return out
}

// stats counts what the differential test compared.
type stats struct {
	filterPairs, scorePairs, rejected, scoredPods, disagreements int
	// failedCycles are pods whose PreScore or Score failed on both sides.
	failedCycles int
	// rankedPods are scored pods whose nodes did not all score the same
	// (upstream's scores), the cases where a score decides anything.
	rankedPods int
	mix        mix
}

// mix counts what the generated clusters held, for the test's log: how
// many pods and nodes had each feature the ports read.
type mix map[string]int

func (m *mix) add(feature string, has bool) {
	if *m == nil {
		*m = mix{}
	}
	if has {
		(*m)[feature]++
	}
}

func (m *mix) nodes(infos []fwk.NodeInfo) {
	for _, ni := range infos {
		n := ni.Node()
		m.add("nodes", true)
		m.add("nodes cordoned", n.Spec.Unschedulable)
		m.add("nodes tainted", len(n.Spec.Taints) > 0)
		m.add("nodes running pods", len(ni.GetPods()) > 0)
		_, hasMem := n.Status.Allocatable[v1.ResourceMemory]
		m.add("nodes without memory", !hasMem)
		m.add("nodes with images", len(n.Status.Images) > 0)
		(*m)["running pods"] += len(ni.GetPods()) // the map exists: add("nodes") made it
		for _, p := range ni.GetPods() {
			m.add("running pods terminating", p.GetPod().DeletionTimestamp != nil)
			m.add("running pods with pod (anti-)affinity", p.GetPod().Spec.Affinity != nil)
			m.add("running pods in a namespace the lister lacks", p.GetPod().Namespace == "ghost")
		}
	}
}

func (m *mix) pod(pod *v1.Pod) {
	m.add("pods", true)
	m.add("with tolerations", len(pod.Spec.Tolerations) > 0)
	m.add("with nodeName", pod.Spec.NodeName != "")
	m.add("with nodeSelector", len(pod.Spec.NodeSelector) > 0)
	a := pod.Spec.Affinity
	m.add("with required node affinity", a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil)
	m.add("with preferred node affinity", a != nil && a.NodeAffinity != nil && len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0)
	m.add("with an unparsable preferred node term", a != nil && a.NodeAffinity != nil && slices.ContainsFunc(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
		func(p v1.PreferredSchedulingTerm) bool {
			_, err := nodeaffinity.NewPreferredSchedulingTerms([]v1.PreferredSchedulingTerm{p})
			return err != nil
		}))
	subMilli := false
	for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
		q := c.Resources.Requests[v1.ResourceCPU]
		subMilli = subMilli || q.MilliValue()*1000 != q.ScaledValue(-6)
	}
	q := pod.Spec.Overhead[v1.ResourceCPU]
	subMilli = subMilli || q.MilliValue()*1000 != q.ScaledValue(-6)
	m.add("with sub-millicore cpu", subMilli)
	m.add("with init containers", len(pod.Spec.InitContainers) > 0)
	m.add("with sidecars", slices.ContainsFunc(pod.Spec.InitContainers, func(c v1.Container) bool { return c.RestartPolicy != nil }))
	m.add("with overhead", pod.Spec.Overhead != nil)
	m.add("with pod-level resources", pod.Spec.Resources != nil)
	m.add("with image volumes", slices.ContainsFunc(pod.Spec.Volumes, func(v v1.Volume) bool { return v.Image != nil }))
	m.add("with claims", slices.ContainsFunc(pod.Spec.Volumes, func(v v1.Volume) bool { return v.PersistentVolumeClaim != nil }))
	m.add("with spread constraints", len(pod.Spec.TopologySpreadConstraints) > 0)
	m.add("with a controller", len(pod.OwnerReferences) > 0)
	m.add("with required pod affinity", a != nil && a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0)
	m.add("with required pod anti-affinity", a != nil && a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0)
	m.add("with preferred pod (anti-)affinity", a != nil && ((a.PodAffinity != nil && len(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0) ||
		(a.PodAntiAffinity != nil && len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0)))
	hostPort := false
	for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
		for _, p := range c.Ports {
			hostPort = hostPort || p.HostPort > 0
		}
	}
	m.add("with host ports", hostPort)
}

func (m mix) String() string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
	}
	return strings.Join(parts, ", ")
}

func (s *stats) compare(t *testing.T, pod *v1.Pod, want, got outcome) {
	t.Helper()
	for i := range want.codes {
		s.filterPairs++
		if want.codes[i] != fwk.Success {
			s.rejected++
		}
		if got.codes[i] != want.codes[i] {
			s.disagreements++
			if s.disagreements <= 5 {
				t.Errorf("pod %s on node %d: port gives %v, upstream %v\npod: %s", pod.Name, i, got.codes[i], want.codes[i], describe(pod))
			}
		}
	}
	if want.failed != got.failed {
		s.disagreements++
		t.Errorf("pod %s: port's PreScore/Score gives %v, upstream's %v\npod: %s", pod.Name, got.failed, want.failed, describe(pod))
	} else if want.failed != fwk.Success {
		s.failedCycles++ // both failed the cycle: one agreeing pair
		s.scorePairs++
	}
	if want.scored {
		s.scoredPods++
		distinct := map[int64]bool{}
		for _, v := range want.scores {
			distinct[v] = true
		}
		if len(distinct) > 1 {
			s.rankedPods++
		}
	}
	for name, w := range want.scores {
		s.scorePairs++
		if g, ok := got.scores[name]; !ok || g != w {
			s.disagreements++
			if s.disagreements <= 5 {
				t.Errorf("pod %s on node %s: port scores %d (scored: %v), upstream %d\npod: %s", pod.Name, name, g, ok, w, describe(pod))
			}
		}
	}
	if len(got.scores) != len(want.scores) {
		s.disagreements++
		t.Errorf("pod %s: port scored %d nodes, upstream %d", pod.Name, len(got.scores), len(want.scores))
	}
}

// summary says what was compared; scored pairs only for a port that
// scores (without a Score plugin every feasible node scores 0 on both sides).
func (s *stats) summary(score bool) string {
	n := s.filterPairs
	scored := ""
	if score {
		n += s.scorePairs
		scored = fmt.Sprintf(", %d scored pairs over %d scored pods (%d with nodes scored differently)", s.scorePairs, s.scoredPods, s.rankedPods)
		if s.failedCycles > 0 {
			scored += fmt.Sprintf(", %d cycles failed in PreScore or Score on both sides", s.failedCycles)
		}
	}
	pct := 100.0
	if n > 0 {
		pct = 100 * float64(n-s.disagreements) / float64(n)
	}
	return fmt.Sprintf("%d Filter pairs (%d rejected)%s: %.2f%% agreement, %d disagreements",
		s.filterPairs, s.rejected, scored, pct, s.disagreements)
}

func describe(pod *v1.Pod) string {
	var cs []string
	for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
		cs = append(cs, fmt.Sprintf("%s(image=%s sidecar=%v requests=%v ports=%v)", c.Name, c.Image, c.RestartPolicy != nil, c.Resources.Requests, c.Ports))
	}
	return fmt.Sprintf("namespace=%s labels=%v owners=%v nodeName=%q nodeSelector=%v affinity=%+v tolerations=%+v containers=%v overhead=%v resources=%v spread=%+v",
		pod.Namespace, pod.Labels, pod.OwnerReferences, pod.Spec.NodeName, pod.Spec.NodeSelector, pod.Spec.Affinity, pod.Spec.Tolerations, cs, pod.Spec.Overhead, pod.Spec.Resources, pod.Spec.TopologySpreadConstraints)
}

// newFramework builds a framework over a snapshot of the cluster with one
// plugin at the port's extension points: the upstream plugin (module ""),
// or WasmPolicy running the port module.
func newFramework(t testing.TB, p port, module string, snapshot *cache.Snapshot, objects []runtime.Object) intree.Framework {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	registry := plugins.NewInTreeRegistry()
	registry[wasmpolicy.Name] = wasmpolicy.New
	profile := &schedconfig.KubeSchedulerProfile{SchedulerName: "ports", Plugins: &schedconfig.Plugins{
		QueueSort: schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: queuesort.Name}}},
		Bind:      schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: defaultbinder.Name}}},
	}}
	name := p.plugin
	if module != "" {
		name = wasmpolicy.Name
		pc := configv1.DefaultPolicy(p.module, config.Source{File: module})
		pc.Timeout, pc.Reads, pc.Config = 5*time.Second, p.reads, p.config
		profile.PluginConfig = append(profile.PluginConfig, schedconfig.PluginConfig{Name: wasmpolicy.Name, Args: &config.WasmPolicyArgs{
			MaxInstancesPerPolicy: 4, FilePollInterval: time.Hour, CompilationCacheDir: filepath.Join(t.TempDir(), "cache"), Policies: []config.Policy{pc},
		}})
	} else if p.args != nil {
		profile.PluginConfig = append(profile.PluginConfig, schedconfig.PluginConfig{Name: p.plugin, Args: p.args})
	}
	set := schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: name}}}
	pl := profile.Plugins
	if p.preFilter || module != "" {
		pl.PreFilter = set
	}
	if p.filter {
		pl.Filter = set
	}
	if p.preScore || (module != "" && p.score) {
		pl.PreScore = set
	}
	if p.score {
		pl.Score = schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: name, Weight: 1}}}
	}
	client := fake.NewClientset(objects...)
	informerFactory := informers.NewSharedInformerFactory(client, 0)
	fw, err := frameworkruntime.NewFramework(ctx, registry, profile,
		frameworkruntime.WithClientSet(client),
		frameworkruntime.WithInformerFactory(informerFactory),
		frameworkruntime.WithSnapshotSharedLister(snapshot),
		frameworkruntime.WithParallelism(2),
	)
	if err != nil {
		t.Fatal(err)
	}
	// The Services and controllers the default spread constraints read.
	informerFactory.Start(ctx.Done())
	informerFactory.WaitForCacheSync(ctx.Done())
	t.Cleanup(func() { _ = fw.Close() })
	return fw
}

// snapshotOf is the scheduler's snapshot of a generated cluster (both
// frameworks read it), and its NodeInfos in the generated order: they, not
// the generated ones, carry what the snapshot adds, such as image states.
func snapshotOf(infos []fwk.NodeInfo, existing []*v1.Pod) (*cache.Snapshot, []fwk.NodeInfo) {
	var nodes []*v1.Node
	for _, ni := range infos {
		nodes = append(nodes, ni.Node())
	}
	snapshot := cache.NewSnapshot(existing, nodes)
	out := make([]fwk.NodeInfo, len(nodes))
	for i, n := range nodes {
		ni, err := snapshot.NodeInfos().Get(n.Name)
		if err != nil {
			panic(err)
		}
		out[i] = ni
	}
	return snapshot, out
}

// The ports directory and this test list the same ports.
func TestEveryPortIsTested(t *testing.T) {
	root, err := testguests.Root()
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := filepath.Glob(filepath.Join(root, "plugins-wasm", "ports", "*", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	var have, tested []string
	for _, d := range dirs {
		have = append(have, filepath.Base(filepath.Dir(d)))
	}
	for _, p := range ports {
		tested = append(tested, p.module)
	}
	slices.Sort(have)
	slices.Sort(tested)
	tested = slices.Compact(tested)
	if strings.Join(have, ",") != strings.Join(tested, ",") {
		t.Fatalf("ports in plugins-wasm/ports: %v; tested: %v", have, tested)
	}
}

// The ports' case tables (plugins-wasm/ports/*/testdata.json, run natively
// by each port's go test) hold for the compiled ports too, both
// toolchains: several nodes per case, prefilter subsets and NormalizeScore
// through the host as the scheduler runs them.
func TestPortCaseTables(t *testing.T) {
	root, err := testguests.Root()
	if err != nil {
		t.Fatal(err)
	}
	tables, err := filepath.Glob(filepath.Join(root, "plugins-wasm", "ports", "*", "testdata.json"))
	if err != nil || len(tables) == 0 {
		t.Fatalf("no case tables under plugins-wasm/ports (%v)", err)
	}
	engine, err := host.NewEngine(host.EngineOptions{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close()
	for _, tc := range testguests.Toolchains {
		for _, table := range tables {
			name := filepath.Base(filepath.Dir(table))
			t.Run(string(tc)+"/"+name, func(t *testing.T) {
				file, err := casetest.Load(table)
				if err != nil {
					t.Fatal(err)
				}
				module, err := testguests.Build(tc, filepath.Join("plugins-wasm", "ports", name))
				if err != nil {
					t.Fatal(err)
				}
				wasm, err := os.ReadFile(module)
				if err != nil {
					t.Fatal(err)
				}
				r, err := casetable.RunModule(context.Background(), engine, host.PolicySpec{Name: name, Timeout: time.Second, MaxInstances: 2}, wasm, file)
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range r.Failures() {
					t.Error(f)
				}
				t.Log(r.Summary())
			})
		}
	}
}
