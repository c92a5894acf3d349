// The main line only: policytest follows the main line's kube-scheduler.

//go:build !k8s_1_34

// Package parity checks that every tool decides what the scheduler
// decides: generated pods and clusters (the model's generator) go through
// WasmPolicy in kube-scheduler's framework as the scheduler runs it, and
// through Explain, policytest, the case tables and the extender, and each
// must give every node the scheduler's status and name the same best nodes.
package parity

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/wasmsched/wasmsched/guest-sdk/casetest"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/kubemodel"
	"github.com/wasmsched/wasmsched/internal/kubemodel/modelgen"
	"github.com/wasmsched/wasmsched/internal/schedcycle"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
	"github.com/wasmsched/wasmsched/pkg/casetable"
	"github.com/wasmsched/wasmsched/pkg/extender"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
	"github.com/wasmsched/wasmsched/policytest"
)

// policy is one policy of the set under test.
type policy struct {
	name, example string
	tc            testguests.Toolchain
	config        string
	reads         []string
	failure       config.FailurePolicy
	mode          config.Mode
	weight        int32
}

// policies are filters and scorers of both toolchains, a policy whose bad
// config is its error on every node (under Ignore), one
// in Audit mode, and one that narrows PreFilter to some nodes.
var policies = []policy{
	{name: "team", example: "team-isolation", tc: testguests.TinyGo, config: "key=team", failure: config.FailurePolicyFail, mode: config.ModeEnforce, weight: 1},
	{name: "packing", example: "bin-packing", tc: testguests.Go, config: "cpu=1,memory=1", failure: config.FailurePolicyFail, mode: config.ModeEnforce, weight: 2},
	{name: "cap-ignore", example: "team-pod-cap", tc: testguests.Go, config: "key=team,max=none", reads: []string{}, failure: config.FailurePolicyIgnore, mode: config.ModeEnforce, weight: 1},
	{name: "cap", example: "team-pod-cap", tc: testguests.TinyGo, config: "key=app,max=1", reads: []string{"NodePods"}, failure: config.FailurePolicyFail, mode: config.ModeEnforce, weight: 1},
	{name: "zone-audit", example: "team-isolation", tc: testguests.Go, config: "key=zone,require=true", failure: config.FailurePolicyFail, mode: config.ModeAudit, weight: 1},
	// The NodeName port narrows PreFilter to a pod's spec.nodeName (the
	// generator gives a third of its pods one).
	{name: "nodename", example: "ports/nodename", tc: testguests.TinyGo, failure: config.FailurePolicyFail, mode: config.ModeEnforce, weight: 1},
}

// alone are the policies checked one at a time: the set's, and cap-ignore's
// module under Fail, whose policy errors reject the nodes cap-ignore passes.
var alone = append(slices.Clip(policies),
	policy{name: "cap-fail", example: "team-pod-cap", tc: testguests.Go, config: "key=team,max=none", reads: []string{}, failure: config.FailurePolicyFail, mode: config.ModeEnforce, weight: 1})

// argsOf are WasmPolicy's args running ps.
func argsOf(t *testing.T, ps ...policy) *config.WasmPolicyArgs {
	var pcs []config.Policy
	for _, p := range ps {
		pc := configv1.DefaultPolicy(p.name, config.Source{File: testguests.Policy(t, p.tc, p.example)})
		pc.Config, pc.Reads, pc.FailurePolicy, pc.Mode, pc.Weight = p.config, p.reads, p.failure, p.mode, p.weight
		pc.Timeout = 5 * time.Second // a busy CI machine, not the verdicts, must never decide
		pcs = append(pcs, pc)
	}
	args := configv1.DefaultArgs(pcs...)
	args.CompilationCacheDir = t.TempDir()
	return args
}

// scheduler is WasmPolicy running ps in a framework built as kube-scheduler
// builds a profile's: the registered factory, its args in pluginConfig.
func scheduler(t *testing.T, lister fwk.SharedLister, ps ...policy) (intree.Framework, *wasmpolicy.WasmPolicy) {
	var plugin *wasmpolicy.WasmPolicy
	factory := wasmpolicy.Factory()
	registry := frameworkruntime.Registry{
		wasmpolicy.Name: func(ctx context.Context, obj runtime.Object, h framework.Handle) (framework.Plugin, error) {
			p, err := factory(ctx, obj, h)
			if err == nil {
				plugin = p.(*wasmpolicy.WasmPolicy)
			}
			return p, err
		},
		queuesort.Name: queuesort.New, defaultbinder.Name: defaultbinder.New,
	}
	on := schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: wasmpolicy.Name}}}
	profile := &schedconfig.KubeSchedulerProfile{
		SchedulerName: "parity",
		Plugins: &schedconfig.Plugins{
			QueueSort: schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: queuesort.Name}}},
			Bind:      schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: defaultbinder.Name}}},
			PreFilter: on, Filter: on, PostFilter: on, PreScore: on, Reserve: on,
			Score: schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: wasmpolicy.Name, Weight: 1}}},
		},
		PluginConfig: []schedconfig.PluginConfig{{Name: wasmpolicy.Name, Args: argsOf(t, ps...)}},
	}
	fw, err := schedcycle.New(context.Background(), registry, profile, lister,
		frameworkruntime.WithClientSet(fake.NewClientset()), frameworkruntime.WithEventRecorder(events.NewFakeRecorder(1000)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fw.Close() })
	if missing := plugin.Unloaded(); len(missing) > 0 {
		t.Fatalf("policies did not load: %v", missing)
	}
	return fw, plugin
}

// outcome is a node's status as FailedScheduling shows it: "Success", or
// the code and message.
func outcome(st *fwk.Status) string {
	if st.IsSuccess() {
		return "Success"
	}
	return st.Code().String() + ": " + st.Message()
}

// cluster is one generated cluster: its nodes (with their pods) and the
// pods to schedule on it.
type cluster struct {
	models  []*model.Node
	nodes   []*v1.Node
	running []*v1.Pod
	pods    []*model.Pod
}

func generate(t *testing.T, seed uint64, nodes, pods int) cluster {
	g := modelgen.New(rand.New(rand.NewPCG(seed, 2026)))
	var c cluster
	for i := 0; i < nodes; i++ {
		m := g.Node(fmt.Sprintf("n%d", i))
		n, on, err := kubemodel.ToNode(m)
		if err != nil {
			t.Fatal(err)
		}
		c.models, c.nodes, c.running = append(c.models, m), append(c.nodes, n), append(c.running, on...)
	}
	for i := 0; i < pods; i++ {
		c.pods = append(c.pods, g.Pod(fmt.Sprintf("p%d", i)))
	}
	return c
}

// TestToolsAgreeWithTheScheduler runs generated pods on generated clusters
// through the scheduler's framework and through each tool, and compares
// every node's status and the set of best nodes.
func TestToolsAgreeWithTheScheduler(t *testing.T) {
	ctx := context.Background()
	seeds, nodes, pods := []uint64{1, 2, 3}, 12, 8
	if testing.Short() {
		seeds = seeds[:1]
	}
	checked, seen := map[string]int{}, map[string]int{}
	for _, seed := range seeds {
		c := generate(t, seed, nodes, pods)
		lister, list := schedcycle.Snapshot(c.running, c.nodes)
		fw, _ := scheduler(t, lister, policies...)
		explainer, err := wasmpolicy.NewWithArgs(ctx, argsOf(t, policies...), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = explainer.Close() })
		ext := extenderFor(t, c, policies...)
		for _, mp := range c.pods {
			pod, err := kubemodel.ToPod(mp)
			if err != nil {
				t.Fatal(err)
			}
			want := schedcycle.Run(ctx, fw, intree.NewCycleState(), pod, list)
			tally(seen, want)
			if want.Err != nil {
				t.Fatalf("seed %d pod %s: the cycle failed: %v", seed, pod.Name, want.Err)
			}
			name := fmt.Sprintf("seed %d pod %s", seed, pod.Name)

			// Explain.
			ex := explainer.Explain(ctx, pod, list)
			var got []string
			for _, n := range ex.Nodes {
				if n.Feasible {
					got = append(got, "Success")
				} else {
					got = append(got, n.Status+": "+n.Reason)
				}
			}
			compare(t, name+": Explain", statuses(want), got)
			if diff := cmp.Diff(want.Best, ex.Best); diff != "" {
				t.Errorf("%s: Explain's best nodes (-scheduler +Explain):\n%s", name, diff)
			}
			checked["Explain"]++

			// The extender: filter, then prioritize on what passed.
			compare(t, name+": the extender", statuses(want), ext.filter(t, pod, c.nodes))
			if feasible := feasibleNodes(want, c.nodes); len(feasible) > 0 {
				scores := ext.prioritize(t, pod, feasible)
				for _, n := range want.Nodes {
					if n.Score != nil && scores[n.Name] != *n.Score*extenderv1.MaxExtenderPriority/100 {
						t.Errorf("%s: the extender scores %s %d, the scheduler %d (%d of %d)", name, n.Name, scores[n.Name], *n.Score, *n.Score*extenderv1.MaxExtenderPriority/100, extenderv1.MaxExtenderPriority)
					}
				}
			}
			checked["extender"]++
		}
	}

	// One policy at a time, through policytest and the case tables, for
	// the enforced ones (policytest has no Audit mode; a case table is
	// about one module).
	c := generate(t, 7, nodes, pods)
	lister, list := schedcycle.Snapshot(c.running, c.nodes)
	for _, p := range alone {
		if p.mode == config.ModeAudit {
			continue
		}
		fw, _ := scheduler(t, lister, p)
		opts := []policytest.Option{policytest.Config(p.config), policytest.FailurePolicy(p.failure), policytest.Timeout(5 * time.Second)}
		if p.reads != nil {
			opts = append(opts, policytest.Reads(p.reads...))
		}
		pt := policytest.Load(t, testguests.Policy(t, p.tc, p.example), opts...)
		file := &casetest.File{Config: p.config, Reads: p.reads, FailurePolicy: string(p.failure)}
		var wants []schedcycle.Result
		for _, mp := range c.pods {
			pod, err := kubemodel.ToPod(mp)
			if err != nil {
				t.Fatal(err)
			}
			want := schedcycle.Run(ctx, fw, intree.NewCycleState(), pod, list)
			tally(seen, want)
			wants = append(wants, want)
			name := fmt.Sprintf("policy %s pod %s", p.name, pod.Name)

			// policytest: the policy's verdict on each node, its scores.
			verdicts := pt.Schedule(pod, c.nodes, c.running...)
			var got []string
			best, bestScore := []string{}, int64(-1)
			for i, n := range want.Nodes {
				v := verdicts[n.Name]
				switch {
				case v.Passed():
					got = append(got, "Success")
					s := int64(0)
					if v.Score != nil {
						s = *v.Score
					}
					if s > bestScore {
						best, bestScore = nil, s
					}
					if s == bestScore {
						best = append(best, n.Name)
					}
				case strings.Contains(want.Nodes[i].Status.Message(), v.Reason):
					got = append(got, v.Code+": "+want.Nodes[i].Status.Message())
				default:
					got = append(got, v.Code+": (a reason the scheduler does not give) "+v.Reason)
				}
			}
			compare(t, name+": policytest", statuses(want), got)
			slices.Sort(best)
			if len(best) == 0 {
				best = nil
			}
			if diff := cmp.Diff(want.Best, best); diff != "" {
				t.Errorf("%s: policytest's best nodes (-scheduler +policytest):\n%s", name, diff)
			}
			checked["policytest"]++

			for i := range c.nodes {
				file.Cases = append(file.Cases, casetest.Case{Name: pod.Name + "/" + c.nodes[i].Name, Pod: *mp, Node: *c.models[i]})
			}
		}
		// The case table: each case's Status on its node, each pod's
		// cases being one cycle over every node of the table's cases.
		// One table per pod, so each cycle has the scheduler's nodes.
		for k, want := range wants {
			one := *file
			one.Cases = file.Cases[k*len(c.nodes) : (k+1)*len(c.nodes)]
			r := runTable(t, p, &one)
			var got []string
			for _, rc := range r.Cases {
				got = append(got, rc.Status)
			}
			compare(t, fmt.Sprintf("policy %s pod %s: the case table", p.name, c.pods[k].Name), statuses(want), got)
			checked["casetable"]++
		}
	}
	t.Logf("pods checked per tool: %v; node outcomes seen: %v", checked, seen)
	// The inputs must reach every kind of outcome the tools could word
	// differently, or the comparison proves little.
	for _, kind := range []string{"Success", "Unschedulable", "UnschedulableAndUnresolvable", "outside the PreFilter result", "policy error", "tied best"} {
		if seen[kind] == 0 {
			t.Errorf("no node outcome %q among the generated inputs: change the seeds or the policies", kind)
		}
	}
}

// tally counts the kinds of node outcome a cycle had.
func tally(seen map[string]int, r schedcycle.Result) {
	for _, n := range r.Nodes {
		switch {
		case n.Status == nil:
			seen["Success"]++
		case strings.HasPrefix(n.Status.Message(), "node(s) didn't satisfy plugin(s)"):
			seen["outside the PreFilter result"]++
		case strings.Contains(n.Status.Message(), "policy error"):
			seen["policy error"]++
			seen[n.Status.Code().String()]++
		default:
			seen[n.Status.Code().String()]++
		}
	}
	if len(r.Best) > 1 {
		seen["tied best"]++
	}
}

func statuses(r schedcycle.Result) []string {
	out := make([]string, len(r.Nodes))
	for i, n := range r.Nodes {
		out[i] = outcome(n.Status)
	}
	return out
}

func feasibleNodes(r schedcycle.Result, nodes []*v1.Node) []*v1.Node {
	var out []*v1.Node
	for i, n := range r.Nodes {
		if n.Status == nil {
			out = append(out, nodes[i])
		}
	}
	return out
}

// compare fails the test with every node where got differs from want.
func compare(t *testing.T, what string, want, got []string) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: statuses (-scheduler +tool):\n%s", what, diff)
	}
}

// runTable runs a case table through the conformance kit, for policy p.
func runTable(t *testing.T, p policy, f *casetest.File) *casetable.Report {
	t.Helper()
	e, err := host.NewEngine(host.EngineOptions{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	r, err := casetable.RunModule(context.Background(), e, host.PolicySpec{Name: p.name, Timeout: 5 * time.Second, MaxInstances: 2}, testguests.PolicyBytes(t, p.tc, p.example), f)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// ext is the extender serving the policies over HTTP on 127.0.0.1.
type ext struct{ url string }

func extenderFor(t *testing.T, c cluster, ps ...policy) *ext {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	client := fake.NewClientset()
	for _, p := range c.running {
		if _, err := client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := extender.New(ctx, client, events.NewFakeRecorder(1000), argsOf(t, ps...), extender.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return &ext{url: srv.URL}
}

func (e *ext) post(t *testing.T, verb string, args *extenderv1.ExtenderArgs, out any) {
	t.Helper()
	body, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(e.url+"/"+verb, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: HTTP %d", verb, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatal(err)
	}
}

// filter returns each node's outcome through the extender's filter verb.
func (e *ext) filter(t *testing.T, pod *v1.Pod, nodes []*v1.Node) []string {
	list := &v1.NodeList{}
	for _, n := range nodes {
		list.Items = append(list.Items, *n)
	}
	var res extenderv1.ExtenderFilterResult
	e.post(t, "filter", &extenderv1.ExtenderArgs{Pod: pod, Nodes: list}, &res)
	if res.Error != "" {
		t.Fatalf("filter: %s", res.Error)
	}
	out := make([]string, len(nodes))
	for i, n := range nodes {
		switch {
		case res.FailedAndUnresolvableNodes[n.Name] != "":
			out[i] = fwk.UnschedulableAndUnresolvable.String() + ": " + res.FailedAndUnresolvableNodes[n.Name]
		case res.FailedNodes[n.Name] != "":
			out[i] = fwk.Unschedulable.String() + ": " + res.FailedNodes[n.Name]
		default:
			out[i] = "Success"
		}
	}
	return out
}

// prioritize returns each node's extender score.
func (e *ext) prioritize(t *testing.T, pod *v1.Pod, nodes []*v1.Node) map[string]int64 {
	list := &v1.NodeList{}
	for _, n := range nodes {
		list.Items = append(list.Items, *n)
	}
	var res extenderv1.HostPriorityList
	e.post(t, "prioritize", &extenderv1.ExtenderArgs{Pod: pod, Nodes: list}, &res)
	out := map[string]int64{}
	for _, h := range res {
		out[h.Host] = h.Score
	}
	return out
}
