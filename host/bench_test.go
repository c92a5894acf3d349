package host

import (
	"context"
	"github.com/wasmsched/wasmsched/internal/testguests"
	fwk "k8s.io/kube-scheduler/framework"
	"testing"
)

// BenchmarkCallOverhead measures a Filter call on the minimal fixture (two
// host calls, no allocation in the guest): the host's own cost per call.
func BenchmarkCallOverhead(b *testing.B) {
	p := newPolicy(b, newEngine(b), PolicySpec{MaxInstances: 16})
	v := load(b, p, testguests.Fixture(b, "ok"))
	ni := nodeInfo("n", map[string]string{"verdict": "accept"}, false)
	pod := testPod()
	blob := new([]byte)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, r, err := v.Call(ctx, CallFilter, pod, ni, blob, nil); err != nil || r.Code != 0 {
			b.Fatal(err, r)
		}
	}
}

// BenchmarkBatchHostCalls measures, per node, a batched Filter whose guest
// makes two host calls and nothing else: select_node plus node_pod_count
// (hostcalls) or node_label (hostlabel).
func BenchmarkBatchHostCalls(b *testing.B) {
	for _, fixture := range []string{"hostcalls", "hostlabel"} {
		b.Run(fixture, func(b *testing.B) { benchBatch(b, fixture) })
	}
}

func benchBatch(b *testing.B, fixture string) {
	p := newPolicy(b, newEngine(b), PolicySpec{MaxInstances: 1})
	v := load(b, p, testguests.Fixture(b, fixture))
	nodes := make([]fwk.NodeInfo, 32)
	for i := range nodes {
		nodes[i] = nodeInfo("n", map[string]string{"team": "payments", "zone": "a", "kubernetes.io/hostname": "n"}, false)
	}
	results := make([]Result, 32)
	pod := testPod()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += 32 {
		if _, err := v.CallNodes(context.Background(), CallFilter, pod, nodes, new([]byte), results, nil); err != nil {
			b.Fatal(err)
		}
	}
}
