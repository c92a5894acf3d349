package extender

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/internal/framework"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

// newBenchServer builds a Server over real listers filled with nodes (no
// API server), running team-isolation (Filter) and bin-packing (Score)
// compiled with TinyGo.
func newBenchServer(b testing.TB, n int) (*Server, []*v1.Node) {
	dir := b.TempDir()
	var policies []config.Policy
	for _, p := range []struct{ name, module, cfg string }{{"team-isolation", "team-isolation", "key=team"}, {"bin-packing", "bin-packing", "cpu=1,memory=1"}} {
		path := filepath.Join(dir, p.name+".wasm")
		if err := os.WriteFile(path, testguests.PolicyBytes(b, testguests.TinyGo, p.module), 0o644); err != nil {
			b.Fatal(err)
		}
		pc := configv1.DefaultPolicy(p.name, config.Source{File: path})
		pc.Config, pc.Timeout = p.cfg, time.Second
		policies = append(policies, pc)
	}
	plugin, err := wasmpolicy.NewWithArgs(context.Background(), &config.WasmPolicyArgs{Policies: policies, MaxInstancesPerPolicy: 16, FilePollInterval: time.Hour, CompilationCacheDir: filepath.Join(dir, "cache")}, wasmpolicy.NewClientHandle(nil, nil))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = plugin.Close() })
	nodeIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	podIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{podsByNode: func(obj interface{}) ([]string, error) { return []string{obj.(*v1.Pod).Spec.NodeName}, nil }})
	var nodes []*v1.Node
	for i := 0; i < n; i++ {
		team := []string{"payments", "search"}[i%2]
		node := &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%04d", i), Labels: map[string]string{
				"team": team, "topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", i%3), "kubernetes.io/hostname": fmt.Sprintf("node-%04d", i),
				"node.kubernetes.io/instance-type": "m5.2xlarge", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}},
			Status: v1.NodeStatus{Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("8"), v1.ResourceMemory: resource.MustParse("32Gi"), v1.ResourcePods: resource.MustParse("110")}},
		}
		node.Status.Capacity = node.Status.Allocatable
		_ = nodeIdx.Add(node)
		nodes = append(nodes, node)
	}
	return &Server{plugin: plugin, nodes: corelisters.NewNodeLister(nodeIdx), pods: podIdx, opts: Options{MaxRequestBytes: 64 << 20, RequestTimeout: time.Minute, Parallelism: 16}}, nodes
}

// BenchmarkCycle is one scheduling cycle's policy work (PreFilter, Filter on
// every node, PreScore, Score, NormalizeScore) for the same two policies:
// in-process through the plugin, and through the extender's HTTP API (filter
// then prioritize), with and without nodeCacheCapable.
func BenchmarkCycle(b *testing.B) {
	const n = 100
	s, nodes := newBenchServer(b, n)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "p", Labels: map[string]string{"team": "payments"}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")}}}}}}
	infos := make([]fwk.NodeInfo, n)
	for i, node := range nodes {
		ni := intree.NewNodeInfo()
		ni.SetNode(node)
		infos[i] = ni
	}
	ctx := context.Background()
	b.Run(fmt.Sprintf("in-process/nodes=%d", n), func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			state := intree.NewCycleState()
			if _, st := s.plugin.PreFilter(ctx, state, pod, infos); !st.IsSuccess() {
				b.Fatal(st)
			}
			var feasible []fwk.NodeInfo
			for _, ni := range infos {
				if st := s.plugin.Filter(ctx, state, pod, ni); st.IsSuccess() {
					feasible = append(feasible, ni)
				}
			}
			if st := s.plugin.PreScore(ctx, state, pod, feasible); !st.IsSuccess() {
				b.Fatal(st)
			}
			scores := make(framework.NodeScoreList, len(feasible))
			for j, ni := range feasible {
				_, _ = s.plugin.Score(ctx, state, pod, ni)
				scores[j].Name = ni.Node().Name
			}
			if st := s.plugin.NormalizeScore(ctx, state, pod, scores); !st.IsSuccess() {
				b.Fatal(st)
			}
		}
	})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	post := func(b *testing.B, verb string, args *extenderv1.ExtenderArgs, out any) {
		body, _ := json.Marshal(args)
		resp, err := http.Post(srv.URL+"/"+verb, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			b.Fatal(err)
		}
	}
	for _, cacheable := range []bool{true, false} {
		b.Run(fmt.Sprintf("extender/nodeCacheCapable=%v/nodes=%d", cacheable, n), func(b *testing.B) {
			names := make([]string, n)
			list := &v1.NodeList{}
			for i, node := range nodes {
				names[i] = node.Name
				list.Items = append(list.Items, *node)
			}
			for i := 0; i < b.N; i++ {
				args := &extenderv1.ExtenderArgs{Pod: pod}
				if cacheable {
					args.NodeNames = &names
				} else {
					args.Nodes = list
				}
				var fr extenderv1.ExtenderFilterResult
				post(b, "filter", args, &fr)
				if fr.Error != "" {
					b.Fatal(fr.Error)
				}
				if cacheable {
					args.NodeNames = fr.NodeNames
				} else {
					args.Nodes = fr.Nodes
				}
				var pl extenderv1.HostPriorityList
				post(b, "prioritize", args, &pl)
				if len(pl) != n/2 {
					b.Fatalf("prioritized %d nodes, want %d", len(pl), n/2)
				}
			}
		})
	}
}
