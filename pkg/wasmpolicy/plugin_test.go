package wasmpolicy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/component-base/metrics/testutil"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/wasmsched/wasmsched/internal/framework"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
)

// cluster is a scheduler framework with only WasmPolicy enabled, built by the
// framework runtime from a profile, the way kube-scheduler builds it.
type cluster struct {
	fw       intree.Framework
	snapshot *cache.Snapshot
	nodes    []*v1.Node
	recorder *events.FakeRecorder
	// plugin is the framework's WasmPolicy.
	plugin *WasmPolicy
}

func newCluster(t *testing.T, args *config.WasmPolicyArgs, nodes []*v1.Node, objs ...*v1.ConfigMap) *cluster {
	t.Helper()
	return newClusterWithPods(t, args, nodes, nil, objs...)
}

// newClusterWithPods is newCluster with pods already running on the nodes.
func newClusterWithPods(t *testing.T, args *config.WasmPolicyArgs, nodes []*v1.Node, pods []*v1.Pod, objs ...*v1.ConfigMap) *cluster {
	t.Helper()
	// Under -race a Go guest's first compile can take longer than the
	// production default; New returns as soon as every policy has loaded.
	return newClusterWithOptions(t, args, nodes, pods, []Option{WithInitialLoadTimeout(3 * time.Minute)}, objs...)
}

// newClusterWithOptions builds the plugin with options.
func newClusterWithOptions(t *testing.T, args *config.WasmPolicyArgs, nodes []*v1.Node, pods []*v1.Pod, opts []Option, objs ...*v1.ConfigMap) *cluster {
	t.Helper()
	return newClusterProfile(t, args, nodes, pods, opts, nil, objs...)
}

// newClusterProfile is newClusterWithOptions with the profile's plugins
// changed by edit (when not nil) before the framework is built.
func newClusterProfile(t *testing.T, args *config.WasmPolicyArgs, nodes []*v1.Node, pods []*v1.Pod, opts []Option, edit func(*schedconfig.Plugins), objs ...*v1.ConfigMap) *cluster {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if args.CompilationCacheDir == "" {
		args.CompilationCacheDir = sharedCacheDir
	}
	if args.MaxInstancesPerPolicy == 0 {
		args.MaxInstancesPerPolicy = 16
	}
	if args.FilePollInterval == 0 {
		args.FilePollInterval = 100 * time.Millisecond
	}
	for i := range args.Policies {
		// Unset fields take the defaults, except a timeout that a busy
		// machine under -race cannot fail.
		p := &args.Policies[i]
		d := configv1.DefaultPolicy(p.Name, p.Source)
		d.Timeout = 5 * time.Second
		if p.Weight == 0 {
			p.Weight = d.Weight
		}
		if p.Timeout == 0 {
			p.Timeout = d.Timeout
		}
		if p.MemoryLimit == 0 {
			p.MemoryLimit = d.MemoryLimit
		}
		if p.FailurePolicy == "" {
			p.FailurePolicy = d.FailurePolicy
		}
	}
	client := fake.NewClientset()
	for _, cm := range objs {
		if _, err := client.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	snapshot := cache.NewSnapshot(pods, nodes)
	recorder := events.NewFakeRecorder(100)
	enabled := schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: Name}}}
	profile := &schedconfig.KubeSchedulerProfile{
		SchedulerName: "wasmsched",
		Plugins: &schedconfig.Plugins{
			QueueSort: schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: queuesort.Name}}},
			Bind:      schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: defaultbinder.Name}}},
			PreFilter: enabled, Filter: enabled, PostFilter: enabled, PreScore: enabled, Reserve: enabled, Permit: enabled, PostBind: enabled, Score: schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: Name, Weight: 1}}},
		},
		PluginConfig: []schedconfig.PluginConfig{{Name: Name, Args: args}},
	}
	if edit != nil {
		edit(profile.Plugins)
	}
	var plugin *WasmPolicy
	factory := func(ctx context.Context, obj runtime.Object, h framework.Handle) (framework.Plugin, error) {
		p, err := Factory(opts...)(ctx, obj, h)
		if w, ok := p.(*WasmPolicy); ok {
			plugin = w
		}
		return p, err
	}
	fw, err := frameworkruntime.NewFramework(ctx, frameworkruntime.Registry{Name: factory, queuesort.Name: queuesort.New, defaultbinder.Name: defaultbinder.New}, profile,
		frameworkruntime.WithClientSet(client),
		frameworkruntime.WithEventRecorder(recorder),
		frameworkruntime.WithSnapshotSharedLister(snapshot),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fw.Close() })
	return &cluster{fw: fw, snapshot: snapshot, nodes: nodes, recorder: recorder, plugin: plugin}
}

// schedule runs PreFilter, Filter on every node, then PreScore and Score on
// the feasible ones, as one scheduling cycle does. It returns each node's
// Filter status and the WasmPolicy score of each feasible node.
func (c *cluster) schedule(t *testing.T, pod *v1.Pod) (map[string]*fwk.Status, map[string]int64, *fwk.Status) {
	t.Helper()
	filters, scores, st, _ := scheduleTimed(t, context.Background(), c, pod)
	return filters, scores, st
}

func node(name string, labels map[string]string, cpuMilli int64) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{
			v1.ResourceCPU:    *resource.NewMilliQuantity(cpuMilli, resource.DecimalSI),
			v1.ResourceMemory: *resource.NewQuantity(8<<30, resource.BinarySI),
			v1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
		}},
	}
}

func pod(name string, labels map[string]string, cpuMilli int64) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name), Labels: labels},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
			v1.ResourceCPU: *resource.NewMilliQuantity(cpuMilli, resource.DecimalSI),
		}}}}},
	}
}

func writeModule(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "host", "testdata", name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Filter, PreScore, Score and NormalizeScore through the framework, with
// team-isolation (TinyGo) filtering and bin-packing (Go) scoring.
func TestExtensionPointsBothToolchains(t *testing.T) {
	dir := t.TempDir()
	team := writeModule(t, dir, "team.wasm", testguests.PolicyBytes(t, testguests.TinyGo, "team-isolation"))
	pack := writeModule(t, dir, "pack.wasm", testguests.PolicyBytes(t, testguests.Go, "bin-packing"))
	nodes := []*v1.Node{
		node("pay-1", map[string]string{"team": "payments"}, 4000),
		node("pay-2", map[string]string{"team": "payments"}, 2000),
		node("search-1", map[string]string{"team": "search"}, 4000),
		node("shared-1", nil, 4000),
	}
	c := newCluster(t, &config.WasmPolicyArgs{Policies: []config.Policy{
		{Name: "team-isolation", Source: config.Source{File: team}, PolicySettings: config.PolicySettings{Config: "key=team"}},
		{Name: "bin-packing", Source: config.Source{File: pack}, PolicySettings: config.PolicySettings{Config: "cpu=1"}},
	}}, nodes)

	filters, scores, st := c.schedule(t, pod("p1", map[string]string{"team": "payments"}, 1000))
	if st != nil {
		t.Fatal(st)
	}
	for name, want := range map[string]string{
		"search-1": "node(s) rejected by WasmPolicy/team-isolation: team label mismatch",
		"shared-1": "node(s) rejected by WasmPolicy/team-isolation: node has no team label (shared pool), pod belongs to team payments",
	} {
		if got := filters[name]; got.Code() != fwk.Unschedulable || got.Message() != want {
			t.Errorf("%s: filter = %v %q, want Unschedulable %q", name, got.Code(), got.Message(), want)
		}
		if filters[name].Plugin() != Name {
			t.Errorf("%s: status plugin = %q", name, filters[name].Plugin())
		}
	}
	if !filters["pay-1"].IsSuccess() || !filters["pay-2"].IsSuccess() {
		t.Fatalf("payments nodes rejected: %v / %v", filters["pay-1"], filters["pay-2"])
	}
	// MostAllocated on cpu: 1000/4000 → 25, 1000/2000 → 50: bin-packing prefers the fuller node.
	if scores["pay-1"] != 25 || scores["pay-2"] != 50 {
		t.Fatalf("scores = %v, want pay-1=25 pay-2=50", scores)
	}
}

// A policy that loops on one node: under Fail that node is rejected with
// the reason, and since the policy is not called again in the cycle, the
// pod is not scheduled (the healthy node, if the loop came first, gets the
// same reason; if it came before, Score cannot run and the attempt fails);
// under Ignore every node passes and the pod is scheduled without its score.
func TestFailurePolicy(t *testing.T) {
	dir := t.TempDir()
	loop := writeModule(t, dir, "loop.wasm", fixture(t, "loop"))
	nodes := []*v1.Node{node("ok", nil, 1000), node("cordoned", nil, 1000)}
	nodes[1].Spec.Unschedulable = true
	const stop = "policy call exceeded its timeout of 20ms; the pod (and pods like it) is quarantined for 30s: the policy is not called for it until then or until a new module loads; fix the policy or raise its timeout"
	for _, fp := range []config.FailurePolicy{config.FailurePolicyFail, config.FailurePolicyIgnore} {
		t.Run(string(fp), func(t *testing.T) {
			c := newCluster(t, &config.WasmPolicyArgs{Policies: []config.Policy{
				{Name: "slow", Source: config.Source{File: loop}, PolicySettings: config.PolicySettings{Timeout: 20 * time.Millisecond, FailurePolicy: fp}},
			}}, nodes)
			filters, _, st := c.schedule(t, pod("p", nil, 100))
			got, ok := filters["cordoned"], filters["ok"]
			switch fp {
			case config.FailurePolicyFail:
				if got.Code() != fwk.UnschedulableAndUnresolvable || got.Message() != "node(s) rejected by WasmPolicy/slow: "+stop {
					t.Fatalf("Fail: looping node: %v %q", got.Code(), got.Message())
				}
				switch {
				case ok.IsSuccess(): // evaluated before the loop: Score cannot run
					if st == nil || !strings.Contains(st.Message(), "WasmPolicy/slow: "+stop) {
						t.Fatalf("Fail: attempt %v, want it failed at PreScore with %q", st, stop)
					}
				case ok.Message() != got.Message():
					t.Fatalf("Fail: healthy node after the loop: %q, want the cycle's reason %q", ok.Message(), got.Message())
				}
			case config.FailurePolicyIgnore:
				if st != nil || !ok.IsSuccess() || !got.IsSuccess() {
					t.Fatalf("Ignore: attempt %v, nodes %v / %v; want both to pass", st, ok, got)
				}
			}
		})
	}
}

func TestPolicyWithoutModule(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.wasm")
	nodes := []*v1.Node{node("n", nil, 1000)}
	c := newClusterWithOptions(t, &config.WasmPolicyArgs{Policies: []config.Policy{
		{Name: "absent", Source: config.Source{File: missing}},
	}}, nodes, nil, []Option{WithInitialLoadTimeout(time.Second)})
	_, _, st := c.schedule(t, pod("p", nil, 100))
	if st.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), "WasmPolicy/absent: policy has no module loaded (file "+missing+")") {
		t.Fatalf("status = %v %q", st.Code(), st.Message())
	}
	// The module appears later: the policy starts serving without a restart.
	writeModule(t, filepath.Dir(missing), "missing.wasm", fixture(t, "ok"))
	waitFor(t, func() bool {
		f, _, st := c.schedule(t, pod("p", nil, 100))
		return st == nil && f["n"].IsSuccess()
	})
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A file source reloads on change; a corrupt or mis-pinned module keeps the
// last good version serving.
func TestFileReloadKeepsLastGood(t *testing.T) {
	dir := t.TempDir()
	path := writeModule(t, dir, "policy.wasm", fixture(t, "ok"))
	nodes := []*v1.Node{node("reject", map[string]string{"verdict": "reject"}, 1000), node("cordoned", nil, 1000)}
	nodes[1].Spec.Unschedulable = true
	c := newCluster(t, &config.WasmPolicyArgs{Policies: []config.Policy{
		{Name: "p", Source: config.Source{File: path}, PolicySettings: config.PolicySettings{Timeout: 300 * time.Millisecond, FailurePolicy: config.FailurePolicyFail}},
	}}, nodes)
	f, _, _ := c.schedule(t, pod("a", nil, 100))
	if f["reject"].IsSuccess() || !f["cordoned"].IsSuccess() {
		t.Fatalf("v1: %v / %v", f["reject"], f["cordoned"])
	}
	// v2 (loop.wasm) accepts "reject" and loops on cordoned nodes: its
	// timeout (on the node, or in the open breaker's reason once it has
	// failed three cycles) shows that it serves.
	writeModule(t, dir, "policy.wasm", fixture(t, "loop"))
	v2Serves := func() bool {
		f, _, st := c.schedule(t, pod("a", nil, 100))
		return strings.Contains(f["cordoned"].Message()+st.Message(), "exceeded its timeout of 300ms")
	}
	waitFor(t, v2Serves)
	// Corrupt module: v2 keeps serving.
	writeModule(t, dir, "policy.wasm", []byte("\x00asm\x01\x00\x00\x00garbage"))
	time.Sleep(300 * time.Millisecond)
	if !v2Serves() {
		t.Fatal("after a corrupt reload, v2 no longer serves")
	}
}

// The ConfigMap source: binaryData, gzip, sha256 pin, reload, and a Warning
// event on the ConfigMap when a new version is refused.
func TestConfigMapSource(t *testing.T) {
	ok, loop := fixture(t, "ok"), fixture(t, "loop")
	sum := sha256.Sum256(ok)
	cm := &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "policy", Namespace: "wasmsched"},
		BinaryData: map[string][]byte{"policy.wasm": ok},
	}
	nodes := []*v1.Node{node("reject", map[string]string{"verdict": "reject"}, 1000)}
	c := newCluster(t, &config.WasmPolicyArgs{Policies: []config.Policy{
		{Name: "cm", Source: config.Source{ConfigMap: &config.ConfigMapSource{Namespace: "wasmsched", Name: "policy", Key: "policy.wasm"}}, PolicySettings: config.PolicySettings{SHA256: hex.EncodeToString(sum[:])}},
	}}, nodes, cm)
	f, _, _ := c.schedule(t, pod("a", nil, 100))
	if f["reject"].Message() != "node(s) rejected by WasmPolicy/cm: rejected by fixture" {
		t.Fatalf("filter = %q", f["reject"].Message())
	}
	// Upload a module that does not match the pinned sha256.
	client := c.fw.ClientSet()
	cm.BinaryData["policy.wasm"] = loop
	if _, err := client.CoreV1().ConfigMaps("wasmsched").Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ev string
	select {
	case ev = <-c.recorder.Events:
	case <-time.After(10 * time.Second):
	}
	if !strings.Contains(ev, "Warning PolicyLoadFailed") || !strings.Contains(ev, "WasmPolicy/cm: SHA256Mismatch") {
		// The first event may be PolicyLoaded from the initial load.
		select {
		case ev = <-c.recorder.Events:
		case <-time.After(10 * time.Second):
		}
	}
	if !strings.Contains(ev, "Warning PolicyLoadFailed") || !strings.Contains(ev, "WasmPolicy/cm: SHA256Mismatch") {
		t.Fatalf("event = %q, want a PolicyLoadFailed warning naming the policy", ev)
	}
	f, _, _ = c.schedule(t, pod("a", nil, 100))
	if f["reject"].IsSuccess() {
		t.Fatal("a module with the wrong sha256 replaced the pinned one")
	}
}

// sharedCacheDir is the tests' compilation cache: Go guests compile once per
// run, not once per test (seconds each under -race).
var sharedCacheDir string

func TestMain(m *testing.M) {
	schedmetrics.Register() // the framework runtime records into the scheduler's metrics
	dir, err := os.MkdirTemp("", "wasmpolicy-cache")
	if err != nil {
		panic(err)
	}
	sharedCacheDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// Every extension point of a guest (PreFilter with cycle state, Skip,
// Filter, PreScore, Score, NormalizeScore), built with TinyGo and with Go.
func TestEveryExtensionPoint(t *testing.T) {
	for _, tc := range testguests.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			path, err := testguests.Build(tc, "plugins-wasm/testdata/extension-points")
			if err != nil {
				t.Fatal(err)
			}
			busy := func(name string, n int) []*v1.Pod {
				var pods []*v1.Pod
				for i := 0; i < n; i++ {
					p := pod(fmt.Sprintf("%s-%d", name, i), nil, 10)
					p.Spec.NodeName = name
					pods = append(pods, p)
				}
				return pods
			}
			nodes := []*v1.Node{node("a1", map[string]string{"zone": "a"}, 4000), node("a2", map[string]string{"zone": "a"}, 4000), node("b1", map[string]string{"zone": "b"}, 4000)}
			c := newClusterWithPods(t, &config.WasmPolicyArgs{Policies: []config.Policy{{Name: "ep", Source: config.Source{File: path}}}}, nodes, append(busy("a1", 1), busy("a2", 4)...))

			// PreFilter stores the zone; Filter reads it on other instances.
			f, scores, st := c.schedule(t, pod("p", map[string]string{"zone": "a"}, 10))
			if st != nil || !f["a1"].IsSuccess() || !f["a2"].IsSuccess() || f["b1"].Message() != "node(s) rejected by WasmPolicy/ep: zone b is not a" {
				t.Fatalf("filter: %v %v %v %v", st, f["a1"], f["a2"], f["b1"])
			}
			// Raw scores 1000 and 4000, normalized by the guest to 25 and 100.
			if scores["a1"] != 25 || scores["a2"] != 100 {
				t.Fatalf("scores = %v, want a1=25 a2=100", scores)
			}
			// PreFilter rejects the pod outright.
			if _, _, st := c.schedule(t, pod("q", map[string]string{"zone": "none"}, 10)); st.Code() != fwk.UnschedulableAndUnresolvable || st.Message() != "rejected by WasmPolicy/ep: pod wants no zone" {
				t.Fatalf("prefilter rejection = %v %q", st.Code(), st.Message())
			}
			// PreFilter Skip: no Filter for this pod; PreScore Skip: all scores 0.
			f, scores, st = c.schedule(t, pod("r", map[string]string{"score": "off"}, 10))
			if st != nil || !f["b1"].IsSuccess() || scores["a2"] != 0 || scores["b1"] != 0 {
				t.Fatalf("skips: %v %v %v", st, f["b1"], scores)
			}
			// No node in zone c: PostFilter adds the guest's message, and
			// the status stays Unschedulable (preemption may still run).
			ctx := context.Background()
			state := intree.NewCycleState()
			zc := pod("s", map[string]string{"zone": "c"}, 10)
			if _, st, _ := c.fw.RunPreFilterPlugins(ctx, state, zc); !st.IsSuccess() {
				t.Fatal(st)
			}
			infos, _ := c.snapshot.NodeInfos().List()
			for _, ni := range infos {
				if c.fw.RunFilterPlugins(ctx, state, zc, ni).IsSuccess() {
					t.Fatalf("zone c fits %s", ni.Node().Name)
				}
			}
			if _, st := c.fw.RunPostFilterPlugins(ctx, state, zc, nil); st.Code() != fwk.Unschedulable || !strings.Contains(st.Message(), "WasmPolicy/ep: no node in zone c") {
				t.Fatalf("postfilter = %v %q, want Unschedulable with the guest's message", st.Code(), st.Message())
			}
			// PostBind is called with the bound node, and counted.
			before, _ := testutil.GetCounterMetricValue(evaluations.WithLabelValues("ep", "PostBind", ResultSuccess))
			za := pod("u", map[string]string{"zone": "a"}, 10)
			state = intree.NewCycleState()
			if _, st, _ := c.fw.RunPreFilterPlugins(ctx, state, za); !st.IsSuccess() {
				t.Fatal(st)
			}
			if st := c.fw.RunReservePluginsReserve(ctx, state, za, "a1"); !st.IsSuccess() {
				t.Fatal(st)
			}
			c.fw.RunPostBindPlugins(ctx, state, za, "a1")
			if after, _ := testutil.GetCounterMetricValue(evaluations.WithLabelValues("ep", "PostBind", ResultSuccess)); after != before+1 {
				t.Fatalf("postbind evaluations went from %v to %v, want +1", before, after)
			}
		})
	}
}
