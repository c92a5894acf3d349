package extender

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

// A policy's prefilter_nodes list is the only set of nodes the pod may run
// on, in the extender as in-process: the nodes outside it fail as
// unresolvable without a Filter call, never pass (fail-open).
func TestFilterHonoursPreFilterNodeSubset(t *testing.T) {
	dir := t.TempDir()
	// semantics.wat in mode "f" names nodes a and c in its prefilter.
	pc := configv1.DefaultPolicy("semantics", config.Source{File: filepath.Join("..", "..", "host", "testdata", "semantics.wasm")})
	pc.Config, pc.Timeout = "f", time.Second
	plugin, err := wasmpolicy.NewWithArgs(context.Background(), &config.WasmPolicyArgs{Policies: []config.Policy{pc}, MaxInstancesPerPolicy: 2, FilePollInterval: time.Hour, CompilationCacheDir: filepath.Join(dir, "cache")}, wasmpolicy.NewClientHandle(nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plugin.Close() })
	nodeIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	podIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{podsByNode: func(obj interface{}) ([]string, error) { return []string{obj.(*v1.Pod).Spec.NodeName}, nil }})
	for _, name := range []string{"a", "b", "c"} {
		if err := nodeIdx.Add(st.MakeNode().Name(name).Obj()); err != nil {
			t.Fatal(err)
		}
	}
	s := &Server{plugin: plugin, nodes: corelisters.NewNodeLister(nodeIdx), pods: podIdx, opts: Options{MaxRequestBytes: 1 << 20, RequestTimeout: time.Minute, Parallelism: 2}}
	names := []string{"a", "b", "c"}
	pod := st.MakePod().Name("p").Namespace("default").UID("p").Obj()
	out, err := s.filter(context.Background(), &extenderv1.ExtenderArgs{Pod: pod, NodeNames: &names})
	if err != nil {
		t.Fatal(err)
	}
	res := out.(*extenderv1.ExtenderFilterResult)
	if res.NodeNames == nil || strings.Join(*res.NodeNames, ",") != "a,c" {
		t.Fatalf("passed = %v, want a,c (result %+v)", res.NodeNames, res)
	}
	if got := res.FailedAndUnresolvableNodes["b"]; got != "node(s) didn't satisfy plugin(s) [WasmPolicy]" {
		t.Errorf("node b: %q, want the framework's PreFilterResult message", got)
	}
	if len(res.FailedNodes) != 0 {
		t.Errorf("failed nodes %v, want none", res.FailedNodes)
	}
}
