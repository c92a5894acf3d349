// Command lease-freshness is a wasmsched Filter policy that keeps pods off
// nodes whose kubelet has stopped renewing its Lease (coordination.k8s.io,
// namespace kube-node-lease, named after the node). The node lifecycle
// controller marks such a node NotReady only after its grace period (40 s
// by default) and taints it later still; this policy turns pods away as
// soon as the Lease is older than maxAge, while Ready is still True.
//
// It reads the Lease through a granted object read: the scheduler's args
// grant Leases of kube-node-lease, and the policy declares them as its
// objects[0] with the field spec.renewTime. It needs realClock: true (the
// age is measured against the host's clock).
//
// Config (all optional):
//
//	maxAge=<duration>   the oldest renewal accepted (default 20s)
//	missing=reject      reject nodes that have no Lease (default: admit
//	                    them: a node without a kubelet has none)
package main

import (
	"time"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

// leases is the policy's declared read objects[0]: Leases, spec.renewTime
// (read typed, as sdk.Lease).
var leases = sdk.LeasesOf(0)

var (
	loaded        bool
	maxAge        = 20 * time.Second
	rejectMissing bool
	configError   string
)

func init() { sdk.RegisterFilter(filter) }

func load() {
	if loaded {
		return
	}
	loaded = true
	cfg := sdk.ParseConfig(sdk.Config())
	if s, ok := cfg["maxAge"]; ok {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			configError = "config maxAge=" + s + ": not a positive duration such as 20s"
			return
		}
		maxAge = d
	}
	rejectMissing = cfg["missing"] == "reject"
}

func filter(_ sdk.Pod, node sdk.Node) sdk.Status {
	load()
	if configError != "" {
		return sdk.Error(configError)
	}
	name := node.Name()
	lease, ok, err := leases.Get("kube-node-lease", name)
	switch {
	case err != nil:
		return sdk.Error("the kubelet Lease of node " + name + " has a renewTime that does not parse: " + err.(*sdk.LeaseError).RenewTime)
	case !ok:
		if rejectMissing {
			return sdk.UnschedulableAndUnresolvable("node " + name + " has no kubelet Lease in kube-node-lease")
		}
		return sdk.Success()
	case lease.RenewTime.IsZero():
		return sdk.UnschedulableAndUnresolvable("the kubelet Lease of node " + name + " was never renewed")
	}
	if age := sdk.Now().Sub(lease.RenewTime); age > maxAge {
		return sdk.UnschedulableAndUnresolvable("the kubelet Lease of node " + name + " was last renewed " + age.Round(time.Second).String() + " ago, more than maxAge " + maxAge.String())
	}
	return sdk.Success()
}

func main() {}
