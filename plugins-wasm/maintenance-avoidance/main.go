// Command maintenance-avoidance is a wasmsched Filter policy that keeps new
// pods off nodes that are being drained or are about to be.
//
// Config (all optional):
//
//	annotation=<key>   nodes with this annotation are in maintenance (default maintenance.wasmsched.io/window)
//	taint=<key>        nodes with a taint of this key are in maintenance (default maintenance.wasmsched.io)
//
// The annotation's value is shown in the reason (for example a ticket or a
// time window). A pod that tolerates the maintenance taint (drain tooling,
// DaemonSets) may still land on such a node; an annotation value of "false"
// or "" means no maintenance.
package main

import sdk "github.com/wasmsched/wasmsched/guest-sdk"

var (
	annotationKey string
	taintKey      string
)

func init() {
	sdk.RegisterFilter(filter)
}

func load() {
	if annotationKey != "" {
		return
	}
	cfg := sdk.ParseConfig(sdk.Config())
	annotationKey, taintKey = cfg["annotation"], cfg["taint"]
	if annotationKey == "" {
		annotationKey = "maintenance.wasmsched.io/window"
	}
	if taintKey == "" {
		taintKey = "maintenance.wasmsched.io"
	}
}

func tolerates(pod sdk.Pod, t sdk.Taint) bool {
	for _, tol := range pod.Tolerations() {
		if tol.Tolerates(t) {
			return true
		}
	}
	return false
}

func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
	load()
	for _, t := range node.Taint(taintKey) {
		if !tolerates(pod, t) {
			return sdk.Unschedulable("node is in maintenance (taint " + taintKey + ")")
		}
	}
	if v, ok := node.Annotation(annotationKey); ok && v != "" && v != "false" {
		if tolerates(pod, sdk.Taint{Key: taintKey, Effect: "NoSchedule"}) {
			return sdk.Success()
		}
		return sdk.Unschedulable("node is in maintenance (" + annotationKey + "=" + v + ")")
	}
	return sdk.Success()
}

func main() {}
