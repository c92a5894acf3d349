package perf

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/wasmsched/wasmsched/internal/kubemodel"
)

// readCostDRA is a GPU cluster for BenchmarkReadCost's device reads: each
// node publishes a slice of 8 GPUs (a model attribute each), a class
// selects them by driver and model, half of every node's GPUs are held
// by other claims, and the pod's claim train-gpu asks for one.
func readCostDRA(ns string, nodes []fwk.NodeInfo) *kubemodel.DRAObjects {
	const driver = "gpu.example.com"
	o := &kubemodel.DRAObjects{DeviceClasses: []*resourceapi.DeviceClass{{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourceapi.DeviceClassSpec{
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "h100"`}}}}}}}
	train := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "train-gpu"}}
	train.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}
	o.Claims = append(o.Claims, train)
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
		o.ResourceSlices = append(o.ResourceSlices, s)
		o.Claims = append(o.Claims, held)
	}
	return o
}
