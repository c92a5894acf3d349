// policytest is main-line only (pkg/nodeinfo follows the main line's
// kube-scheduler).

//go:build !k8s_1_34

package policies

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

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
