// Command owner-spread is a Score policy: a pod with a controller
// (the ownerReference with controller: true) prefers nodes that run fewer
// pods of the same controller. reads: [NodePods].
//
// Score (raw): the number of non-terminating pods on the node whose
// controller is the pod's (same UID; without a UID, same namespace, kind and
// name). NormalizeScore: 100 for the fewest, 0 for the most, linear between;
// 100 everywhere when all are equal. PreScore: Skip for a pod without a
// controller (every node then scores 0).
package main

import sdk "github.com/wasmsched/wasmsched/guest-sdk"

func init() {
	sdk.RegisterPreScore(preScore)
	sdk.RegisterScore(score)
	sdk.RegisterNormalizeScore(normalize)
}

type owner struct {
	ok                  bool
	ns, kind, name, uid string
}

var podOwner sdk.PerCycle[owner]

func controllerOf(pod sdk.Pod) owner {
	return podOwner.Get(func() owner {
		for _, r := range pod.OwnerReferences() {
			if r.Controller {
				return owner{ok: true, ns: pod.Namespace(), kind: r.Kind, name: r.Name, uid: r.UID}
			}
		}
		return owner{}
	})
}

func preScore(pod sdk.Pod) sdk.Status {
	if !controllerOf(pod).ok {
		return sdk.Skip()
	}
	return sdk.Success()
}

func sameOwner(o owner, p sdk.NodePod) bool {
	for _, r := range p.OwnerReferences {
		if !r.Controller {
			continue
		}
		if o.uid != "" && r.UID != "" {
			return r.UID == o.uid
		}
		return p.Namespace == o.ns && r.Kind == o.kind && r.Name == o.name
	}
	return false
}

func score(pod sdk.Pod, node sdk.Node) (int64, sdk.Status) {
	o := controllerOf(pod)
	if !o.ok {
		return 0, sdk.Success()
	}
	var n int64
	for _, p := range node.Pods() {
		if !p.Terminating && sameOwner(o, p) {
			n++
		}
	}
	return n, sdk.Success()
}

func normalize(_ sdk.Pod, scores []int64) sdk.Status {
	if len(scores) == 0 {
		return sdk.Success()
	}
	lo, hi := scores[0], scores[0]
	for _, s := range scores {
		lo, hi = min(lo, s), max(hi, s)
	}
	for i, s := range scores {
		if hi == lo {
			scores[i] = 100
		} else {
			scores[i] = 100 * (hi - s) / (hi - lo)
		}
	}
	return sdk.Success()
}

func main() {}
