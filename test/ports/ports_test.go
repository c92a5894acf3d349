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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
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
	"k8s.io/utils/ptr"

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
					objects := spreadObjects(r)
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
		t.Fatalf("PreScore of %s: %v", pod.Name, st.AsError())
	}
	scores, st2 := fw.RunScorePlugins(ctx, state, pod, feasible)
	if !st2.IsSuccess() {
		t.Fatalf("Score of %s: %v", pod.Name, st2.AsError())
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
	m.add("with init containers", len(pod.Spec.InitContainers) > 0)
	m.add("with sidecars", slices.ContainsFunc(pod.Spec.InitContainers, func(c v1.Container) bool { return c.RestartPolicy != nil }))
	m.add("with overhead", pod.Spec.Overhead != nil)
	m.add("with pod-level resources", pod.Spec.Resources != nil)
	m.add("with image volumes", len(pod.Spec.Volumes) > 0)
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

// The generated clusters draw from small sets so that matches and misses
// both happen often.
var (
	taintKeys   = []string{"dedicated", "gpu", "node.kubernetes.io/unschedulable", "spot"}
	taintValues = []string{"", "a", "b"}
	effects     = []v1.TaintEffect{v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute}
	labelKeys   = []string{"zone", "disk", "size", "team"}
	labelValues = []string{"a", "b", "ssd", "1", "3", "10", ""}
)

// generateNodes makes n nodes with random labels, taints and cordons, and
// some running pods that use host ports.
func generateNodes(r *rand.Rand, n int) ([]fwk.NodeInfo, []*v1.Pod) {
	var infos []fwk.NodeInfo
	var all []*v1.Pod
	for i := range n {
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i), Labels: map[string]string{}}}
		for _, k := range labelKeys {
			if r.IntN(3) > 0 {
				node.Labels[k] = labelValues[r.IntN(len(labelValues))]
			}
		}
		// The spread ports' topology: usually a hostname and a zone (of
		// three, or ""), sometimes neither.
		if r.IntN(8) > 0 {
			node.Labels[v1.LabelHostname] = node.Name
		}
		if r.IntN(6) > 0 {
			node.Labels[v1.LabelTopologyZone] = zones[r.IntN(len(zones))]
		}
		node.Spec.Unschedulable = r.IntN(5) == 0
		node.Status.Allocatable = v1.ResourceList{}
		for _, name := range sortedNames(nodeResources) { // sorted: the same seed gives the same cluster
			values := nodeResources[name]
			if v := values[r.IntN(len(values))]; v != "" {
				node.Status.Allocatable[name] = resource.MustParse(v)
			}
		}
		node.Status.Capacity = node.Status.Allocatable
		for range r.IntN(5) {
			im := v1.ContainerImage{Names: []string{nodeImages[r.IntN(len(nodeImages))]}, SizeBytes: imageSizes[r.IntN(len(imageSizes))]}
			if r.IntN(3) == 0 { // a second name (a digest or another tag) for the same image
				im.Names = append(im.Names, nodeImages[r.IntN(len(nodeImages))])
			}
			node.Status.Images = append(node.Status.Images, im)
		}
		for range r.IntN(4) {
			node.Spec.Taints = append(node.Spec.Taints, v1.Taint{Key: taintKeys[r.IntN(len(taintKeys))], Value: taintValues[r.IntN(len(taintValues))], Effect: effects[r.IntN(len(effects))]})
		}
		var pods []*v1.Pod
		for j := range r.IntN(3) {
			p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("run-%d-%d", i, j), Namespace: namespaces[r.IntN(len(namespaces))],
				UID: types.UID(fmt.Sprintf("u-%d-%d", i, j)), Labels: randomLabels(r)}, Spec: v1.PodSpec{NodeName: node.Name}}
			if r.IntN(10) == 0 {
				p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1700000000, 0)}
			}
			if r.IntN(3) == 0 {
				p.Spec.Affinity = podAffinity(r, &v1.Affinity{})
			}
			p.Spec.Containers = []v1.Container{{Name: "c", Ports: randomPorts(r), Resources: v1.ResourceRequirements{Requests: randomRequests(r)}}}
			pods = append(pods, p)
		}
		ni := intree.NewNodeInfo(pods...)
		ni.SetNode(node)
		infos = append(infos, ni)
		all = append(all, pods...)
	}
	return infos, all
}

// generatePod makes a pod with random tolerations (every operator and
// effect, empty keys), containers and init containers (sidecars or not)
// with host ports, sometimes a nodeName (of a node or of none), a
// nodeSelector, and required and preferred node affinity of every
// operator, matchFields included; always valid as the API server would
// accept it.
func generatePod(r *rand.Rand, name string, nodes []fwk.NodeInfo) *v1.Pod {
	pod := spreadPod(r, name)
	pod.UID = types.UID("uid-" + name)
	if r.IntN(2) == 0 {
		for range 1 + r.IntN(2) {
			pod.Spec.TopologySpreadConstraints = append(pod.Spec.TopologySpreadConstraints, spreadConstraint(r))
		}
	}
	for range r.IntN(4) {
		tol := v1.Toleration{Key: taintKeys[r.IntN(len(taintKeys))], Value: taintValues[r.IntN(len(taintValues))]}
		switch r.IntN(4) {
		case 0:
			tol.Operator = v1.TolerationOpExists
			tol.Value = ""
			if r.IntN(3) == 0 {
				tol.Key = "" // tolerates every key
			}
		case 1:
			tol.Operator = v1.TolerationOpEqual
		case 2: // "" means Equal
		case 3:
			tol.Operator = v1.TolerationOpExists
			tol.Value = ""
		}
		if r.IntN(3) > 0 {
			tol.Effect = effects[r.IntN(len(effects))]
		}
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, tol)
	}
	for i := range 1 + r.IntN(2) {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: fmt.Sprint("app", i), Image: podImages[r.IntN(len(podImages))], Ports: randomPorts(r), Resources: v1.ResourceRequirements{Requests: randomRequests(r)}})
	}
	for i := range r.IntN(3) / 2 { // an image volume in one pod of three
		pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: fmt.Sprint("image", i), VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: podImages[r.IntN(len(podImages))]}}})
	}
	if r.IntN(4) == 0 {
		pod.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")}
	}
	if r.IntN(8) == 0 {
		pod.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("3"), v1.ResourceMemory: resource.MustParse("6Gi")}}
	}
	if r.IntN(3) == 0 {
		c := v1.Container{Name: "init", Image: podImages[r.IntN(len(podImages))], Ports: randomPorts(r), Resources: v1.ResourceRequirements{Requests: randomRequests(r)}}
		if r.IntN(2) == 0 {
			always := v1.ContainerRestartPolicyAlways // a sidecar: its ports count
			c.RestartPolicy = &always
		}
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
	}
	switch r.IntN(10) {
	case 0:
		pod.Spec.NodeName = nodes[r.IntN(len(nodes))].Node().Name
	case 1:
		pod.Spec.NodeName = "node-gone"
	}
	if r.IntN(3) == 0 {
		pod.Spec.NodeSelector = map[string]string{}
		for range r.IntN(3) {
			pod.Spec.NodeSelector[labelKeys[r.IntN(len(labelKeys))]] = labelValues[r.IntN(len(labelValues))]
		}
	}
	if r.IntN(2) == 0 {
		na := &v1.NodeAffinity{}
		if r.IntN(2) == 0 {
			na.RequiredDuringSchedulingIgnoredDuringExecution = &v1.NodeSelector{}
			for range 1 + r.IntN(3) {
				na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = append(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms, nodeTerm(r, nodes))
			}
		}
		if r.IntN(2) == 0 {
			for range 1 + r.IntN(3) {
				na.PreferredDuringSchedulingIgnoredDuringExecution = append(na.PreferredDuringSchedulingIgnoredDuringExecution,
					v1.PreferredSchedulingTerm{Weight: int32(1 + r.IntN(100)), Preference: nodeTerm(r, nodes)})
			}
		}
		pod.Spec.Affinity = &v1.Affinity{NodeAffinity: na}
	}
	if r.IntN(2) == 0 {
		if pod.Spec.Affinity == nil {
			pod.Spec.Affinity = &v1.Affinity{}
		}
		podAffinity(r, pod.Spec.Affinity)
		if r.IntN(4) == 0 {
			// The first pod of a group: it selects itself alone, which
			// upstream lets start a domain.
			pod.Labels["group"] = name
			t := podAffinityTerm(r)
			t.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"group": name}}
			pa := pod.Spec.Affinity.PodAffinity
			pa.RequiredDuringSchedulingIgnoredDuringExecution = append(pa.RequiredDuringSchedulingIgnoredDuringExecution, t)
		}
	}
	return pod
}

// podAffinity adds random pod affinity and anti-affinity terms, required
// and preferred, to a.
func podAffinity(r *rand.Rand, a *v1.Affinity) *v1.Affinity {
	a.PodAffinity, a.PodAntiAffinity = &v1.PodAffinity{}, &v1.PodAntiAffinity{}
	if r.IntN(3) == 0 {
		for range 1 + r.IntN(2) {
			a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, podAffinityTerm(r))
		}
	}
	if r.IntN(3) == 0 {
		a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, podAffinityTerm(r))
	}
	for range r.IntN(3) {
		a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
			v1.WeightedPodAffinityTerm{Weight: int32(1 + r.IntN(100)), PodAffinityTerm: podAffinityTerm(r)})
	}
	for range r.IntN(3) {
		a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
			v1.WeightedPodAffinityTerm{Weight: int32(1 + r.IntN(100)), PodAffinityTerm: podAffinityTerm(r)})
	}
	return a
}

// podAffinityTerm is a valid pod affinity term: on the hostname, the zone
// or another node label; a nil, empty or random selector; the pod's own
// namespace, a list, an empty namespace selector (every namespace) or one
// that selects by labels.
func podAffinityTerm(r *rand.Rand) v1.PodAffinityTerm {
	t := v1.PodAffinityTerm{TopologyKey: []string{v1.LabelHostname, v1.LabelTopologyZone, v1.LabelTopologyZone, "disk"}[r.IntN(4)]}
	switch r.IntN(6) {
	case 0: // nil: matches nothing
	case 1:
		t.LabelSelector = &metav1.LabelSelector{}
	default:
		t.LabelSelector = randomLabelSelector(r)
	}
	switch r.IntN(6) {
	case 1:
		t.Namespaces = []string{"other"}
	case 2:
		t.NamespaceSelector = &metav1.LabelSelector{}
	case 3:
		t.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	case 4:
		t.Namespaces = []string{"default"}
		t.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"b"}}}}
	}
	return t
}

// zones are the values of topology.kubernetes.io/zone; namespaces those
// of the running pods (the scheduled pods' are spreadPod's).
var (
	zones      = []string{"zone-a", "zone-b", "zone-c", ""}
	namespaces = []string{"default", "default", "other"}
)

// spreadConstraint is a valid topology spread constraint: on the hostname,
// the zone or another node label, either action, any maxSkew, selector
// (nil, empty or random), minDomains, node inclusion policy and
// matchLabelKeys.
func spreadConstraint(r *rand.Rand) v1.TopologySpreadConstraint {
	c := v1.TopologySpreadConstraint{
		MaxSkew:           int32(1 + r.IntN(3)),
		TopologyKey:       []string{v1.LabelHostname, v1.LabelTopologyZone, v1.LabelTopologyZone, "disk"}[r.IntN(4)],
		WhenUnsatisfiable: []v1.UnsatisfiableConstraintAction{v1.DoNotSchedule, v1.ScheduleAnyway}[r.IntN(2)],
	}
	switch r.IntN(6) {
	case 0: // nil: matches nothing
	case 1:
		c.LabelSelector = &metav1.LabelSelector{}
	default:
		c.LabelSelector = randomLabelSelector(r)
	}
	if c.WhenUnsatisfiable == v1.DoNotSchedule && r.IntN(4) == 0 {
		c.MinDomains = ptr.To(int32(1 + r.IntN(4)))
	}
	policies := []v1.NodeInclusionPolicy{v1.NodeInclusionPolicyHonor, v1.NodeInclusionPolicyIgnore}
	if r.IntN(3) == 0 {
		c.NodeAffinityPolicy = &policies[r.IntN(2)]
	}
	if r.IntN(3) == 0 {
		c.NodeTaintsPolicy = &policies[r.IntN(2)]
	}
	if c.LabelSelector != nil && r.IntN(4) == 0 {
		c.MatchLabelKeys = []string{spreadKeys[r.IntN(len(spreadKeys))]}
	}
	return c
}

// nodeImages are the names a node reports its images by (the runtime's
// normalized names), imageSizes their sizes: below ImageLocality's 23 MiB
// floor, inside its range and above 1000 MiB. podImages are what pods ask
// for: with and without a tag, with a registry port, one that no node
// holds.
var (
	nodeImages = []string{"nginx:latest", "nginx:1.27", "docker.io/library/nginx:latest", "registry.local:5000/app:latest",
		"registry.local:5000/app:v2", "busybox:latest", "ml/model:v1", "ml/model@sha256:0f3c"}
	imageSizes = []int64{5 << 20, 60 << 20, 300 << 20, 800 << 20, 3 << 30}
	podImages  = []string{"nginx", "nginx:latest", "nginx:1.27", "docker.io/library/nginx", "registry.local:5000/app",
		"registry.local:5000/app:v2", "busybox", "ml/model:v1", "ml/model@sha256:0f3c", "absent:1"}
)

// nodeResources are the values a node's allocatable takes per resource;
// "" leaves the resource out (the node does not report it).
var nodeResources = map[v1.ResourceName][]string{
	v1.ResourceCPU:              {"2", "4", "8", "16"},
	v1.ResourceMemory:           {"4Gi", "16Gi", "64Gi", ""},
	v1.ResourcePods:             {"2", "3", "110", "110"},
	v1.ResourceEphemeralStorage: {"10Gi", "50Gi", ""},
	"example.com/gpu":           {"0", "2", ""},
	"hugepages-2Mi":             {"1Gi", ""},
}

// containerRequests are the values a container's request takes per
// resource; "" leaves the resource out.
var containerRequests = map[v1.ResourceName][]string{
	v1.ResourceCPU:              {"", "0", "500m", "1", "2", "5"},
	v1.ResourceMemory:           {"", "0", "1Gi", "3Gi", "20Gi"},
	v1.ResourceEphemeralStorage: {"", "", "1Gi", "20Gi"},
	"example.com/gpu":           {"", "", "", "1", "3"},
	"hugepages-2Mi":             {"", "", "", "512Mi"},
}

// sortedNames are a resource map's keys in order, so that generation does
// not depend on map iteration.
func sortedNames[V any](m map[v1.ResourceName]V) []v1.ResourceName {
	names := make([]v1.ResourceName, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// randomRequests are a container's requests: missing, explicit 0, or
// amounts that fit some nodes and not others.
func randomRequests(r *rand.Rand) v1.ResourceList {
	rl := v1.ResourceList{}
	for _, name := range sortedNames(containerRequests) {
		values := containerRequests[name]
		if v := values[r.IntN(len(values))]; v != "" {
			rl[name] = resource.MustParse(v)
		}
	}
	return rl
}

// randomPorts are a container's ports: often without a host port, else one
// of a few host ports on no IP, 0.0.0.0 or one of two IPs, with or without
// a protocol.
func randomPorts(r *rand.Rand) []v1.ContainerPort {
	var ps []v1.ContainerPort
	for i := range r.IntN(3) {
		p := v1.ContainerPort{ContainerPort: int32(8000 + i)}
		if r.IntN(3) > 0 {
			p.HostPort = []int32{80, 443, 8080}[r.IntN(3)]
			p.HostIP = []string{"", "0.0.0.0", "10.0.0.1", "10.0.0.2"}[r.IntN(4)]
			p.Protocol = []v1.Protocol{"", v1.ProtocolTCP, v1.ProtocolUDP}[r.IntN(3)]
		}
		ps = append(ps, p)
	}
	return ps
}

func nodeTerm(r *rand.Rand, nodes []fwk.NodeInfo) v1.NodeSelectorTerm {
	var t v1.NodeSelectorTerm
	for range r.IntN(3) {
		req := v1.NodeSelectorRequirement{Key: labelKeys[r.IntN(len(labelKeys))]}
		switch op := r.IntN(6); op {
		case 0, 1:
			req.Operator = []v1.NodeSelectorOperator{v1.NodeSelectorOpIn, v1.NodeSelectorOpNotIn}[op]
			for range 1 + r.IntN(2) {
				req.Values = append(req.Values, labelValues[r.IntN(len(labelValues))])
			}
		case 2:
			req.Operator = v1.NodeSelectorOpExists
		case 3:
			req.Operator = v1.NodeSelectorOpDoesNotExist
		case 4, 5:
			req.Operator = []v1.NodeSelectorOperator{v1.NodeSelectorOpGt, v1.NodeSelectorOpLt}[op-4]
			req.Values = []string{fmt.Sprint(r.IntN(12))}
		}
		t.MatchExpressions = append(t.MatchExpressions, req)
	}
	if r.IntN(4) == 0 {
		op := []v1.NodeSelectorOperator{v1.NodeSelectorOpIn, v1.NodeSelectorOpNotIn}[r.IntN(2)]
		t.MatchFields = append(t.MatchFields, v1.NodeSelectorRequirement{Key: metav1.ObjectNameField, Operator: op, Values: []string{nodes[r.IntN(len(nodes))].Node().Name}})
	}
	return t
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
