//go:build !k8s_1_34 && !k8s_1_35 && !k8s_1_36

package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"sigs.k8s.io/yaml"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/native"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

// Workload-aware scheduling (the GenericWorkload gate): upstream's
// scheduler_perf pod-group cases (podgroup/*/performance-config.yaml),
// where kube-scheduler places each group of pods in one pod-group cycle.
// A pod-group cycle places members into the snapshot and takes them out
// again, and WasmPolicy's policies must see the members placed so far
// (pkg/wasmpolicy/podgroup.go).

// podGroupCases are the upstream cases run here: gangs (all or none of a
// group), basic groups, and gangs that must share a rack (topology-aware,
// with the TopologyAwareWorkloadScheduling gate).
var podGroupCases = []string{"GangScheduling", "BasicScheduling", "TopologyAwareScheduling"}

// podGroupWorkloads are the sizes: upstream's own 10-node one as the
// smoke (make test), 500 nodes (make bench; upstream has none between 100
// and 5000, and its 5000-node ones take 2 cores most of an hour for three
// cases under three profiles), and upstream's smallest 5000-node
// GangScheduling one (make bench). Upstream's topology-aware groups have 4
// pods each.
var podGroupWorkloads = []struct {
	name, label      string
	nodes, groups    int
	perGroup, tasPer int
	only             string // the one case that runs it, when set
}{
	{"10Nodes_3Groups", "smoke", 10, 3, 3, 3, ""},
	{"500Nodes_225Groups", "performance", 500, 225, 4, 4, ""},
	{"5000Nodes_1000Groups", "performance", 5000, 1000, 3, 3, "GangScheduling"},
}

// podGroupProfiles: kube-scheduler's default profile; the same with
// WasmPolicy running the examples team-isolation and bin-packing (TinyGo)
// at every point; the ports profile, WasmPolicy running the ten TinyGo
// ports in place of the default Filter and Score plugins; and, for
// reference, the default profile with the two examples as native plugins
// (internal/native): what any added Filter and Score plugin costs there.
var podGroupProfiles = []string{"Default", "DefaultWasm", "PortsTinyGo", "DefaultNative"}

func podGroupSchedulerConfig(profile, dir string) string {
	switch profile {
	case "PortsTinyGo":
		return portsSchedulerConfig(profile, dir)
	case "DefaultNative":
		s := "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nclientConnection: {qps: 5000, burst: 5000}\nprofiles:\n- schedulerName: default-scheduler\n"
		s += "  plugins:\n    filter: {enabled: [{name: " + native.TeamIsolationName + "}]}\n    score: {enabled: [{name: " + native.BinPackingName + ", weight: 1}]}\n"
		return s
	case "DefaultWasm":
		s := "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nclientConnection: {qps: 5000, burst: 5000}\nprofiles:\n- schedulerName: default-scheduler\n"
		s += "  plugins:\n    multiPoint: {enabled: [{name: WasmPolicy, weight: 1}]}\n"
		s += "  pluginConfig:\n  - name: WasmPolicy\n    args:\n      compilationCacheDir: " + filepath.Join(dir, "cache") + "\n      policies:\n"
		for _, p := range []struct{ name, cfg string }{{"team-isolation", "key=team"}, {"bin-packing", "cpu=1,memory=1"}} {
			s += fmt.Sprintf("      - name: %s\n        source: {file: %q}\n        config: %q\n        timeout: 1s\n", p.name, filepath.Join(dir, p.name+".wasm"), p.cfg)
		}
		return s
	}
	return portsSchedulerConfig("Default", dir)
}

// podGroupPerformanceConfig runs each upstream case under each profile, as
// "<case>/<profile>", with podGroupWorkloads (the case's feature gates are
// upstream's).
func podGroupPerformanceConfig(dir string) (string, error) {
	found, up, err := upstreamCases("podgroup/*")
	if err != nil {
		return "", err
	}
	var out []map[string]any
	for _, name := range podGroupCases {
		c := found[name]
		if c == nil {
			return "", fmt.Errorf("scheduler_perf's podgroup cases in %s have no %s", up, name)
		}
		absPaths(c, c["__dir"].(string))
		for _, profile := range podGroupProfiles {
			tc := map[string]any{}
			for k, v := range c {
				tc[k] = v
			}
			delete(tc, "__dir")
			delete(tc, "labels")
			tc["name"] = name + "/" + profile
			tc["schedulerConfigPath"] = filepath.Join(dir, profile+".yaml")
			var ws []any
			for _, w := range podGroupWorkloads {
				if w.only != "" && w.only != name {
					continue
				}
				per := w.perGroup
				if name == "TopologyAwareScheduling" {
					per = w.tasPer
				}
				ws = append(ws, map[string]any{
					"name":   w.name,
					"labels": []string{w.label},
					"params": map[string]int{"initNodes": w.nodes, "initPodGroups": w.groups, "podsPerGroup": per},
				})
				measuredPods[tc["name"].(string)+"/"+w.name] = w.groups * per
			}
			tc["workloads"] = ws
			out = append(out, tc)
		}
	}
	b, err := yaml.Marshal(out)
	return string(b), err
}

// runsWasmPolicy reports whether the pod-group workload named runs under a
// profile with WasmPolicy (not Default or DefaultNative).
func runsWasmPolicy(name string) bool {
	return !strings.Contains(name, "/Default/") && !strings.Contains(name, "/DefaultNative/")
}

// checkPodGroupsAfter is the prepare hook: checkPlacementAfter's checks
// and record, and the groups' own (podGroupViolations).
func checkPodGroupsAfter[C workloadContext](tCtx C) error {
	if err := checkPlacementAfter(tCtx); err != nil {
		return err
	}
	_, madeBefore := host.AssumedMarks()
	tCtx.Cleanup(func() {
		// WasmPolicy's Reserve marked the nodes of the trial placements,
		// and its Unreserve took every mark off again.
		held, made := host.AssumedMarks()
		if held != 0 {
			tCtx.Errorf("placement: %d node marks of pod-group cycles left after the workload", held)
		}
		if runsWasmPolicy(tCtx.Name()) && made == madeBefore {
			tCtx.Errorf("placement: WasmPolicy's Reserve marked no node: the workload ran no pod-group cycle through it")
		}
		v, groups, err := podGroupViolations(context.Background(), tCtx.Client())
		if err != nil {
			tCtx.Errorf("placement: reading the pod groups back: %v", err)
			return
		}
		if groups == 0 {
			tCtx.Errorf("placement: the workload made no pod group")
		}
		for i, s := range v {
			if i == 20 {
				tCtx.Errorf("placement: ... and %d more pod-group violations", len(v)-i)
				break
			}
			tCtx.Errorf("placement: %s", s)
		}
		fmt.Printf("placement: %s: %d pod groups checked, %d violations\n", tCtx.Name(), groups, len(v))
	})
	return nil
}

// podGroupViolations reads every PodGroup and the pods that name one back
// and lists what breaks a group's policy: a gang with some members bound
// but fewer than its minCount, a group with a member on no node, and a
// group whose bound members do not share each topology key's value (the
// rack, in the topology-aware case).
func podGroupViolations(ctx context.Context, c clientset.Interface) ([]string, int, error) {
	pgs, err := c.SchedulingV1beta1().PodGroups(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, 0, err
	}
	pods, err := c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, 0, err
	}
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, 0, err
	}
	nodeLabels := map[string]map[string]string{}
	for _, n := range nodes.Items {
		nodeLabels[n.Name] = n.Labels
	}
	members := map[string][]*v1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if g := p.Spec.SchedulingGroup; g != nil && g.PodGroupName != nil {
			members[p.Namespace+"/"+*g.PodGroupName] = append(members[p.Namespace+"/"+*g.PodGroupName], p)
		}
	}
	return groupViolations(pgs.Items, members, nodeLabels), len(pgs.Items), nil
}

// groupViolations is podGroupViolations' judgement, on objects.
func groupViolations(pgs []schedulingv1beta1.PodGroup, members map[string][]*v1.Pod, nodeLabels map[string]map[string]string) []string {
	var out []string
	for _, pg := range pgs {
		key := pg.Namespace + "/" + pg.Name
		var bound []*v1.Pod
		for _, p := range members[key] {
			if p.Spec.NodeName != "" {
				bound = append(bound, p)
			}
		}
		if len(bound) < len(members[key]) {
			out = append(out, fmt.Sprintf("pod group %s: %d of its %d pods bound", key, len(bound), len(members[key])))
		}
		if g := pg.Spec.SchedulingPolicy.Gang; g != nil && len(bound) > 0 && len(bound) < int(g.MinCount) {
			out = append(out, fmt.Sprintf("gang %s: %d pods bound, fewer than its minCount %d", key, len(bound), g.MinCount))
		}
		if pg.Spec.SchedulingConstraints == nil {
			continue
		}
		for _, t := range pg.Spec.SchedulingConstraints.Topology {
			values := map[string]bool{}
			for _, p := range bound {
				values[nodeLabels[p.Spec.NodeName][t.Key]] = true
			}
			if len(values) > 1 {
				var vs []string
				for v := range values {
					vs = append(vs, fmt.Sprintf("%q", v))
				}
				sort.Strings(vs)
				out = append(out, fmt.Sprintf("pod group %s: its pods are on nodes of %d values of %s (%s), want one", key, len(values), t.Key, strings.Join(vs, ", ")))
			}
		}
	}
	return out
}

// BenchmarkPerfSchedulingPodGroups runs upstream's pod-group cases under
// podGroupProfiles, with the GenericWorkload gate on, and checks each placement
// (checkPodGroupsAfter). Selected like BenchmarkPerfScheduling
// (-perf-scheduling-label-filter); make bench compares the profiles'
// pods/s in alternated pairs.
func BenchmarkPerfSchedulingPodGroups(b *testing.B) {
	dir := b.TempDir()
	for _, p := range []string{"team-isolation", "bin-packing"} {
		src, err := os.ReadFile(testguests.Policy(b, testguests.TinyGo, p))
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p+".wasm"), src, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	tiny := filepath.Join(dir, string(testguests.TinyGo))
	_ = os.MkdirAll(tiny, 0o755)
	for _, p := range portPolicies {
		src, err := os.ReadFile(testguests.Policy(b, testguests.TinyGo, filepath.Join("ports", p.module)))
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tiny, p.module+".wasm"), src, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	path := writeCases(b, dir, podGroupProfiles, podGroupSchedulerConfig, podGroupPerformanceConfig)
	registry := frameworkruntime.Registry{wasmpolicy.Name: wasmpolicy.New, native.TeamIsolationName: native.NewTeamIsolation, native.BinPackingName: native.NewBinPacking}
	perf.RunBenchmarkPerfScheduling(b, path, "wasmsched-podgroups", registry, perf.WithPrepareFn(checkPodGroupsAfter))
}

// TestPodGroupChecks: what checkPodGroupsAfter fails a workload on.
func TestPodGroupChecks(t *testing.T) {
	group := func(name string, min int32, key string) schedulingv1beta1.PodGroup {
		pg := schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		if min > 0 {
			pg.Spec.SchedulingPolicy.Gang = &schedulingv1beta1.GangSchedulingPolicy{MinCount: min}
		} else {
			pg.Spec.SchedulingPolicy.Basic = &schedulingv1beta1.BasicSchedulingPolicy{}
		}
		if key != "" {
			pg.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: key}}}
		}
		return pg
	}
	on := func(nodes ...string) []*v1.Pod {
		var out []*v1.Pod
		for _, n := range nodes {
			out = append(out, &v1.Pod{Spec: v1.PodSpec{NodeName: n}})
		}
		return out
	}
	racks := map[string]map[string]string{"a1": {"rack": "a"}, "a2": {"rack": "a"}, "b1": {"rack": "b"}}
	for _, tc := range []struct {
		name    string
		pg      schedulingv1beta1.PodGroup
		members []*v1.Pod
		want    []string
	}{
		{"gang all bound", group("g", 3, ""), on("a1", "a2", "b1"), nil},
		{"gang none bound", group("g", 3, ""), on("", "", ""), []string{"pod group ns/g: 0 of its 3 pods bound"}},
		{"gang partly bound", group("g", 3, ""), on("a1", "", ""), []string{"pod group ns/g: 1 of its 3 pods bound", "gang ns/g: 1 pods bound, fewer than its minCount 3"}},
		{"basic partly bound", group("g", 0, ""), on("a1", ""), []string{"pod group ns/g: 1 of its 2 pods bound"}},
		{"one rack", group("g", 2, "rack"), on("a1", "a2"), nil},
		{"two racks", group("g", 2, "rack"), on("a1", "b1"), []string{`pod group ns/g: its pods are on nodes of 2 values of rack ("a", "b"), want one`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := groupViolations([]schedulingv1beta1.PodGroup{tc.pg}, map[string][]*v1.Pod{"ns/g": tc.members}, racks)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
		})
	}
}
