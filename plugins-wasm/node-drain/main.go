// Command node-drain is a wasmsched Filter policy that keeps pods off the
// nodes an operations team has marked for draining in a custom resource
// of its own: NodeDrain objects (group ops.example.com, version v1, in one
// namespace), each naming a node and why. Editing or deleting an object
// takes effect at once: the scheduler watches the kind for the policy, and
// pods the policy refused are tried again when an object changes.
//
// It reads the objects through a granted object read: the scheduler's
// args grant the kind, and the policy declares it as its objects[0] with
// the fields spec.nodeName and spec.reason.
//
// Config (all optional):
//
//	namespace=<ns>     where the NodeDrain objects are (default: every
//	                   namespace the policy may read)
//	selector=<labels>  only the objects whose labels match (kubectl's
//	                   syntax; default: all)
package main

import (
	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

// drains is the policy's declared read objects[0]: NodeDrain objects with
// spec.nodeName and spec.reason.
var drains = sdk.ObjectsOf(0)

var (
	loaded              bool
	namespace, selector string
)

func init() { sdk.RegisterFilter(filter) }

func load() {
	if loaded {
		return
	}
	loaded = true
	cfg := sdk.ParseConfig(sdk.Config())
	namespace, selector = cfg["namespace"], cfg["selector"]
}

func filter(_ sdk.Pod, node sdk.Node) sdk.Status {
	load()
	objs, err := drains.List(namespace, selector)
	if err != nil {
		return sdk.Error("reading NodeDrain objects: " + err.Error())
	}
	name := node.Name()
	for _, o := range objs {
		if o.Fields[0] != name {
			continue
		}
		why := o.Fields[1]
		if why == "" {
			why = "no reason given"
		}
		return sdk.UnschedulableAndUnresolvable("node " + name + " is being drained (NodeDrain " + o.Namespace + "/" + o.Name + ": " + why + ")")
	}
	return sdk.Success()
}

func main() {}
