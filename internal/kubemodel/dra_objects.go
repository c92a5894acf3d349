package kubemodel

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
)

// DRAObjects is a DRALister over objects held in memory (a test's, a
// benchmark's): claims, slices and classes as the scheduler's DRA manager
// would hold them, with Pending naming the claims allocated in flight.
type DRAObjects struct {
	Claims         []*resourceapi.ResourceClaim
	ResourceSlices []*resourceapi.ResourceSlice
	DeviceClasses  []*resourceapi.DeviceClass
	// Pending are the claims allocated in flight, by name.
	Pending map[string]bool
}

func (o *DRAObjects) Claim(ns, name string) (*resourceapi.ResourceClaim, error) {
	for _, c := range o.Claims {
		if c.Namespace == ns && c.Name == name {
			return c, nil
		}
	}
	return nil, fmt.Errorf("resourceclaim %s/%s not found", ns, name)
}

func (o *DRAObjects) ClaimPending(c *resourceapi.ResourceClaim) bool { return o.Pending[c.Name] }

// Allocated is what the DRA manager lists: every allocated claim's
// devices but admin-access ones.
func (o *DRAObjects) Allocated() (map[DeviceID]bool, error) {
	out := map[DeviceID]bool{}
	for _, c := range o.Claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.AdminAccess == nil || !*r.AdminAccess {
				out[DeviceID{r.Driver, r.Pool, r.Device}] = true
			}
		}
	}
	return out, nil
}

func (o *DRAObjects) Slices() ([]*resourceapi.ResourceSlice, error) { return o.ResourceSlices, nil }

func (o *DRAObjects) Class(name string) (*resourceapi.DeviceClass, error) {
	for _, c := range o.DeviceClasses {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, fmt.Errorf("deviceclass %s not found", name)
}
