package model

import (
	"errors"
	"sort"
	"strconv"
	"strings"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
)

// What the scheduler derives from a pod and a node, computed from a test's
// model values for the native backend. In a scheduler the host converts
// the scheduler's own values instead (internal/kubemodel), and kubemodel's
// round-trip test holds the two to each other.

// DefaultNonZeroRequests are what the scheduler's scoring counts for a
// container that does not request cpu or memory (100m, 200Mi): pass them to
// SumRequests to score as NodeResourcesFit and BalancedAllocation do.
var DefaultNonZeroRequests = map[string]int64{"cpu": 100, "memory": 200 << 20}

// SumRequests computes a pod's requests from its parts as the scheduler
// does (k8s.io/component-helpers resource.PodRequests, pod-level resources
// enabled): the app containers and sidecars (init containers with
// restartPolicy Always) summed; each other init container with the sidecars
// started before it, and the pod's total is the larger of that peak and the
// sum; pod-level requests replace cpu, memory and hugepages-* when the pod
// sets any of them; then overhead is added. With nonMissing, a container
// (app or init) that does not request one of its resources counts it at that
// amount; an explicit 0 stays 0. Units are the SDK's (cpu in millicores).
// Pass pod.Containers(), pod.PodResources() and pod.Overhead().
func SumRequests(containers []Container, podLevel, overhead, nonMissing map[string]int64) map[string]int64 {
	reqs := func(c Container) map[string]int64 {
		out := make(map[string]int64, len(c.Requests)+len(nonMissing))
		for k, v := range c.Requests {
			out[k] = v
		}
		for k, v := range nonMissing {
			if _, ok := c.Requests[k]; !ok {
				out[k] = v
			}
		}
		return out
	}
	add := func(dst, src map[string]int64) {
		for k, v := range src {
			dst[k] += v
		}
	}
	total := map[string]int64{}
	for _, c := range containers {
		if c.Kind != ContainerInit {
			add(total, reqs(c))
		}
	}
	sidecars, peak := map[string]int64{}, map[string]int64{}
	for _, c := range containers {
		if c.Kind != ContainerInit {
			continue
		}
		r := reqs(c)
		var use map[string]int64
		if c.RestartPolicy == "Always" {
			add(total, r)
			add(sidecars, r)
			use = sidecars
		} else {
			use = map[string]int64{}
			add(use, r)
			add(use, sidecars)
		}
		for k, v := range use {
			if cur, ok := peak[k]; !ok || v > cur {
				peak[k] = v
			}
		}
	}
	for k, v := range peak {
		if cur, ok := total[k]; !ok || v > cur {
			total[k] = v
		}
	}
	podLevelSet := false
	for k := range podLevel {
		podLevelSet = podLevelSet || podLevelResource(k)
	}
	if podLevelSet {
		for k, v := range podLevel {
			if podLevelResource(k) {
				total[k] = v
			}
		}
	}
	add(total, overhead)
	return total
}

func podLevelResource(name string) bool {
	return name == "cpu" || name == "memory" || (len(name) >= 10 && name[:10] == "hugepages-")
}

// DerivePod returns a copy of p with Derived computed as the scheduler
// computes it from a pod with p's fields (the native backend's view of a
// test's pod): the containers in the ABI's order, with the container "c"
// of a pod given only Requests, and the effective requests.
func DerivePod(p *Pod) (*Pod, error) {
	if len(p.Containers) > 0 && len(p.Requests) > 0 {
		return nil, errors.New("pod " + p.Name + ": give Requests (one container's) or Containers, not both: with Containers, set each container's Requests")
	}
	d := *p
	d.Derived.Containers = ContainersOf(p)
	d.Derived.Requests = SumRequests(d.Derived.Containers, p.PodResources, p.Overhead, nil)
	d.Derived.NonZeroRequests = SumRequests(d.Derived.Containers, nil, p.Overhead, DefaultNonZeroRequests)
	return &d, nil
}

// ContainersOf are p's containers as the pod has them: init containers
// first, then app containers; for a pod given only Requests, one app
// container named "c" that requests them.
func ContainersOf(p *Pod) []Container {
	if len(p.Containers) == 0 {
		if len(p.Requests) == 0 {
			return nil
		}
		return []Container{{Kind: ContainerApp, Name: "c", Requests: p.Requests}}
	}
	out := make([]Container, 0, len(p.Containers))
	for _, c := range p.Containers {
		if c.Kind == ContainerInit {
			out = append(out, c)
		}
	}
	for _, c := range p.Containers {
		if c.Kind != ContainerInit {
			c.Kind = ContainerApp
			out = append(out, c)
		}
	}
	return out
}

// PodsOn are the pods on n: its Pods, then the pod named <node>-load
// that requests Requested (when set; load is its index, -1 without one),
// then pods named <node>-pod<i> until there are PodCount. Case tables
// build the node's pods from the same list.
func PodsOn(n *Node) (pods []NodePod, load int) {
	pods = append(pods, n.Pods...)
	load = -1
	if len(n.Requested) > 0 {
		load = len(pods)
		name := n.Name + "-load"
		pods = append(pods, NodePod{Name: name, UID: name})
	}
	for len(pods) < n.PodCount {
		name := n.Name + "-pod" + strconv.Itoa(len(pods))
		pods = append(pods, NodePod{Name: name, UID: name})
	}
	return pods, load
}

// DeriveNode returns a copy of n with Derived computed as the scheduler's
// NodeInfo and snapshot hold it for a node with n's fields and pods (the
// native backend's view of a test's node), in cluster c (nil: the node
// alone). It fails when n sets NonZeroRequested to anything else.
func DeriveNode(n *Node, c *Cluster) (*Node, error) {
	d := *n
	pods, load := PodsOn(n)
	dv := &d.Derived
	dv.Pods, dv.PodCount = pods, len(pods)

	dv.Allocatable = map[string]int64{}
	for name, v := range n.Allocatable {
		if coreResource(name) || ScalarResource(name) {
			dv.Allocatable[name] = v
		}
	}

	dv.Requested = map[string]int64{"cpu": 0, "memory": 0, "ephemeral-storage": 0, "pods": 0}
	cpu, mem := int64(0), int64(0)
	for i, p := range pods {
		switch {
		case i == load:
			for name, v := range n.Requested {
				if name == "cpu" || name == "memory" || name == "ephemeral-storage" || ScalarResource(name) {
					dv.Requested[name] += v
				}
			}
			nz := SumRequests([]Container{{Kind: ContainerApp, Requests: n.Requested}}, nil, nil, DefaultNonZeroRequests)
			cpu, mem = cpu+nz["cpu"], mem+nz["memory"]
		case len(p.HostPorts) > 0:
			// Its one container, with the ports, requests nothing.
			cpu, mem = cpu+DefaultNonZeroRequests["cpu"], mem+DefaultNonZeroRequests["memory"]
		}
	}
	dv.NonZeroRequested = map[string]int64{"cpu": cpu, "memory": mem}
	if n.NonZeroRequested != nil && (len(n.NonZeroRequested) != 2 || n.NonZeroRequested["cpu"] != cpu || n.NonZeroRequested["memory"] != mem) {
		return nil, errors.New("node " + n.Name + ": NonZeroRequested is what its pods give, cpu " + strconv.FormatInt(cpu, 10) +
			" and memory " + strconv.FormatInt(mem, 10) + ": leave it unset, or give the pods that make it")
	}

	seen := map[HostPort]bool{}
	for _, p := range pods {
		for _, h := range p.HostPorts {
			if h.IP == "" {
				h.IP = "0.0.0.0"
			}
			if h.Protocol == "" {
				h.Protocol = "TCP"
			}
			if h.Port <= 0 || seen[h] {
				continue
			}
			seen[h] = true
			dv.UsedPorts = append(dv.UsedPorts, h)
		}
	}
	sort.Slice(dv.UsedPorts, func(i, j int) bool {
		a, b := dv.UsedPorts[i], dv.UsedPorts[j]
		if a.IP != b.IP {
			return a.IP < b.IP
		}
		if a.Protocol != b.Protocol {
			return a.Protocol < b.Protocol
		}
		return a.Port < b.Port
	})

	dv.ImageStates = ImageStates(n, c)
	return &d, nil
}

// ImageStates are n's images as a scheduler snapshot of cluster c (nil:
// n alone) has them (its NewSnapshot): one per name, with the size of the
// last of n's images that lists it, and the number of c's nodes that list
// the name; sorted by name.
func ImageStates(n *Node, c *Cluster) []ImageState {
	nodes := []*Node{n}
	if c != nil {
		nodes = c.Nodes
	}
	size := map[string]int64{}
	var names []string
	for _, im := range n.Images {
		if _, seen := size[im.Name]; !seen {
			names = append(names, im.Name)
		}
		size[im.Name] = im.SizeBytes
	}
	sort.Strings(names)
	out := make([]ImageState, 0, len(names))
	for _, name := range names {
		num := 0
		for _, cn := range nodes {
			for _, other := range cn.Images {
				if other.Name == name {
					num++
					break
				}
			}
		}
		out = append(out, ImageState{Name: name, SizeBytes: size[name], NumNodes: num})
	}
	return out
}

func coreResource(name string) bool {
	return name == "cpu" || name == "memory" || name == "ephemeral-storage" || name == "pods"
}

// ScalarResource reports whether the scheduler keeps a resource of this
// name beside cpu, memory, ephemeral-storage and pods (its
// IsScalarResourceName): an extended resource (a domain-prefixed name
// outside kubernetes.io), hugepages-*, a kubernetes.io-prefixed native
// resource or attachable-volumes-*. It drops any other name from a node's
// allocatable and requested.
func ScalarResource(name string) bool {
	prefixedNative := strings.Contains(name, "kubernetes.io/")
	if strings.HasPrefix(name, "hugepages-") || strings.HasPrefix(name, "attachable-volumes-") || prefixedNative {
		return true
	}
	// An extended resource: not native (a name without a domain), not
	// requests.*, and a qualified name once prefixed with requests.
	return strings.Contains(name, "/") && !strings.HasPrefix(name, "requests.") && abi.QualifiedName("requests."+name)
}
