package sdk

import "github.com/wasmsched/wasmsched/guest-sdk/model"

// Types of Cluster.DeviceRequests and Cluster.NodeDevices.
type (
	DeviceRequest = model.DeviceRequest
	NodeDevices   = model.NodeDevices
	Devices       = model.Devices
)

// DeviceRequests returns the device requests of the Dynamic Resource
// Allocation claims of the pod being scheduled (spec.resourceClaims, each
// claim's spec.devices.requests; a firstAvailable request gives one entry
// per subrequest, named "request/subrequest"), as the scheduler's
// DynamicResources plugin sees the claims: Found false while a claim does
// not exist yet, Allocated true once it has an allocation, written or
// reserved by the scheduler in flight.
//
// The policy's args must declare Devices (policies[].reads), or the call
// fails the policy closed with an Error that says so. The host reads them
// once per cycle; call it in PreFilter or PreScore and keep what you need
// (PerCycle), not per node.
func (Cluster) DeviceRequests() []DeviceRequest {
	return model.DecodeDeviceRequests(resourceClaimsList(model.DeviceClaimsRequests))
}

// NodeDevices returns, for each node whose ResourceSlices (those with
// spec.nodeName) hold devices of a DeviceClass that DeviceRequests name,
// how many devices of the class it has and how many are free: matched by
// the class's CEL selectors, and free when no claim has them allocated or
// reserved in flight, as the DynamicResources plugin lists them. Other
// teams' allocations are counted, never named. Simpler than the
// allocator: requests' own selectors, device taints, shared devices,
// consumable capacity and counters are not applied, network-attached
// slices are left out, and a selector needing optional CEL features
// matches nothing (docs/abi.md §4.6.5). Devices declared as above; read
// it once per cycle.
func (Cluster) NodeDevices() []NodeDevices {
	return model.DecodeNodeDevices(resourceClaimsList(model.DeviceClaimsNodes))
}
