// Command service-colocation is a Score policy: a pod labelled
// colocate-with=<app> prefers nodes that already run (non-terminating) pods
// labelled app=<app> in its own namespace. reads: [NodePods].
//
// Score: 100 on a node that runs at least one such pod, 0 elsewhere; a pod
// without the label scores 0 everywhere (PreScore Skip).
package main

import sdk "github.com/wasmsched/wasmsched/guest-sdk"

func init() {
	sdk.RegisterPreScore(preScore)
	sdk.RegisterScore(score)
}

func preScore(pod sdk.Pod) sdk.Status {
	if _, ok := pod.Label("colocate-with"); !ok {
		return sdk.Skip()
	}
	return sdk.Success()
}

func score(pod sdk.Pod, node sdk.Node) (int64, sdk.Status) {
	app, ok := pod.Label("colocate-with")
	if !ok {
		return 0, sdk.Success()
	}
	ns := pod.Namespace()
	for _, p := range node.Pods() {
		if p.Terminating || !sdk.Equal(p.Namespace, ns) {
			continue
		}
		if v, has := p.Labels["app"]; has && sdk.Equal(v, app) {
			return 100, sdk.Success()
		}
	}
	return 0, sdk.Success()
}

func main() {}
