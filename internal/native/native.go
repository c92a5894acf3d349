// Package native holds the example policies' logic written as ordinary
// kube-scheduler framework plugins: the baseline the wasm versions are
// measured against, in the micro, cycle and cluster benchmarks and by
// wasmsched bench.
package native

import (
	"context"
	"encoding/json"
	"strings"
	"time"

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

// FreezeWindow is plugins-wasm/freeze-window as a native PreEnqueue
// plugin: a change freeze from Start to End, lifted for a pod annotated
// Approval=true. Now is its clock.
type FreezeWindow struct {
	Start, End time.Time
	Approval   string
	Reason     string
	Now        func() time.Time
}

var _ framework.PreEnqueuePlugin = &FreezeWindow{}

// FreezeWindowName is the native freeze-window plugin's name.
const FreezeWindowName = "FreezeWindowNative"

// Name implements framework.Plugin.
func (*FreezeWindow) Name() string { return FreezeWindowName }

// PreEnqueue implements framework.PreEnqueuePlugin, with the wasm policy's
// verdicts and reason.
func (f *FreezeWindow) PreEnqueue(_ context.Context, pod *v1.Pod) *fwk.Status {
	now := f.Now()
	if now.Before(f.Start) || !now.Before(f.End) || pod.Annotations[f.Approval] == "true" {
		return nil
	}
	what := "change freeze"
	if f.Reason != "" {
		what += " (" + f.Reason + ")"
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, what+" until "+f.End.UTC().Format(time.RFC3339)+"; to schedule the pod now, annotate it "+f.Approval+"=true")
}

// PlacementPatch is plugins-wasm/placement-recorder's work done natively:
// the zone label and the policies annotation, as the JSON merge patch
// WasmPolicy's PreBind sends. policies are name, sha256, mode triples.
func PlacementPatch(ni fwk.NodeInfo, policies [][3]string) ([]byte, error) {
	const prefix = "placement.wasmsched.io/"
	labels := map[string]string{}
	if zone, ok := ni.Node().Labels["topology.kubernetes.io/zone"]; ok {
		labels[prefix+"zone"] = zone
	}
	var b strings.Builder
	for i, p := range policies {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p[0] + "@sha256:" + p[1])
		if p[2] == "Audit" {
			b.WriteString(" (Audit)")
		}
	}
	meta := map[string]map[string]string{"annotations": {prefix + "policies": b.String()}}
	if len(labels) > 0 {
		meta["labels"] = labels
	}
	return json.Marshal(map[string]any{"metadata": meta})
}
