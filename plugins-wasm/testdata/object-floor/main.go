// Command object-floor is a test policy that rejects nodes whose whole
// object (Node.Object) shows no kubelet version of at least v1.30: the kind
// of policy that, run without its WholeObjects declaration, would reject
// every node with its own misleading reason if the SDK let its verdict
// replace the undeclared read's Error.
package main

import (
	"strings"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

func init() { sdk.RegisterFilter(filter) }

var floor, _ = sdk.ParseVersion("v1.30.0")

func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
	// A label read, which the SDK learns as a node-table column: batches
	// then run through the table (and its per-row Error), not single reads.
	if _, exempt := node.Label("floor.example.com/exempt"); exempt {
		return sdk.Success()
	}
	obj := string(node.Object())
	const k = `"kubeletVersion":"`
	i := strings.Index(obj, k)
	if i < 0 {
		return sdk.Unschedulable("no kubelet version")
	}
	rest := obj[i+len(k):]
	v, ok := sdk.ParseVersion(rest[:max(strings.IndexByte(rest, '"'), 0)])
	if !ok || !v.AtLeast(floor) {
		return sdk.Unschedulable("kubelet older than v1.30")
	}
	return sdk.Success()
}

func main() {}
