package model

import (
	"strconv"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
)

// The pod's Dynamic Resource Allocation claims and the devices nodes offer
// for them, as a policy reads them (resource_claims, docs/abi.md §4.6.5):
// what the scheduler's DynamicResources plugin sees (ResourceClaims,
// ResourceSlices and DeviceClasses, allocations in flight included),
// summed up by the host so that a guest neither decodes the objects nor
// evaluates the classes' CEL selectors.

// Kinds for resource_claims.
const (
	// DeviceClaimsRequests: one record of 7 strings per device request of
	// each ResourceClaim the pod names (spec.resourceClaims order, then the
	// claim's spec.devices.requests order; a request with firstAvailable
	// gives one record per subrequest, named "request/subrequest"):
	// podClaim, claimName, found, allocated, request, deviceClassName,
	// count. found and allocated are "true" or "false"; count is the
	// exact count ("0" for allocationMode All).
	DeviceClaimsRequests int32 = 0
	// DeviceClaimsNodes: one record of 4 strings per node and DeviceClass
	// that the pod's requests name, for nodes whose ResourceSlices hold at
	// least one device of the class: node, deviceClassName, total, free.
	// Sorted by node, then class.
	DeviceClaimsNodes int32 = 1

	// NumDeviceClaimKinds sizes tables indexed by resource_claims kind.
	NumDeviceClaimKinds = DeviceClaimsNodes + 1
)

// DeviceRequest is one device request of a ResourceClaim of the pod being
// scheduled.
type DeviceRequest struct {
	// PodClaim is the pod's spec.resourceClaims[].name.
	PodClaim string `json:"podClaim"`
	// ClaimName is the ResourceClaim's name: resourceClaimName, or for a
	// template the claim recorded in the pod's status ("" until created).
	ClaimName string `json:"claimName,omitempty"`
	// Found: the claim exists. When false, the fields below are empty.
	Found bool `json:"found,omitempty"`
	// Allocated: the claim has an allocation (written, or reserved by the
	// scheduler and not yet written).
	Allocated bool `json:"allocated,omitempty"`
	// Request is the request's name ("request/subrequest" for one of a
	// firstAvailable list).
	Request string `json:"request,omitempty"`
	// DeviceClassName is the class the request asks a device of.
	DeviceClassName string `json:"deviceClassName,omitempty"`
	// Count is how many devices the request asks for (0: all of them).
	Count int64 `json:"count,omitempty"`
}

// NodeDevices are the devices of one DeviceClass on one node: those of
// the node's ResourceSlices that the class's selectors match.
type NodeDevices struct {
	Node            string `json:"node"`
	DeviceClassName string `json:"deviceClassName"`
	// Total counts the matching devices; Free those no claim has
	// allocated (nor holds in flight).
	Total int64 `json:"total"`
	Free  int64 `json:"free"`
}

// Devices is what resource_claims answers for one pod.
type Devices struct {
	Requests []DeviceRequest
	Nodes    []NodeDevices
}

// EncodeDevices encodes kind of resource_claims; ok is false for an
// unknown kind.
func EncodeDevices(d Devices, kind int32) ([]byte, bool) {
	var r records
	tf := func(b bool) string {
		if b {
			return "true"
		}
		return "false"
	}
	switch kind {
	case DeviceClaimsRequests:
		for _, q := range d.Requests {
			r.add(q.PodClaim, q.ClaimName, tf(q.Found), tf(q.Allocated), q.Request, q.DeviceClassName, strconv.FormatInt(q.Count, 10))
		}
	case DeviceClaimsNodes:
		for _, n := range d.Nodes {
			r.add(n.Node, n.DeviceClassName, strconv.FormatInt(n.Total, 10), strconv.FormatInt(n.Free, 10))
		}
	default:
		return nil, false
	}
	return r.bytes(), true
}

// DecodeDeviceRequests decodes kind DeviceClaimsRequests. The decoders
// parse numbers without strconv: linking it grew a TinyGo guest by 35 KB
// and made every allocating read of it about 1.7 times slower
// (BenchmarkReadCost's Pod.Labels: 2.1 µs, 3.6 µs with strconv), most
// likely because TinyGo's conservative collector scans the larger data
// segment on every collection.
func DecodeDeviceRequests(b []byte) []DeviceRequest {
	var out []DeviceRequest
	eachRecord(b, 7, func(f []string) {
		n, _ := parseInt64(f[6])
		out = append(out, DeviceRequest{PodClaim: f[0], ClaimName: f[1], Found: f[2] == "true", Allocated: f[3] == "true",
			Request: f[4], DeviceClassName: f[5], Count: n})
	})
	return out
}

// DecodeNodeDevices decodes kind DeviceClaimsNodes.
func DecodeNodeDevices(b []byte) []NodeDevices {
	var out []NodeDevices
	eachRecord(b, 4, func(f []string) {
		t, _ := parseInt64(f[2])
		fr, _ := parseInt64(f[3])
		out = append(out, NodeDevices{Node: f[0], DeviceClassName: f[1], Total: t, Free: fr})
	})
	return out
}

// eachRecord calls fn with each whole record of n strings of list b; fn
// must not keep the slice, which the next record reuses.
func eachRecord(b []byte, n int, fn func([]string)) {
	r := abi.NewListReader(b)
	f := make([]string, n)
	for r.Len() >= n {
		for i := range f {
			s, _ := r.Next()
			f[i] = string(s)
		}
		if r.Err() {
			return
		}
		fn(f)
	}
}
