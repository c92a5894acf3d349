// Package native holds the example policies' logic written as ordinary
// kube-scheduler framework plugins: the baseline the wasm versions are
// measured against, in the micro, cycle and cluster benchmarks.
package native

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/internal/framework"
)

// TeamIsolationName is the native team-isolation Filter plugin's name.
const TeamIsolationName = "TeamIsolationNative"

// TeamIsolation keeps a team's pods on its nodes, exactly like
// plugins-wasm/team-isolation with key=team.
type TeamIsolation struct{}

var _ framework.FilterPlugin = TeamIsolation{}

// NewTeamIsolation is the plugin factory.
func NewTeamIsolation(context.Context, runtime.Object, framework.Handle) (framework.Plugin, error) {
	return TeamIsolation{}, nil
}

// Name implements framework.Plugin.
func (TeamIsolation) Name() string { return TeamIsolationName }

// Filter implements framework.FilterPlugin.
func (TeamIsolation) Filter(_ context.Context, _ fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	return FilterTeam(pod, ni)
}

// FilterTeam is the policy's logic.
func FilterTeam(pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
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

// BinPackingName is the native bin-packing Score plugin's name.
const BinPackingName = "BinPackingNative"

// BinPacking scores like plugins-wasm/bin-packing with cpu=1,memory=1.
type BinPacking struct{}

var _ framework.ScorePlugin = BinPacking{}

// NewBinPacking is the plugin factory.
func NewBinPacking(context.Context, runtime.Object, framework.Handle) (framework.Plugin, error) {
	return BinPacking{}, nil
}

// Name implements framework.Plugin.
func (BinPacking) Name() string { return BinPackingName }

// Score implements framework.ScorePlugin.
func (BinPacking) Score(_ context.Context, _ fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) (int64, *fwk.Status) {
	return ScorePacking(pod, ni), nil
}

// ScoreExtensions implements framework.ScorePlugin.
func (BinPacking) ScoreExtensions() framework.ScoreExtensions { return nil }

// ScorePacking is the policy's logic: MostAllocated over cpu and memory,
// counting the pod's own requests.
func ScorePacking(pod *v1.Pod, ni fwk.NodeInfo) int64 {
	var cpuReq, memReq int64
	for i := range pod.Spec.Containers {
		r := pod.Spec.Containers[i].Resources.Requests
		cpuReq += r.Cpu().MilliValue()
		memReq += r.Memory().Value()
	}
	alloc, used := ni.GetAllocatable(), ni.GetRequested()
	var sum, total int64
	for _, r := range [2]struct{ alloc, used int64 }{
		{alloc.GetMilliCPU(), used.GetMilliCPU() + cpuReq},
		{alloc.GetMemory(), used.GetMemory() + memReq},
	} {
		if r.alloc <= 0 {
			continue
		}
		u := min(r.used, r.alloc)
		sum += u * 100 / r.alloc
		total++
	}
	if total == 0 {
		return 0
	}
	return sum / total
}
