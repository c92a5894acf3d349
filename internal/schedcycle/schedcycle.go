// Package schedcycle builds kube-scheduler's framework for wasmsched's tools
// and drives one scheduling cycle through it: PreFilter, Filter on every
// node (the PreFilter result applied with kube-scheduler's wording),
// PreScore and Score. The scheduler itself runs the same plugins through
// the same runtime; the tools (explain, test, the case tables, the
// extender, the rollout report) read what the plugins decided instead of
// deciding it again (docs/architecture.md, "One scheduling cycle").
package schedcycle

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/wasmsched/wasmsched/internal/framework"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
)

// New builds the framework of profile from registry over the nodes and pods
// lister holds, with kube-scheduler's runtime. opts come after the ones New
// sets (a fake event recorder, parallelism 2), so they can replace them.
// It is the one place a wasmsched tool builds a framework. The framework's
// metrics recorder runs until ctx ends: a tool that builds one per call or
// request gives it a context that ends with the call (a recorder shared
// by all of them would outlive every test's goroutine leak check, as
// kube-scheduler's integration framework runs it).
func New(ctx context.Context, registry frameworkruntime.Registry, profile *schedconfig.KubeSchedulerProfile, lister framework.SharedLister, opts ...frameworkruntime.Option) (intree.Framework, error) {
	// The framework records into the scheduler's metrics (registered
	// once per process; kube-scheduler does the same at start).
	schedmetrics.Register()
	all := append([]frameworkruntime.Option{
		// Building a framework logs its plugins at V(2): the extender
		// builds one per request, so those lines come four levels later.
		frameworkruntime.WithLogger(klog.FromContext(ctx).V(4)),
		frameworkruntime.WithSnapshotSharedLister(lister),
		frameworkruntime.WithEventRecorder(&events.FakeRecorder{}),
		frameworkruntime.WithParallelism(2),
	}, opts...)
	fw, err := frameworkruntime.NewFramework(ctx, registry, profile, all...)
	if err != nil {
		return nil, fmt.Errorf("profile %s: %w", profile.SchedulerName, err)
	}
	return fw, nil
}

// OnePlugin is the registry and profile of a framework that runs one
// plugin, already built, at each of the points named that it implements
// (with weight 1 at Score), plus the queue sort and binder every profile needs. Tools that
// explain a plugin's decisions run it this way: no in-tree plugin takes
// part, and the plugin's total score is its own.
func OnePlugin(name string, pl framework.Plugin, points ...Point) (frameworkruntime.Registry, *schedconfig.KubeSchedulerProfile) {
	registry := frameworkruntime.Registry{
		name:               func(context.Context, runtime.Object, framework.Handle) (framework.Plugin, error) { return pl, nil },
		queuesort.Name:     queuesort.New,
		defaultbinder.Name: defaultbinder.New,
	}
	plugins := &schedconfig.Plugins{
		QueueSort: schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: queuesort.Name}}},
		Bind:      schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: defaultbinder.Name}}},
	}
	one := schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: name}}}
	for _, p := range points {
		switch p {
		case PreFilter:
			if _, ok := pl.(framework.PreFilterPlugin); ok {
				plugins.PreFilter = one
			}
		case Filter:
			if _, ok := pl.(framework.FilterPlugin); ok {
				plugins.Filter = one
			}
		case PreScore:
			if _, ok := pl.(framework.PreScorePlugin); ok {
				plugins.PreScore = one
			}
		case Score:
			if _, ok := pl.(framework.ScorePlugin); ok {
				plugins.Score = schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: name, Weight: 1}}}
			}
		}
	}
	return registry, &schedconfig.KubeSchedulerProfile{SchedulerName: "wasmsched-tool", Plugins: plugins}
}

// Point is an extension point of the cycle Run drives.
type Point int

// The points Run drives.
const (
	PreFilter Point = iota
	Filter
	PreScore
	Score
)

// CyclePoints are all of them.
var CyclePoints = []Point{PreFilter, Filter, PreScore, Score}

// Node is the cycle's outcome on one node.
type Node struct {
	Name string
	// Status is the node's Filter status (or the PreFilter's, for every
	// node, when PreFilter rejected the pod); nil when the node is feasible.
	Status *fwk.Status
	// Score is the node's total score (Σ plugin weight × normalized score)
	// when it was feasible and scoring succeeded.
	Score *int64
}

// Result is one scheduling cycle's outcome.
type Result struct {
	// Nodes are in the order of the nodes given to Run.
	Nodes []Node
	// PreFilter is PreFilter's status when it rejected the pod (every node
	// has it), or failed.
	PreFilter *fwk.Status
	// Err is the status that failed the cycle (a plugin's error at
	// PreFilter, PreScore or Score), as the scheduler would report it;
	// nil when the cycle ran to its end.
	Err *fwk.Status
	// Best are the feasible nodes with the highest total score, sorted
	// by name: kube-scheduler picks one of them at random. Empty when no
	// node is feasible or scoring failed.
	Best []string
}

// Feasible counts the feasible nodes.
func (r *Result) Feasible() int {
	n := 0
	for i := range r.Nodes {
		if r.Nodes[i].Status == nil {
			n++
		}
	}
	return n
}

// OutsidePreFilterResult is kube-scheduler's status for a node that the
// PreFilter result of plugins leaves out (schedule_one.go,
// findNodesThatFitPod).
func OutsidePreFilterResult(plugins sets.Set[string]) *fwk.Status {
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("node(s) didn't satisfy plugin(s) %v", sets.List(plugins)))
}

// Run drives one scheduling cycle of pod over nodes in state (a new
// CycleState, intree.NewCycleState, into which the caller may have written
// what its plugins read), as kube-scheduler's scheduleOne does up to the
// choice of a node, with two differences a tool needs: Filter runs on
// every node (no percentageOfNodesToScore, no nominated pods), and
// feasible nodes are scored even when there is one.
func Run(ctx context.Context, fw intree.Framework, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) Result {
	res := RunFilter(ctx, fw, state, pod, nodes)
	if res.PreFilter != nil {
		return res
	}
	var feasible []fwk.NodeInfo
	var at []int
	for i, ni := range nodes {
		if res.Nodes[i].Status == nil {
			feasible = append(feasible, ni)
			at = append(at, i)
		}
	}
	if len(feasible) == 0 {
		return res
	}
	totals, st := RunScore(ctx, fw, state, pod, feasible)
	if !st.IsSuccess() {
		res.Err = st
		return res
	}
	var best int64
	for k, total := range totals {
		n := &res.Nodes[at[k]]
		n.Score = &totals[k]
		switch {
		case len(res.Best) == 0 || total > best:
			best, res.Best = total, []string{n.Name}
		case total == best:
			res.Best = append(res.Best, n.Name)
		}
	}
	slices.Sort(res.Best)
	return res
}

// RunFilter is the first half of Run: PreFilter, then Filter on every node
// (in parallel, as the scheduler runs it) but those the PreFilter result
// leaves out.
func RunFilter(ctx context.Context, fw intree.Framework, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) Result {
	res := Result{Nodes: make([]Node, len(nodes))}
	for i, ni := range nodes {
		res.Nodes[i].Name = ni.Node().Name
	}
	pre, st, narrowedBy := fw.RunPreFilterPlugins(ctx, state, pod)
	if !st.IsSuccess() {
		res.PreFilter = st
		if !st.IsRejected() {
			res.Err = st
		}
		for i := range res.Nodes {
			res.Nodes[i].Status = st
		}
		return res
	}
	var outside *fwk.Status
	if !pre.AllNodes() {
		outside = OutsidePreFilterResult(narrowedBy)
	}
	fw.Parallelizer().Until(ctx, len(nodes), func(i int) {
		if outside != nil && !pre.NodeNames.Has(res.Nodes[i].Name) {
			res.Nodes[i].Status = outside
			return
		}
		if s := fw.RunFilterPlugins(ctx, state, pod, nodes[i]); !s.IsSuccess() {
			res.Nodes[i].Status = s
		}
	}, "schedcycleFilter")
	return res
}

// RunScore is the second half of Run: PreScore and Score (each score plugin's
// NormalizeScore and weight applied) over nodes, the feasible ones. It
// returns each node's total score, in the order of nodes, or the status
// that failed it.
func RunScore(ctx context.Context, fw intree.Framework, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) ([]int64, *fwk.Status) {
	if s := fw.RunPreScorePlugins(ctx, state, pod, nodes); !s.IsSuccess() {
		return nil, s
	}
	scores, s := fw.RunScorePlugins(ctx, state, pod, nodes)
	if !s.IsSuccess() {
		return nil, s
	}
	at := make(map[string]int, len(nodes))
	for i, ni := range nodes {
		at[ni.Node().Name] = i
	}
	totals := make([]int64, len(nodes))
	for _, ns := range scores {
		totals[at[ns.Name]] = ns.TotalScore
	}
	return totals, nil
}

// Snapshot is the scheduler's snapshot of nodes and the pods on them (by
// spec.nodeName), whose node list keeps the order of nodes: kube-scheduler's
// own snapshot lists nodes in its cache's order, cache.NewSnapshot in a
// map's, and a tool's output (and which nodes share a batch) should not
// change from run to run.
func Snapshot(pods []*v1.Pod, nodes []*v1.Node) (framework.SharedLister, []fwk.NodeInfo) {
	snap := cache.NewSnapshot(pods, nodes)
	list := make([]fwk.NodeInfo, 0, len(nodes))
	for _, n := range nodes {
		if ni, err := snap.NodeInfos().Get(n.Name); err == nil {
			list = append(list, ni)
		}
	}
	return ordered{snap, list}, list
}

// ordered is a snapshot whose node list is given.
type ordered struct {
	*cache.Snapshot
	list []fwk.NodeInfo
}

func (o ordered) NodeInfos() framework.NodeInfoLister {
	return orderedNodes{o.Snapshot.NodeInfos(), o.list}
}

type orderedNodes struct {
	framework.NodeInfoLister
	list []fwk.NodeInfo
}

func (o orderedNodes) List() ([]fwk.NodeInfo, error) { return o.list, nil }
