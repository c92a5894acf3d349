// Command tainttoleration is kube-scheduler's TaintToleration plugin as a
// wasmsched policy. Filter: a node with a NoSchedule or NoExecute taint the
// pod does not tolerate is UnschedulableAndUnresolvable. Score: the number
// of PreferNoSchedule taints the pod does not tolerate (counting only the
// tolerations whose effect is empty or PreferNoSchedule), which
// NormalizeScore turns into 100 for the fewest and 0 for the most
// (upstream's DefaultNormalizeScore with reverse: every node scores 100 when
// no node has such a taint).
package main

import sdk "github.com/wasmsched/wasmsched/guest-sdk"

func init() {
	sdk.RegisterFilter(filter)
	sdk.RegisterScore(score)
	sdk.RegisterNormalizeScore(normalize)
}

func tolerated(tols []sdk.Toleration, t sdk.Taint) bool {
	for _, tol := range tols {
		if tol.Tolerates(t) {
			return true
		}
	}
	return false
}

// The pod's tolerations, decoded once per cycle rather than once per node,
// and the ones its Score considers (effect "" or PreferNoSchedule).
var (
	tolerations     sdk.PerCycle[[]sdk.Toleration]
	preferTolerated sdk.PerCycle[[]sdk.Toleration]
)

func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
	// Most nodes have no NoSchedule or NoExecute taint: the effects column
	// answers them without reading the list (and so their verdicts can be
	// remembered for the next pod).
	if node.TaintEffects()&(sdk.TaintNoSchedule|sdk.TaintNoExecute) == 0 {
		return sdk.Success()
	}
	taints := node.Taints()
	if len(taints) == 0 {
		return sdk.Success()
	}
	tols := tolerations.Get(pod.Tolerations)
	for _, t := range taints {
		if (t.Effect == "NoSchedule" || t.Effect == "NoExecute") && !tolerated(tols, t) {
			return sdk.UnschedulableAndUnresolvable("node(s) had untolerated taint(s)")
		}
	}
	return sdk.Success()
}

func score(pod sdk.Pod, node sdk.Node) (int64, sdk.Status) {
	if node.TaintEffects()&sdk.TaintPreferNoSchedule == 0 {
		return 0, sdk.Success()
	}
	taints := node.Taints()
	if len(taints) == 0 {
		return 0, sdk.Success()
	}
	prefer := preferTolerated.Get(func() []sdk.Toleration {
		var out []sdk.Toleration
		for _, tol := range pod.Tolerations() {
			if tol.Effect == "" || tol.Effect == "PreferNoSchedule" {
				out = append(out, tol)
			}
		}
		return out
	})
	var n int64
	for _, t := range taints {
		if t.Effect == "PreferNoSchedule" && !tolerated(prefer, t) {
			n++
		}
	}
	return n, sdk.Success()
}

func normalize(_ sdk.Pod, scores []int64) sdk.Status {
	var most int64
	for _, s := range scores {
		most = max(most, s)
	}
	for i, s := range scores {
		if most == 0 {
			scores[i] = 100
		} else {
			scores[i] = 100 - 100*s/most
		}
	}
	return sdk.Success()
}

func main() {}
