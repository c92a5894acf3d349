package policies

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

// nativeTeamIsolation is the team-isolation policy written as native Go
// against the scheduler's types, the baseline for the wasm versions.
func nativeTeamIsolation(pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	const k = "team"
	podTeam, podHas := pod.Labels[k]
	nodeTeam, nodeHas := ni.Node().Labels[k]
	switch {
	case podHas && !nodeHas:
		return fwk.NewStatus(fwk.Unschedulable, "node has no "+k+" label (shared pool), pod belongs to "+k+" "+podTeam)
	case podHas && nodeTeam != podTeam:
		return fwk.NewStatus(fwk.Unschedulable, k+" label mismatch")
	case !podHas && nodeHas:
		return fwk.NewStatus(fwk.Unschedulable, "node is dedicated to "+k+" "+nodeTeam)
	}
	return nil
}

// BenchmarkTeamIsolationFilter measures one accepting Filter call per
// iteration: native Go, and the same policy compiled with TinyGo and Go
// running through the host (pool get/put, deadline, guest call, host
// functions for one pod label (cached per cycle) and one node label).
func BenchmarkTeamIsolationFilter(b *testing.B) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p", Labels: map[string]string{"team": "payments", "app": "api"}}}
	ni := toNodeInfo(sdk.NodeData{Name: "n1", Labels: map[string]string{"team": "payments", "zone": "a", "kubernetes.io/hostname": "n1"}})
	b.Run("native", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if st := nativeTeamIsolation(pod, ni); st != nil {
				b.Fatal(st)
			}
		}
	})
	engine, err := host.NewEngine(host.EngineOptions{CacheDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer engine.Close()
	for _, tc := range testguests.Toolchains {
		b.Run(string(tc), func(b *testing.B) {
			p, err := engine.NewPolicy(context.Background(), host.PolicySpec{Name: "team-isolation", Config: "key=team", Timeout: time.Second, MemoryLimitBytes: 64 << 20, MaxInstances: 16})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close(context.Background())
			v, err := p.Load(context.Background(), testguests.PolicyBytes(b, tc, "team-isolation"), "")
			if err != nil {
				b.Fatal(err)
			}
			ps := host.NewPodState(pod)
			blob := new([]byte)
			ctx := context.Background()
			b.Run("single", func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					if _, r, err := v.Call(ctx, host.CallFilter, ps, ni, blob, nil); err != nil || r.Code != 0 {
						b.Fatal(err, r)
					}
				}
			})
			// batch32: ns/op is per node, evaluated 32 nodes per guest call as
			// the plugin does.
			b.Run("batch32", func(b *testing.B) {
				nodes := make([]fwk.NodeInfo, 32)
				for i := range nodes {
					nodes[i] = ni
				}
				results := make([]host.Result, 32)
				b.ReportAllocs()
				for i := 0; i < b.N; i += 32 {
					if _, err := v.CallNodes(ctx, host.CallFilter, ps, nodes, blob, results, nil); err != nil || results[31].Code != 0 {
						b.Fatal(err, results[31])
					}
				}
			})
		})
	}
}
