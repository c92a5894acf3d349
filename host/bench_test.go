package host

import (
	"context"
	"slices"
	"testing"
	"time"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/internal/testguests"
)

// BenchmarkCallOverhead measures a Filter call on the minimal fixture (two
// host calls, no allocation in the guest): the host's own cost per call.
func BenchmarkCallOverhead(b *testing.B) {
	p := newPolicy(b, newEngine(b), PolicySpec{MaxInstances: 16})
	v := load(b, p, testguests.Fixture(b, "ok"))
	ni := nodeInfo("n", map[string]string{"verdict": "accept"}, false)
	pod := testPod()
	blob := new(PolicyCycle)
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
		if _, err := v.CallNodes(context.Background(), CallFilter, pod, nodes, new(PolicyCycle), results, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDeadlineOverrun measures how far a looping call runs past its
// 10 ms timeout, on a warm instance (each iteration then makes a healthy
// call, which leaves a fresh instance in the pool): the distribution behind
// the claim "a call ends within its timeout + 10 ms". It reports the p50,
// p99 and worst overrun in milliseconds; docs/security.md shows a run.
func BenchmarkDeadlineOverrun(b *testing.B) {
	const timeout = 10 * time.Millisecond
	p := newPolicy(b, newEngine(b), PolicySpec{Timeout: timeout, MaxInstances: 1})
	v := load(b, p, testguests.Fixture(b, "loop"))
	pod, looping, ok := testPod(), nodeInfo("cordoned", nil, true), nodeInfo("ok", nil, false)
	ctx := context.Background()
	var o overruns
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, _, err := v.Call(ctx, CallFilter, pod, looping, new(PolicyCycle), nil); err == nil || err.Outcome != OutcomeTimeout {
			b.Fatalf("want a timeout, got %v", err)
		}
		o.add(time.Since(start), timeout)
		b.StopTimer()
		if _, _, err := v.Call(ctx, CallFilter, pod, ok, new(PolicyCycle), nil); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	s := slices.Clone(o)
	slices.Sort(s)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(s[len(s)/2]), "p50-overrun-ms")
	b.ReportMetric(ms(s[len(s)*99/100]), "p99-overrun-ms")
	b.ReportMetric(ms(s[len(s)-1]), "max-overrun-ms")
}
