package perf

import (
	"errors"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/wasmsched/wasmsched/internal/kubemodel"
)

// draObjects is a cluster's DRA objects as the scheduler's DRA manager
// holds them (kubemodel.DRALister).
type draObjects struct {
	claims  []*resourceapi.ResourceClaim
	slices  []*resourceapi.ResourceSlice
	classes []*resourceapi.DeviceClass
}

func (o draObjects) Claim(ns, name string) (*resourceapi.ResourceClaim, error) {
	for _, c := range o.claims {
		if c.Namespace == ns && c.Name == name {
			return c, nil
		}
	}
	return nil, errors.New("not found")
}

func (o draObjects) ClaimPending(*resourceapi.ResourceClaim) bool { return false }

// Allocated is what the DRA manager lists: every allocated claim's
// devices but admin-access ones.
func (o draObjects) Allocated() (map[kubemodel.DeviceID]bool, error) {
	out := map[kubemodel.DeviceID]bool{}
	for _, c := range o.claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.AdminAccess == nil || !*r.AdminAccess {
				out[kubemodel.DeviceID{r.Driver, r.Pool, r.Device}] = true
			}
		}
	}
	return out, nil
}

func (o draObjects) Slices() ([]*resourceapi.ResourceSlice, error) { return o.slices, nil }

func (o draObjects) Class(name string) (*resourceapi.DeviceClass, error) {
	for _, c := range o.classes {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, errors.New("not found")
}

// readCostDRA is a GPU cluster for BenchmarkReadCost's device reads: each
// node publishes a slice of 8 GPUs (a model attribute each), a class
// selects them by driver and model, half of every node's GPUs are held
// by other claims, and the pod's claim train-gpu asks for one.
func readCostDRA(ns string, nodes []fwk.NodeInfo) draObjects {
	const driver = "gpu.example.com"
	o := draObjects{classes: []*resourceapi.DeviceClass{{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourceapi.DeviceClassSpec{
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "h100"`}}}}}}}
	train := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "train-gpu"}}
	train.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}
	o.claims = append(o.claims, train)
	for _, ni := range nodes {
		node := ni.Node().Name
		s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node}, Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(node),
			Pool: resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}}}
		held := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "others", Name: "held-" + node},
			Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{}}}
		for d := range 8 {
			name := fmt.Sprintf("gpu-%d", d)
			s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: name,
				Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: ptr.To("h100")}}})
			if d%2 == 0 {
				held.Status.Allocation.Devices.Results = append(held.Status.Allocation.Devices.Results,
					resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: driver, Pool: node, Device: name})
			}
		}
		o.slices = append(o.slices, s)
		o.claims = append(o.claims, held)
	}
	return o
}
