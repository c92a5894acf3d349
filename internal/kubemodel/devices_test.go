package kubemodel

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

func class(name, expr string) *resourceapi.DeviceClass {
	c := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if expr != "" {
		c.Spec.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}
	}
	return c
}

// slice is a node-local slice of driver's pool named after the node, at
// generation gen, with devices of the given model attribute.
func slice(node, driver string, gen int64, devices map[string]string) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver}, Spec: resourceapi.ResourceSliceSpec{
		Driver: driver, NodeName: ptr.To(node), Pool: resourceapi.ResourcePool{Name: node, Generation: gen, ResourceSliceCount: 1}}}
	for name, m := range devices {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: name,
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: ptr.To(m)}}})
	}
	return s
}

func claim(ns, name string, requests []resourceapi.DeviceRequest, allocated ...resourceapi.DeviceRequestAllocationResult) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	c.Spec.Devices.Requests = requests
	if len(allocated) > 0 {
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: allocated}}
	}
	return c
}

func exactly(name, class string, count int64) resourceapi.DeviceRequest {
	return resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}}
}

func taken(driver, pool, device string) resourceapi.DeviceRequestAllocationResult {
	return resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: driver, Pool: pool, Device: device}
}

// Devices sums the DRA objects up as resource_claims answers them: the
// pod's requests in order (a template's claim from the pod's status, a
// firstAvailable request per subrequest, All as count 0), and per node
// the devices each requested class's CEL selectors match, free unless a
// claim has them allocated (in flight too; admin access takes nothing);
// an old pool generation, an incomplete pool, a slice for no node and a
// class that does not exist count nothing.
func TestDevices(t *testing.T) {
	gpu := `device.driver == "gpu.example.com"`
	objs := &DRAObjects{
		DeviceClasses: []*resourceapi.DeviceClass{
			class("gpu", gpu),
			class("big-gpu", gpu+` && device.attributes["gpu.example.com"].model == "h100"`),
			class("nic", `device.driver == "nic.example.com"`),
			class("broken", `device.nosuchfield ==`),
		},
		ResourceSlices: []*resourceapi.ResourceSlice{
			slice("a", "gpu.example.com", 2, map[string]string{"g0": "h100", "g1": "h100", "g2": "a10", "g3": "a10"}),
			slice("a", "gpu.example.com", 1, map[string]string{"old0": "h100"}), // an older generation of pool a
			slice("b", "gpu.example.com", 1, map[string]string{"g0": "a10", "g1": "a10"}),
			slice("b", "nic.example.com", 1, map[string]string{"n0": "x"}),
		},
	}
	network := slice("net", "gpu.example.com", 1, map[string]string{"x": "h100"})
	network.Spec.NodeName, network.Spec.AllNodes = nil, ptr.To(true)
	partial := slice("d", "gpu.example.com", 1, map[string]string{"x": "h100"}) // one of a pool's two slices: incomplete
	partial.Spec.Pool.ResourceSliceCount = 2
	objs.ResourceSlices = append(objs.ResourceSlices, network, partial)
	objs.Pending = map[string]bool{"inflight": true}
	admin := taken("gpu.example.com", "b", "g0")
	admin.AdminAccess = ptr.To(true)
	objs.Claims = []*resourceapi.ResourceClaim{
		claim("ml", "train", []resourceapi.DeviceRequest{exactly("gpu", "gpu", 2)}),
		claim("ml", "infer", []resourceapi.DeviceRequest{
			{Name: "accel", FirstAvailable: []resourceapi.DeviceSubRequest{
				{Name: "big", DeviceClassName: "big-gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
				{Name: "any", DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeAll}}},
			exactly("net", "nic", 1),
		}),
		claim("ml", "shared", []resourceapi.DeviceRequest{exactly("gpu", "gpu", 1)}, taken("gpu.example.com", "a", "g0")),
		claim("other", "theirs", []resourceapi.DeviceRequest{exactly("gpu", "gpu", 1)}, taken("gpu.example.com", "a", "g2"), taken("gpu.example.com", "b", "g1")),
		claim("ml", "odd", []resourceapi.DeviceRequest{exactly("x", "broken", 1), exactly("y", "missing", 1)}),
		claim("ml", "inflight", []resourceapi.DeviceRequest{exactly("gpu", "gpu", 1)}),
		claim("monitoring", "watch-b", []resourceapi.DeviceRequest{exactly("gpu", "gpu", 1)}, admin), // admin access takes nothing
	}
	pod := func(claims ...v1.PodResourceClaim) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "p"}, Spec: v1.PodSpec{ResourceClaims: claims}}
	}
	named := func(podClaim, name string) v1.PodResourceClaim {
		return v1.PodResourceClaim{Name: podClaim, ResourceClaimName: ptr.To(name)}
	}
	fromTemplate := pod(v1.PodResourceClaim{Name: "t", ResourceClaimTemplateName: ptr.To("tmpl")}, v1.PodResourceClaim{Name: "u", ResourceClaimTemplateName: ptr.To("tmpl")})
	fromTemplate.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "t", ResourceClaimName: ptr.To("train")}}
	for _, c := range []struct {
		name string
		pod  *v1.Pod
		want model.Devices
	}{
		{"no claims", pod(), model.Devices{}},
		{"two of a class: node a's newest pool has 4, one taken by another team", pod(named("gpu", "train")), model.Devices{
			Requests: []model.DeviceRequest{{PodClaim: "gpu", ClaimName: "train", Found: true, Request: "gpu", DeviceClassName: "gpu", Count: 2}},
			Nodes: []model.NodeDevices{
				{Node: "a", DeviceClassName: "gpu", Total: 4, Free: 2}, // g0 (shared) and g2 (theirs) taken
				{Node: "b", DeviceClassName: "gpu", Total: 2, Free: 1},
			}}},
		{"firstAvailable subrequests and a second class", pod(named("i", "infer")), model.Devices{
			Requests: []model.DeviceRequest{
				{PodClaim: "i", ClaimName: "infer", Found: true, Request: "accel/big", DeviceClassName: "big-gpu", Count: 1},
				{PodClaim: "i", ClaimName: "infer", Found: true, Request: "accel/any", DeviceClassName: "gpu", Count: 0},
				{PodClaim: "i", ClaimName: "infer", Found: true, Request: "net", DeviceClassName: "nic", Count: 1},
			},
			Nodes: []model.NodeDevices{
				{Node: "a", DeviceClassName: "big-gpu", Total: 2, Free: 1},
				{Node: "a", DeviceClassName: "gpu", Total: 4, Free: 2},
				{Node: "b", DeviceClassName: "gpu", Total: 2, Free: 1},
				{Node: "b", DeviceClassName: "nic", Total: 1, Free: 1},
			}}},
		{"an allocated claim and a missing one", pod(named("s", "shared"), named("m", "nope")), model.Devices{
			Requests: []model.DeviceRequest{
				{PodClaim: "s", ClaimName: "shared", Found: true, Allocated: true, Request: "gpu", DeviceClassName: "gpu", Count: 1},
				{PodClaim: "m", ClaimName: "nope"},
			},
			Nodes: []model.NodeDevices{{Node: "a", DeviceClassName: "gpu", Total: 4, Free: 2}, {Node: "b", DeviceClassName: "gpu", Total: 2, Free: 1}}}},
		{"a claim the scheduler allocated in flight", pod(named("f", "inflight")), model.Devices{
			Requests: []model.DeviceRequest{{PodClaim: "f", ClaimName: "inflight", Found: true, Allocated: true, Request: "gpu", DeviceClassName: "gpu", Count: 1}},
			Nodes:    []model.NodeDevices{{Node: "a", DeviceClassName: "gpu", Total: 4, Free: 2}, {Node: "b", DeviceClassName: "gpu", Total: 2, Free: 1}}}},
		{"a template's claim from the pod's status; one not made yet", fromTemplate, model.Devices{
			Requests: []model.DeviceRequest{
				{PodClaim: "t", ClaimName: "train", Found: true, Request: "gpu", DeviceClassName: "gpu", Count: 2},
				{PodClaim: "u"},
			},
			Nodes: []model.NodeDevices{{Node: "a", DeviceClassName: "gpu", Total: 4, Free: 2}, {Node: "b", DeviceClassName: "gpu", Total: 2, Free: 1}}}},
		{"a selector that does not compile and a class that does not exist match nothing", pod(named("o", "odd")), model.Devices{
			Requests: []model.DeviceRequest{
				{PodClaim: "o", ClaimName: "odd", Found: true, Request: "x", DeviceClassName: "broken", Count: 1},
				{PodClaim: "o", ClaimName: "odd", Found: true, Request: "y", DeviceClassName: "missing", Count: 1},
			}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, Devices(c.pod, objs, true)); diff != "" {
				t.Errorf("Devices (-want +got):\n%s", diff)
			}
		})
	}
	if d := Devices(pod(named("gpu", "train")), nil, true); len(d.Requests)+len(d.Nodes) != 0 {
		t.Errorf("without a lister: %+v, want nothing", d)
	}
}

// DRAObjectsOf builds DRA objects that Devices sums up into d for a pod of
// namespace ns with the returned claims (the round trip's Kubernetes
// side): a class per requested class name whose selector matches its
// own driver, per node and class a slice of Total devices of which
// another namespace's claim holds Total-Free, and the pod's claims with
// their requests. Each class in d.Nodes must be requested by a found
// claim, as Devices only counts those.
func DRAObjectsOf(ns string, d model.Devices) ([]v1.PodResourceClaim, DRALister) {
	objs := &DRAObjects{}
	var podClaims []v1.PodResourceClaim
	classes := map[string]bool{}
	addClass := func(name string) {
		if !classes[name] {
			classes[name] = true
			objs.DeviceClasses = append(objs.DeviceClasses, class(name, fmt.Sprintf("device.driver == %q", name+".drv")))
		}
	}
	byPodClaim := map[string]*resourceapi.ResourceClaim{}
	for _, r := range d.Requests {
		c := byPodClaim[r.PodClaim]
		if c == nil {
			pc := v1.PodResourceClaim{Name: r.PodClaim}
			if r.ClaimName == "" {
				pc.ResourceClaimTemplateName = ptr.To("template")
			} else {
				pc.ResourceClaimName = ptr.To(r.ClaimName)
			}
			podClaims = append(podClaims, pc)
			if !r.Found {
				continue
			}
			c = claim(ns, r.ClaimName, nil)
			if r.Allocated {
				c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{taken("elsewhere", "p", "d")}}}
			}
			byPodClaim[r.PodClaim] = c
			objs.Claims = append(objs.Claims, c)
		}
		addClass(r.DeviceClassName)
		mode, count := resourceapi.DeviceAllocationModeExactCount, r.Count
		if count == 0 {
			mode = resourceapi.DeviceAllocationModeAll
		}
		name, sub, isSub := strings.Cut(r.Request, "/")
		if !isSub {
			c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, resourceapi.DeviceRequest{Name: name,
				Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: r.DeviceClassName, AllocationMode: mode, Count: count}})
			continue
		}
		reqs := c.Spec.Devices.Requests
		if len(reqs) == 0 || reqs[len(reqs)-1].Name != name || reqs[len(reqs)-1].FirstAvailable == nil {
			c.Spec.Devices.Requests = append(reqs, resourceapi.DeviceRequest{Name: name})
		}
		last := &c.Spec.Devices.Requests[len(c.Spec.Devices.Requests)-1]
		last.FirstAvailable = append(last.FirstAvailable, resourceapi.DeviceSubRequest{Name: sub, DeviceClassName: r.DeviceClassName, AllocationMode: mode, Count: count})
	}
	for _, n := range d.Nodes {
		s := slice(n.Node, n.DeviceClassName+".drv", 1, nil)
		held := claim("others", "held-"+n.Node+"-"+n.DeviceClassName, nil)
		for i := range n.Total {
			dev := fmt.Sprintf("d%d", i)
			s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: dev})
			if i >= n.Free {
				if held.Status.Allocation == nil {
					held.Status.Allocation = &resourceapi.AllocationResult{}
				}
				held.Status.Allocation.Devices.Results = append(held.Status.Allocation.Devices.Results, taken(n.DeviceClassName+".drv", n.Node, dev))
			}
		}
		objs.ResourceSlices = append(objs.ResourceSlices, s)
		objs.Claims = append(objs.Claims, held)
	}
	return podClaims, objs
}

// RandomDevices is a resource_claims answer as Devices gives them: up to
// three pod claims (some not made yet, some allocated), requests of up
// to three classes (some firstAvailable, some All), and per node and
// requested class a total and a free count, nodes and classes sorted.
func RandomDevices(r *rand.Rand) model.Devices {
	var d model.Devices
	requested := map[string]bool{}
	for i := range r.IntN(4) {
		pc := fmt.Sprintf("c%d", i)
		switch r.IntN(5) {
		case 0:
			d.Requests = append(d.Requests, model.DeviceRequest{PodClaim: pc})
			continue
		case 1:
			d.Requests = append(d.Requests, model.DeviceRequest{PodClaim: pc, ClaimName: "gone-" + pc})
			continue
		}
		allocated := r.IntN(5) == 0
		for j := range 1 + r.IntN(3) {
			req := fmt.Sprintf("r%d", j)
			subs := []string{""}
			if r.IntN(3) == 0 {
				subs = []string{"/s0", "/s1"}
			}
			for _, s := range subs {
				class := fmt.Sprintf("k%d", r.IntN(3))
				requested[class] = true
				d.Requests = append(d.Requests, model.DeviceRequest{PodClaim: pc, ClaimName: "claim-" + pc, Found: true, Allocated: allocated,
					Request: req + s, DeviceClassName: class, Count: int64(r.IntN(4))})
			}
		}
	}
	for _, node := range []string{"n0", "n1", "n2"} {
		for _, class := range []string{"k0", "k1", "k2"} {
			if requested[class] && r.IntN(5) < 3 {
				total := int64(1 + r.IntN(5))
				d.Nodes = append(d.Nodes, model.NodeDevices{Node: node, DeviceClassName: class, Total: total, Free: r.Int64N(total + 1)})
			}
		}
	}
	return d
}
