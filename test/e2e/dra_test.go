package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// draDriver is the test's device driver (one per test, so slices and
// classes of other runs never match).
func (e *env) draDriver() string { return e.name + ".gpu.example.com" }

// deviceSlice publishes node's ResourceSlice of the test's driver with n
// devices g0..g(n-1), in a pool named after the node.
func (e *env) deviceSlice(node string, n int) {
	e.t.Helper()
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: e.name + "-" + node}, Spec: resourceapi.ResourceSliceSpec{
		Driver: e.draDriver(), NodeName: ptr.To(e.name + "-" + node), Pool: resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}}}
	for i := range n {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("g%d", i)})
	}
	if _, err := client.ResourceV1().ResourceSlices().Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = client.ResourceV1().ResourceSlices().Delete(context.Background(), s.Name, metav1.DeleteOptions{})
	})
}

// gpuClaim creates a claim in the test's namespace for one device of the
// test's class; with devices given, it is allocated those devices of
// node's pool (as if another workload held them).
func (e *env) gpuClaim(name, node string, devices ...string) {
	e.t.Helper()
	ctx := context.Background()
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: e.name, Name: name}, Spec: resourceapi.ResourceClaimSpec{
		Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: e.name + "-gpu"}}}}}}
	c, err := client.ResourceV1().ResourceClaims(e.name).Create(ctx, c, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	if len(devices) == 0 {
		return
	}
	alloc := &resourceapi.AllocationResult{NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
		MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{e.name + "-" + node}}}}}}}
	for _, d := range devices {
		alloc.Devices.Results = append(alloc.Devices.Results, resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: e.draDriver(), Pool: node, Device: d})
	}
	c.Status.Allocation = alloc
	if _, err := client.ResourceV1().ResourceClaims(e.name).UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// gpuPod creates a pod of the test's scheduler that uses claim.
func (e *env) gpuPod(name, claim string) {
	e.t.Helper()
	p := e.appPod(e.name, name, e.name, nil, "100m", "64Mi").Obj()
	p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim)}}
	p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	if _, err := client.CoreV1().Pods(e.name).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// The dra-devices example against the real control plane, with the DRA
// objects made through the apiserver: node a's slice has 8 devices of
// the test's class, 5 of them allocated to other claims; node b's has 2,
// both free; node c has none. kube-scheduler's DynamicResources plugin
// keeps the pods off c and allocates their claims; the policy, the
// profile's only Score, ranks a and b by the share of devices each keeps
// free. The first pod goes to b (1 of 2 left against 2 of 8); its device
// is then taken, allocated by the scheduler, so the second and third go
// to a. A policy that counted devices without their allocations would
// send all three to a.
func TestDRADevicesPrefersFreeDevices(t *testing.T) {
	e := newEnv(t, "dra")
	for _, n := range []string{"a", "b", "c"} {
		e.node(n, nil, "8")
	}
	ctx := context.Background()
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: e.name + "-gpu"}, Spec: resourceapi.DeviceClassSpec{
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", e.draDriver())}}}}}
	if _, err := client.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.ResourceV1().DeviceClasses().Delete(context.Background(), class.Name, metav1.DeleteOptions{})
	})
	e.deviceSlice("a", 8)
	e.deviceSlice("b", 2)
	e.gpuClaim("held-1", "a", "g0", "g1", "g2")
	e.gpuClaim("held-2", "a", "g3", "g4")

	e.policyConfigMap("dra-devices", module(t, "dra-devices"))
	e.startScheduler(fmt.Sprintf("      - name: dra-devices\n        source: %s\n        reads: [Devices]\n", cmSource(e, "dra-devices")), "dra-devices")

	// The three pods are created together: each is scheduled while the
	// previous one's claim may still be allocated only in flight (written
	// at its binding), which the policy must count as taken.
	for i := range 3 {
		e.gpuClaim(fmt.Sprintf("train-%d", i), "")
	}
	start := time.Now()
	for i := range 3 {
		e.gpuPod(fmt.Sprintf("train-%d", i), fmt.Sprintf("train-%d", i))
	}
	var got []string
	for i := range 3 {
		name := fmt.Sprintf("train-%d", i)
		n := e.placed(name)
		got = append(got, n)
		c, err := client.ResourceV1().ResourceClaims(e.name).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 1 || c.Status.Allocation.Devices.Results[0].Pool != n {
			t.Fatalf("%s bound to %s but its claim's allocation is %+v", name, n, c.Status.Allocation)
		}
		t.Logf("%s bound to %s, device %s (%s after the pods were created)", name, n, c.Status.Allocation.Devices.Results[0].Device, time.Since(start).Round(time.Millisecond))
	}
	if fmt.Sprint(got) != "[b a a]" {
		t.Fatalf("pods went to %v, want [b a a]: once b's last free device is taken (in flight or written), the next pods must go to a", got)
	}
}
