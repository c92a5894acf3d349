// policytest is main-line only (pkg/nodeinfo follows the main line's
// kube-scheduler).

//go:build !k8s_1_34

package policies

import (
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
	pt "github.com/wasmsched/wasmsched/policytest"
)

// Each example policy, written as a policy author would test it with
// policytest: Go-built pods and nodes, the compiled module, the real host.

func TestTeamIsolationWithPolicytest(t *testing.T) {
	for _, tc := range pt.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			p := pt.Load(t, pt.Build(t, tc, "../../plugins-wasm/team-isolation"), pt.Config("key=team"))
			pod := pt.Pod("web").Label("team", "a").CPU("500m").Obj()
			got := p.Schedule(pod, []*v1.Node{
				pt.Node("a-1").Label("team", "a").Obj(),
				pt.Node("b-1").Label("team", "b").Obj(),
				pt.Node("shared").Obj(),
			})
			if !got["a-1"].Passed() || got["b-1"].Passed() || got["shared"].Passed() {
				t.Fatalf("verdicts %+v", got)
			}
			if got["b-1"].Reason != "team label mismatch" {
				t.Fatalf("b-1 reason %q", got["b-1"].Reason)
			}
			if v := p.Filter(pt.Pod("batch").Obj(), pt.Node("a-2").Label("team", "a").Obj()); v.Passed() || !strings.Contains(v.Reason, "dedicated to team a") {
				t.Fatalf("an unlabelled pod on a team node: %+v", v)
			}
		})
	}
}

func TestBinPackingWithPolicytest(t *testing.T) {
	for _, tc := range pt.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			p := pt.Load(t, pt.Build(t, tc, "../../plugins-wasm/bin-packing"), pt.Config("cpu=1"))
			got := p.Schedule(pt.Pod("web").CPU("1").Obj(),
				[]*v1.Node{pt.Node("busy").Obj(), pt.Node("empty").Obj()},
				pt.Pod("running").CPU("2").On("busy").Obj())
			// busy: (2+1)/4 = 75; empty: 1/4 = 25.
			if *got["busy"].Score != 75 || *got["empty"].Score != 25 {
				t.Fatalf("scores busy=%d empty=%d, want 75 and 25", *got["busy"].Score, *got["empty"].Score)
			}
		})
	}
}

func TestSpreadWithPolicytest(t *testing.T) {
	for _, tc := range pt.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			p := pt.Load(t, pt.Build(t, tc, "../../plugins-wasm/spread"), pt.Config("cpu=1"))
			got := p.Schedule(pt.Pod("web").CPU("1").Obj(),
				[]*v1.Node{pt.Node("busy").Obj(), pt.Node("empty").Obj()},
				pt.Pod("running").CPU("2").On("busy").Obj())
			if *got["busy"].Score != 25 || *got["empty"].Score != 75 {
				t.Fatalf("scores busy=%d empty=%d, want 25 and 75", *got["busy"].Score, *got["empty"].Score)
			}
		})
	}
}

func TestMaintenanceAvoidanceWithPolicytest(t *testing.T) {
	for _, tc := range pt.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			p := pt.Load(t, pt.Build(t, tc, "../../plugins-wasm/maintenance-avoidance"))
			nodes := []*v1.Node{
				pt.Node("ok").Obj(),
				pt.Node("window").Annotation("maintenance.wasmsched.io/window", "CHG-9 Sun 01:00").Obj(),
				pt.Node("draining").Taint("maintenance.wasmsched.io", v1.TaintEffectNoSchedule).Obj(),
			}
			got := p.Schedule(pt.Pod("web").Obj(), nodes)
			if !got["ok"].Passed() || got["window"].Passed() || got["draining"].Passed() || !strings.Contains(got["window"].Reason, "CHG-9 Sun 01:00") {
				t.Fatalf("verdicts %+v", got)
			}
			drain := pt.Pod("drainer").Toleration("maintenance.wasmsched.io", v1.TaintEffectNoSchedule).Obj()
			if v := p.Filter(drain, nodes[2]); !v.Passed() {
				t.Fatalf("a pod tolerating the maintenance taint: %+v", v)
			}
		})
	}
}

func TestGPUFitWithPolicytest(t *testing.T) {
	for _, tc := range pt.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			p := pt.Load(t, pt.Build(t, tc, "../../plugins-wasm/gpu-fit"))
			gpu := pt.Node("gpu").Allocatable("nvidia.com/gpu", "2").Obj()
			cpu := pt.Node("cpu").Obj()
			got := p.Schedule(pt.Pod("train").Request("nvidia.com/gpu", "1").Obj(), []*v1.Node{gpu, cpu})
			if !got["gpu"].Passed() || got["cpu"].Code != "UnschedulableAndUnresolvable" {
				t.Fatalf("a GPU pod: %+v", got)
			}
			if v := p.Filter(pt.Pod("web").Obj(), gpu); v.Passed() {
				t.Fatalf("a pod without GPUs was admitted to a GPU node: %+v", v)
			}
		})
	}
}

// team-pod-cap reads the pods on a node: with pt.Reads("NodePods") it caps
// the team, without it every node of a labelled pod is the policy error
// naming the declaration (the default failurePolicy Fail rejects it, Ignore
// admits it).
func TestTeamPodCapReadsWithPolicytest(t *testing.T) {
	for _, tc := range pt.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			module := pt.Build(t, tc, "../../plugins-wasm/team-pod-cap")
			pod := pt.Pod("new").Label("team", "pay").Obj()
			nodes := []*v1.Node{pt.Node("full").Obj(), pt.Node("room").Obj()}
			running := []*v1.Pod{
				pt.Pod("p1").Label("team", "pay").On("full").Obj(),
				pt.Pod("p2").Label("team", "pay").On("full").Obj(),
				pt.Pod("s1").Label("team", "search").On("room").Obj(),
			}
			got := pt.Load(t, module, pt.Config("key=team,max=2"), pt.Reads("NodePods")).Schedule(pod, nodes, running...)
			if got["full"].Passed() || !got["room"].Passed() {
				t.Fatalf("declared: verdicts %+v, want full rejected and room admitted", got)
			}
			const why = "policy error: declare NodePods in policies[].reads to use Node.Pods"
			got = pt.Load(t, module, pt.Config("key=team,max=2")).Schedule(pod, nodes, running...)
			for _, n := range []string{"full", "room"} {
				if v := got[n]; v.Code != "UnschedulableAndUnresolvable" || v.Reason != why {
					t.Errorf("undeclared: %s is %s %q, want UnschedulableAndUnresolvable %q", n, v.Code, v.Reason, why)
				}
			}
			got = pt.Load(t, module, pt.Config("key=team,max=2"), pt.FailurePolicy("Ignore")).Schedule(pod, nodes, running...)
			if !got["full"].Passed() || !got["room"].Passed() {
				t.Errorf("undeclared with failurePolicy Ignore: verdicts %+v, want both admitted", got)
			}
		})
	}
}

// A policy that rejects when Node.Object comes back empty, run without its
// WholeObjects declaration: in single calls and in the table batches the
// plugin sends once the guest has declared its columns (the second cycle),
// every node's verdict is the read's policy error, never the policy's own
// rejection reached without the data.
func TestUndeclaredErrorOutlivesTheRejectionWithPolicytest(t *testing.T) {
	for _, tc := range pt.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			module := pt.Build(t, tc, "../../plugins-wasm/testdata/object-floor")
			var nodes []*v1.Node
			for i := range 40 {
				n := pt.Node(fmt.Sprintf("n%02d", i)).Obj()
				n.Status.NodeInfo.KubeletVersion = []string{"v1.37.2", "v1.29.0"}[i%2]
				nodes = append(nodes, n)
			}
			declared := pt.Load(t, module, pt.Reads("WholeObjects"))
			undeclared := pt.Load(t, module)
			const why = "policy error: declare WholeObjects in policies[].reads to use Node.Object"
			for cycle := range 2 {
				got := declared.Schedule(pt.Pod("p").Obj(), nodes)
				for i, n := range nodes {
					if got[n.Name].Passed() != (i%2 == 0) {
						t.Fatalf("declared, cycle %d: %s (%s) %+v", cycle, n.Name, n.Status.NodeInfo.KubeletVersion, got[n.Name])
					}
				}
				got = undeclared.Schedule(pt.Pod("p").Obj(), nodes)
				for _, n := range nodes {
					if v := got[n.Name]; v.Code != "UnschedulableAndUnresolvable" || v.Reason != why {
						t.Fatalf("undeclared, cycle %d: %s is %s %q, want %q", cycle, n.Name, v.Code, v.Reason, why)
					}
				}
			}
		})
	}
}

// A policy that reads granted objects, tested with policytest.Objects:
// typed Leases given to lease-freshness's declared read, read at the
// deterministic clock (2022-01-01T00:00:00Z).
func TestLeaseFreshnessWithPolicytest(t *testing.T) {
	lease := func(node string, renewed time.Time) runtime.Object {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-node-lease", Name: node},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &node, RenewTime: &metav1.MicroTime{Time: renewed}}}
	}
	clock := time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range pt.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			p := pt.Load(t, pt.Build(t, tc, "../../plugins-wasm/lease-freshness"), pt.Config("maxAge=20s,missing=reject"),
				pt.PolicyOption(func(p *config.Policy) { p.Weight = 2 }),
				pt.Objects("coordination.k8s.io/v1", "Lease", []string{"spec.renewTime", "spec.holderIdentity"},
					lease("fresh", clock.Add(-5*time.Second)), lease("stale", clock.Add(-2*time.Minute))))
			got := p.Schedule(pt.Pod("web").Obj(), []*v1.Node{pt.Node("fresh").Obj(), pt.Node("stale").Obj(), pt.Node("gone").Obj()})
			if !got["fresh"].Passed() {
				t.Errorf("fresh: %+v", got["fresh"])
			}
			if v := got["stale"]; v.Passed() || !strings.HasPrefix(v.Reason, "the kubelet Lease of node stale was last renewed 2m0s ago") {
				t.Errorf("stale: %+v", v)
			}
			if v := got["gone"]; v.Passed() || v.Reason != "node gone has no kubelet Lease in kube-node-lease" {
				t.Errorf("gone: %+v", v)
			}
		})
	}
}
