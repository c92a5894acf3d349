package sdk

import (
	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

// Node is the node being evaluated. Its fields are read from the host on use.
type Node struct{}

// Name returns the node's name.
func (Node) Name() string { return nodeName() }

// KubeletVersion returns status.nodeInfo.kubeletVersion ("v1.37.2"), for a
// version floor without reading the whole node.
func (Node) KubeletVersion() string { return nodeString(model.NodeKubeletVersion) }

// KernelVersion returns status.nodeInfo.kernelVersion ("6.8.0-1019-aws"):
// the kernel's version (uname -r).
func (Node) KernelVersion() string { return nodeString(model.NodeKernelVersion) }

// OSImage returns status.nodeInfo.osImage ("Ubuntu 24.04.1 LTS"):
// the OS image (/etc/os-release PRETTY_NAME).
func (Node) OSImage() string { return nodeString(model.NodeOSImage) }

// OperatingSystem returns status.nodeInfo.operatingSystem ("linux"):
// the operating system (GOOS of the kubelet).
func (Node) OperatingSystem() string { return nodeString(model.NodeOperatingSystem) }

// Architecture returns status.nodeInfo.architecture ("amd64"):
// the architecture (GOARCH of the kubelet).
func (Node) Architecture() string { return nodeString(model.NodeArchitecture) }

// ContainerRuntimeVersion returns status.nodeInfo.containerRuntimeVersion ("containerd://1.7.22"):
// the container runtime and its version.
func (Node) ContainerRuntimeVersion() string { return nodeString(model.NodeContainerRuntimeVersion) }

// Label returns one node label and whether it is set.
func (Node) Label(key string) (string, bool) { return nodeLabel(key) }

// Annotation returns one node annotation and whether it is set.
func (Node) Annotation(key string) (string, bool) { return nodeAnnotation(key) }

// Labels returns all node labels.
func (Node) Labels() map[string]string { return decodeMap(nodeList(model.NodeLabels)) }

// Annotations returns all node annotations.
func (Node) Annotations() map[string]string { return decodeMap(nodeList(model.NodeAnnotations)) }

// Taints returns spec.taints.
func (Node) Taints() []Taint {
	r := abi.NewListReader(nodeList(model.NodeTaints))
	ts := make([]Taint, 0, r.Len()/3)
	for r.Len() >= 3 {
		k, _ := r.Next()
		v, _ := r.Next()
		e, _ := r.Next()
		ts = append(ts, Taint{Key: string(k), Value: string(v), Effect: string(e)})
	}
	return ts
}

// Taint returns the node's taints with this key: usually one, but a key may
// carry several effects (NoSchedule and NoExecute, say). It reads only those
// taints from the host, which is cheaper than Taints when a policy looks for
// one key. It returns nil when the node has no taint with the key.
func (Node) Taint(key string) []Taint {
	r := abi.NewListReader(nodeTaint(key))
	if r.Len() < 2 {
		return nil
	}
	ts := make([]Taint, 0, r.Len()/2)
	for r.Len() >= 2 {
		v, _ := r.Next()
		e, _ := r.Next()
		ts = append(ts, Taint{Key: key, Value: string(v), Effect: string(e)})
	}
	return ts
}

// Allocatable returns status.allocatable of one resource, or -1 if the node
// does not report it. Units as in Pod.Request.
func (Node) Allocatable(resource string) int64 {
	return missingToMinus1(nodeResource(model.ResourceAllocatable, resource))
}

// Capacity returns status.capacity of one resource, or -1 if not reported.
func (Node) Capacity(resource string) int64 {
	return missingToMinus1(nodeResource(model.ResourceCapacity, resource))
}

// Requested returns the sum of the requests of the pods on the node
// (including pods the scheduler has assumed but not yet bound).
func (Node) Requested(resource string) int64 {
	return max(0, nodeResource(model.ResourceRequested, resource))
}

// AllocatableAll returns every allocatable resource.
func (Node) AllocatableAll() map[string]int64 { return decodeInts(nodeList(model.NodeAllocatable)) }

// CapacityAll returns every capacity resource.
func (Node) CapacityAll() map[string]int64 { return decodeInts(nodeList(model.NodeCapacity)) }

// RequestedAll returns the requested totals of every resource.
func (Node) RequestedAll() map[string]int64 { return decodeInts(nodeList(model.NodeRequested)) }

// PodCount returns how many pods are on the node.
func (Node) PodCount() int { return nodePodCount() }

// Taint effects, the bits of Node.TaintEffects.
const (
	TaintNoSchedule       = abi.TaintNoSchedule
	TaintPreferNoSchedule = abi.TaintPreferNoSchedule
	TaintNoExecute        = abi.TaintNoExecute
)

// TaintEffects returns the effects of the node's taints as a bit set
// (TaintNoSchedule | TaintPreferNoSchedule | TaintNoExecute), 0 for an
// untainted node. A policy that looks at taints of some effects only
// checks this first: in a batch it is a node-table column, so a node
// without such taints costs no host call, and its verdict, read from the
// row alone, can be remembered for the next pod of the template
// (docs/abi.md §3.4). Taints reads the list itself.
func (Node) TaintEffects() int64 { return nodeTaintEffects() }

// Unschedulable reports spec.unschedulable (cordoned).
func (Node) Unschedulable() bool { return nodeUnschedulable() }

// Conditions returns status.conditions.
func (Node) Conditions() []NodeCondition {
	var cs []NodeCondition
	r := abi.NewListReader(nodeList(model.NodeConditions))
	for r.Len() >= 3 {
		f := next(&r, 3)
		cs = append(cs, NodeCondition{Type: f[0], Status: f[1], Reason: f[2]})
	}
	return cs
}

// Condition returns the status ("True", "False", "Unknown") of one
// condition type, and whether the node reports it.
func (n Node) Condition(conditionType string) (string, bool) {
	for _, c := range n.Conditions() {
		if c.Type == conditionType {
			return c.Status, true
		}
	}
	return "", false
}

// ImageSize returns the size in bytes of the image the node lists under
// name in status.images, -1 if it lists none. A policy that looks for the
// pod's images checks this first: in a batch it is a node-table column, so
// a node without them costs no host call, and nodes whose rows are equal
// can share its verdict (docs/abi.md §3.4); Images and ImageStates read
// the whole list. The scheduler's image states can give an image another
// size: the live scheduler keeps the size the first node to report a name
// gave.
func (Node) ImageSize(name string) int64 { return nodeImageSize(name) }

// Images returns status.images, one entry per name of each image.
func (Node) Images() []NodeImage {
	var is []NodeImage
	r := abi.NewListReader(nodeList(model.NodeImages))
	for r.Len() >= 2 {
		f := next(&r, 2)
		is = append(is, NodeImage{Name: f[0], SizeBytes: parseInt([]byte(f[1]))})
	}
	return is
}

// ImageStates returns the scheduler's image states for the node, as
// ImageLocality scores with them: one entry per image name, sorted by
// name, with the number of nodes in the scheduler's snapshot that hold the
// image. Needs `reads: [Cluster]` (the count reveals other nodes); the
// host encodes it on every call, so read it once per call.
func (Node) ImageStates() []ImageState {
	var is []ImageState
	r := abi.NewListReader(nodeList(model.NodeImageStates))
	for r.Len() >= 3 {
		f := next(&r, 3)
		is = append(is, ImageState{Name: f[0], SizeBytes: parseInt([]byte(f[1])), NumNodes: int(parseInt([]byte(f[2])))})
	}
	return is
}

// Addresses returns status.addresses.
func (Node) Addresses() []NodeAddress {
	var as []NodeAddress
	r := abi.NewListReader(nodeList(model.NodeAddresses))
	for r.Len() >= 2 {
		f := next(&r, 2)
		as = append(as, NodeAddress{Type: f[0], Address: f[1]})
	}
	return as
}

// Pods returns the pods on the node, as the scheduler's snapshot has them
// (assumed pods included), with their labels and owner references. The
// host encodes them once per node generation; each call decodes them,
// which is the costliest read there is: 22.5 µs a node with five pods in
// a TinyGo guest on an idle machine (BenchmarkReadCost, docs/performance.md;
// up to 195 µs measured as the guest's heap grows and the machine is
// busy), against 0.9 µs to count them with CountPodsWithLabel and 3.3 µs
// with Cluster.CountPods. To count pods, use CountPodsWithLabel (this node's
// pods with one label) or Cluster.CountPods (a selector, per node or
// zone, counted by the host once per cycle); call Pods when a policy needs
// the pods themselves.
func (Node) Pods() []NodePod {
	var ps []NodePod
	r := abi.NewListReader(nodeList(model.NodePods))
	for r.Len() >= 5 {
		f := next(&r, 5)
		ps = append(ps, NodePod{Namespace: f[0], Name: f[1], UID: f[2], Priority: parseInt([]byte(f[3])), Terminating: f[4] == "true"})
	}
	r = abi.NewListReader(nodeList(model.NodePodLabels))
	for r.Len() >= 3 {
		f := next(&r, 3)
		if i := int(parseInt([]byte(f[0]))); i >= 0 && i < len(ps) {
			if ps[i].Labels == nil {
				ps[i].Labels = map[string]string{}
			}
			ps[i].Labels[f[1]] = f[2]
		}
	}
	r = abi.NewListReader(nodeList(model.NodePodOwners))
	for r.Len() >= 6 {
		f := next(&r, 6)
		if i := int(parseInt([]byte(f[0]))); i >= 0 && i < len(ps) {
			ps[i].OwnerReferences = append(ps[i].OwnerReferences, OwnerReference{APIVersion: f[1], Kind: f[2], Name: f[3], UID: f[4], Controller: f[5] == "true"})
		}
	}
	return ps
}

// CountPodsWithLabel returns how many of the node's pods, terminating ones
// left out, carry the label key=value: the count a per-node cap or a
// noisy-neighbour rule needs, read without decoding the pods (Pods builds
// every pod's labels and owners). Like Pods it needs NodePods declared.
func (Node) CountPodsWithLabel(key, value string) int {
	// The pods' terminating flags, one bit each (pods past 512, far more
	// than a node runs, count as running).
	var terminating [8]uint64
	r := abi.NewListReader(nodeList(model.NodePods))
	n := 0
	for ; r.Len() >= 5; n++ {
		for range 4 {
			r.Next()
		}
		if t, _ := r.Next(); n < 512 && bytesEqual(t, "true") {
			terminating[n/64] |= 1 << (n % 64)
		}
	}
	count := 0
	r = abi.NewListReader(nodeList(model.NodePodLabels))
	for r.Len() >= 3 {
		ib, _ := r.Next()
		k, _ := r.Next()
		v, _ := r.Next()
		if !bytesEqual(k, key) || !bytesEqual(v, value) {
			continue
		}
		if i := int(parseInt(ib)); i >= 0 && i < n && (i >= 512 || terminating[i/64]&(1<<(i%64)) == 0) {
			count++
		}
	}
	return count
}

// bytesEqual compares a list entry with a string without converting it.
func bytesEqual(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		if b[i] != s[i] {
			return false
		}
	}
	return true
}

// NonZeroRequested returns the cpu and memory requested by the node's pods
// as NodeResourcesFit scores them: a container that requests no cpu counts
// 100m, no memory 200Mi (an explicit 0 stays 0).
func (Node) NonZeroRequested() map[string]int64 {
	return decodeInts(nodeList(model.NodeNonZeroRequested))
}

// NonZeroRequestedOf returns one resource of NonZeroRequested (cpu or
// memory; 0 for any other resource). It is a column of the node table
// like Requested: a Score that reads it per node pays a few loads, where
// NonZeroRequested decodes a map on every call.
func (Node) NonZeroRequestedOf(resource string) int64 {
	return max(0, nodeResource(model.ResourceNonZeroRequested, resource))
}

// UsedPorts returns the host ports the node's pods use, sorted by IP,
// protocol and port.
func (Node) UsedPorts() []HostPort {
	var hs []HostPort
	r := abi.NewListReader(nodeList(model.NodeUsedPorts))
	for r.Len() >= 3 {
		f := next(&r, 3)
		hs = append(hs, HostPort{IP: f[0], Protocol: f[1], Port: int32(parseInt([]byte(f[2])))})
	}
	return hs
}

// Object returns the whole node as JSON (docs/abi.md §4.3, node_object),
// for a field no accessor reads; its args must declare WholeObjects, or the
// call fails closed. The host encodes it once per node generation, as the
// apiserver serves it (compact, apiVersion and kind set); each call copies
// it into the guest. Natively (go test of the policy's Go code) it is
// NodeData.Object exactly as the test wrote it, or nil: the native SDK has
// no Kubernetes types to build the object from the other fields. A case
// table run by wasmsched test gets the host's object: the case's fields,
// with its Object merged in.
func (Node) Object() []byte { return nodeObject() }
