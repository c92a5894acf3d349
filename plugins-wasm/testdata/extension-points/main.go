// Command extension-points is a test policy that uses every extension point,
// so tests can check them through the real host and framework:
//   - PreFilter reads the pod label "zone": missing → Skip (no Filter this
//     cycle); "none" → reject the pod; otherwise store it as cycle state.
//   - Filter admits nodes whose label "zone" equals the cycle state.
//   - PreScore skips scoring when the pod has the label "score=off".
//   - Score returns 1000 × the node's pod count (deliberately above 100), and
//     NormalizeScore rescales so the largest score becomes 100.
//   - PreEnqueue gates pods labelled gate=closed.
//   - PreBind annotates the pod with the zone PreFilter stored
//     (ep.example.com/zone), which needs patchPrefixes [ep.example.com/].
//   - PostFilter, when no node fit, adds "no node in zone <zone>" with the
//     zone PreFilter stored.
//   - PostBind reads the pod's zone and the node's (its call is counted).
//   - Reserve takes one of the count "zone/<node's zone>" for the pod and
//     refuses pods labelled reserve=refuse (after taking it: the host gives
//     it back); Unreserve reads the count. Both need KeepsState.
//   - Permit makes pods labelled permit=wait wait (up to 30s) and allows
//     the pods waiting at it labelled permit=release's value; it refuses
//     pods labelled permit=refuse.
package main

import (
	"time"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

func init() {
	sdk.RegisterPreFilter(preFilter)
	sdk.RegisterFilter(filter)
	sdk.RegisterPreScore(preScore)
	sdk.RegisterScore(score)
	sdk.RegisterNormalizeScore(normalize)
	sdk.RegisterPreEnqueue(preEnqueue)
	sdk.RegisterPreBind(preBind)
	sdk.RegisterPostFilter(postFilter)
	sdk.RegisterPostBind(postBind)
	sdk.RegisterReserve(reserve)
	sdk.RegisterUnreserve(unreserve)
	sdk.RegisterPermit(permit)
	sdk.KeepsState()
}

func permit(pod sdk.Pod, node sdk.Node) sdk.Status {
	v, _ := pod.Label("permit")
	switch v {
	case "wait":
		return sdk.Wait("waiting for a release", 30*time.Second)
	case "refuse":
		return sdk.Unschedulable("permit refused")
	case "release":
		waiting, err := sdk.WaitingPods("permit=wait")
		if err != nil {
			return sdk.Error(err.Error())
		}
		for _, w := range waiting {
			if err := sdk.AllowWaiting(w.UID); err != nil {
				return sdk.Error(err.Error())
			}
		}
	}
	return sdk.Success()
}

func reserve(pod sdk.Pod, node sdk.Node) sdk.Status {
	zone, _ := node.Label("zone")
	if _, err := sdk.AddCount("zone/"+zone, 1); err != nil {
		return sdk.Error(err.Error())
	}
	if v, _ := pod.Label("reserve"); v == "refuse" {
		return sdk.Unschedulable("reservation refused")
	}
	return sdk.Success()
}

func unreserve(pod sdk.Pod, node sdk.Node) {
	zone, _ := node.Label("zone")
	_, _ = sdk.Count("zone/" + zone)
}

func postFilter(pod sdk.Pod) sdk.Status {
	if zone := sdk.CycleState(); zone != nil {
		return sdk.Unschedulable("no node in zone " + string(zone))
	}
	return sdk.Success()
}

func postBind(pod sdk.Pod, node sdk.Node) {
	_, _ = pod.Label("zone")
	_, _ = node.Label("zone")
}

func preEnqueue(pod sdk.Pod) sdk.Status {
	if v, _ := pod.Label("gate"); v == "closed" {
		return sdk.UnschedulableAndUnresolvable("gate closed")
	}
	return sdk.Success()
}

func preBind(pod sdk.Pod, node sdk.Node) sdk.Status {
	if zone := sdk.CycleState(); zone != nil {
		if err := sdk.SetPodAnnotation("ep.example.com/zone", string(zone)); err != nil {
			return sdk.Error(err.Error())
		}
	}
	return sdk.Success()
}

func preFilter(pod sdk.Pod) sdk.Status {
	zone, ok := pod.Label("zone")
	switch {
	case !ok:
		return sdk.Skip()
	case zone == "none":
		return sdk.Unschedulable("pod wants no zone")
	}
	sdk.SetCycleState([]byte(zone))
	return sdk.Success()
}

func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
	want := string(sdk.CycleState())
	if got, _ := node.Label("zone"); got != want {
		return sdk.Unschedulable("zone " + got + " is not " + want)
	}
	return sdk.Success()
}

func preScore(pod sdk.Pod) sdk.Status {
	if v, _ := pod.Label("score"); v == "off" {
		return sdk.Skip()
	}
	return sdk.Success()
}

func score(pod sdk.Pod, node sdk.Node) (int64, sdk.Status) {
	return int64(node.PodCount()) * 1000, sdk.Success()
}

func normalize(pod sdk.Pod, scores []int64) sdk.Status {
	var top int64
	for _, s := range scores {
		top = max(top, s)
	}
	for i := range scores {
		if top > 0 {
			scores[i] = scores[i] * 100 / top
		}
	}
	return sdk.Success()
}

func main() {}
