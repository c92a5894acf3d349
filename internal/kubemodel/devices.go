package kubemodel

import (
	"context"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/klog/v2"

	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

// DRALister is what resource_claims reads: the DRA objects as the
// scheduler's DynamicResources plugin sees them (its SharedDRAManager,
// whose claims include the allocations the scheduler has made and not yet
// written). Errors read as nothing found.
type DRALister interface {
	Claim(namespace, name string) (*resourceapi.ResourceClaim, error)
	// ClaimPending reports an allocation the scheduler made for the
	// claim and has not written yet.
	ClaimPending(claim *resourceapi.ResourceClaim) bool
	// Allocated returns the devices claims hold, by driver, pool and
	// device, as the DynamicResources plugin counts them: allocations in
	// flight included, admin-access ones left out.
	Allocated() (map[DeviceID]bool, error)
	Slices() ([]*resourceapi.ResourceSlice, error)
	Class(name string) (*resourceapi.DeviceClass, error)
}

// DeviceID names a device by driver, pool and device name.
type DeviceID [3]string

// Devices is what resource_claims answers for pod: the requests of the
// claims it names and, for each node-local ResourceSlice pool, how many
// devices of each requested class it offers and how many no claim holds.
//
// It counts what the scheduler would offer, in simpler terms than the
// allocator: a device is of a class when every CEL selector of the class
// matches it (the requests' own selectors are not applied); only the
// newest generation of each pool counts; devices shared by several claims
// (allowMultipleAllocations) and counters are not modelled, a device is
// free or not. A selector that fails to compile or evaluate matches
// nothing.
//
// With nodes false only the requests are read (a policy that reads
// nothing else pays nothing for the nodes' sums).
func Devices(pod *v1.Pod, l DRALister, nodes bool) model.Devices {
	var d model.Devices
	if l == nil || len(pod.Spec.ResourceClaims) == 0 {
		return d
	}
	classes := map[string]*resourceapi.DeviceClass{}
	for _, pc := range pod.Spec.ResourceClaims {
		name := claimNameOf(pod, pc)
		var claim *resourceapi.ResourceClaim
		if name != "" {
			claim, _ = l.Claim(pod.Namespace, name)
		}
		if claim == nil {
			d.Requests = append(d.Requests, model.DeviceRequest{PodClaim: pc.Name, ClaimName: name})
			continue
		}
		allocated := claim.Status.Allocation != nil || l.ClaimPending(claim)
		add := func(req, class string, mode resourceapi.DeviceAllocationMode, count int64) {
			if mode == resourceapi.DeviceAllocationModeAll {
				count = 0
			} else if count == 0 {
				count = 1
			}
			d.Requests = append(d.Requests, model.DeviceRequest{PodClaim: pc.Name, ClaimName: name, Found: true, Allocated: allocated,
				Request: req, DeviceClassName: class, Count: count})
			if _, ok := classes[class]; !ok && class != "" {
				classes[class], _ = l.Class(class)
			}
		}
		for _, r := range claim.Spec.Devices.Requests {
			if r.Exactly != nil {
				add(r.Name, r.Exactly.DeviceClassName, r.Exactly.AllocationMode, r.Exactly.Count)
			}
			for _, s := range r.FirstAvailable {
				add(r.Name+"/"+s.Name, s.DeviceClassName, s.AllocationMode, s.Count)
			}
		}
	}
	if len(classes) == 0 || !nodes {
		return d
	}
	d.Nodes = nodeDevices(l, classes)
	return d
}

// claimNameOf is the ResourceClaim a pod's claim entry names: its
// resourceClaimName, or the claim the controller made from its template
// (recorded in the pod's status; "" until then).
func claimNameOf(pod *v1.Pod, pc v1.PodResourceClaim) string {
	if pc.ResourceClaimName != nil {
		return *pc.ResourceClaimName
	}
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.Name == pc.Name && s.ResourceClaimName != nil {
			return *s.ResourceClaimName
		}
	}
	return ""
}

// nodeDevices counts each class's devices on each node's slices.
func nodeDevices(l DRALister, classes map[string]*resourceapi.DeviceClass) []model.NodeDevices {
	slices, _ := l.Slices()
	taken, err := l.Allocated()
	if err != nil {
		taken = nil // counted free: the DynamicResources plugin still refuses a node without one
	}
	// A pool counts at its newest generation, and only once every slice
	// of that generation is there, as the allocator reads pools.
	type poolKey [2]string
	newest := map[poolKey]int64{}
	for _, s := range slices {
		k := poolKey{s.Spec.Driver, s.Spec.Pool.Name}
		newest[k] = max(newest[k], s.Spec.Pool.Generation)
	}
	have, want := map[poolKey]int64{}, map[poolKey]int64{}
	for _, s := range slices {
		if k := (poolKey{s.Spec.Driver, s.Spec.Pool.Name}); s.Spec.Pool.Generation == newest[k] {
			have[k]++
			want[k] = s.Spec.Pool.ResourceSliceCount
		}
	}
	defer matches.prune(slices)
	names := make([]string, 0, len(classes))
	for n := range classes {
		names = append(names, n)
	}
	sort.Strings(names)
	type key struct{ node, class string }
	counts := map[key]*model.NodeDevices{}
	var out []model.NodeDevices
	var order []key
	for _, s := range slices {
		k := poolKey{s.Spec.Driver, s.Spec.Pool.Name}
		if s.Spec.NodeName == nil || *s.Spec.NodeName == "" || s.Spec.Pool.Generation != newest[k] || have[k] < want[k] {
			continue
		}
		node := *s.Spec.NodeName
		for i, dev := range s.Spec.Devices {
			for _, cn := range names {
				if !deviceMatches(classes[cn], s, i) {
					continue
				}
				k := key{node, cn}
				nd := counts[k]
				if nd == nil {
					nd = &model.NodeDevices{Node: node, DeviceClassName: cn}
					counts[k] = nd
					order = append(order, k)
				}
				nd.Total++
				if !taken[DeviceID{s.Spec.Driver, s.Spec.Pool.Name, dev.Name}] {
					nd.Free++
				}
			}
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		if order[i].node != order[j].node {
			return order[i].node < order[j].node
		}
		return order[i].class < order[j].class
	})
	for _, k := range order {
		out = append(out, *counts[k])
	}
	return out
}

// matches remembers which devices each class selects, per slice and
// class by the objects' identities: the scheduler's informers replace an
// object when it changes, so a class and a slice at the same address hold
// the same selectors and devices. A cycle then looks the answers up
// instead of evaluating CEL per device (BenchmarkReadCost's
// Cluster.NodeDevices: 32 nodes of 8 devices took 2.1 ms a cycle
// evaluating). Slices no longer listed are dropped after each walk, so
// the cache holds what the cluster holds, not what it held.
var matches = &matchCache{m: map[*resourceapi.ResourceSlice]map[*resourceapi.DeviceClass][]bool{}}

type matchCache struct {
	sync.Mutex
	m map[*resourceapi.ResourceSlice]map[*resourceapi.DeviceClass][]bool
}

func deviceMatches(class *resourceapi.DeviceClass, s *resourceapi.ResourceSlice, i int) bool {
	matches.Lock()
	defer matches.Unlock()
	byClass := matches.m[s]
	if byClass == nil {
		byClass = map[*resourceapi.DeviceClass][]bool{}
		matches.m[s] = byClass
	}
	m, ok := byClass[class]
	if !ok {
		m = make([]bool, len(s.Spec.Devices))
		for d := range s.Spec.Devices {
			m[d] = classMatches(class, s.Spec.Driver, s.Spec.Devices[d])
		}
		byClass[class] = m
	}
	return m[i]
}

// prune drops the slices not in the current list (replaced or deleted).
// Classes of a slice are few (those pods request), and a replaced class
// is dropped with its slice's next replacement.
func (c *matchCache) prune(current []*resourceapi.ResourceSlice) {
	c.Lock()
	defer c.Unlock()
	if len(c.m) <= len(current) {
		return
	}
	keep := make(map[*resourceapi.ResourceSlice]bool, len(current))
	for _, s := range current {
		keep[s] = true
	}
	for s := range c.m {
		if !keep[s] {
			delete(c.m, s)
		}
	}
}

// classMatches says whether every CEL selector of class matches the
// device of driver; a class that does not exist matches nothing.
func classMatches(class *resourceapi.DeviceClass, driver string, dev resourceapi.Device) bool {
	if class == nil {
		return false
	}
	for _, sel := range class.Spec.Selectors {
		if sel.CEL == nil {
			continue
		}
		prog := compiledSelector(sel.CEL.Expression)
		if prog.Error != nil {
			logSelectorOnce(class.Name, sel.CEL.Expression, prog.Error)
			return false
		}
		ok, _, err := prog.DeviceMatches(context.Background(), cel.Device{Driver: driver, Attributes: dev.Attributes, Capacity: dev.Capacity})
		if err != nil || !ok {
			return false
		}
	}
	return true
}

// compiled keeps each selector expression compiled once: classes are few
// and their expressions change rarely, while a cycle evaluates them per
// device. Bounded so that a cluster rewriting classes cannot grow it
// without end.
var compiled = struct {
	sync.Mutex
	m map[string]cel.CompilationResult
}{m: map[string]cel.CompilationResult{}}

const maxCompiledSelectors = 1024

// logged holds the selectors already logged as not compiling.
var logged sync.Map

// logSelectorOnce logs, once per expression, a class selector that does
// not compile here: its devices match nothing for resource_claims (the
// scheduler may compile it with features this reader does not enable).
func logSelectorOnce(class, expr string, err error) {
	if _, seen := logged.LoadOrStore(expr, true); !seen {
		klog.InfoS("A DeviceClass selector does not compile for policies' Devices read; its devices count as not of the class", "deviceClass", class, "expression", expr, "err", err.Error())
	}
}

func compiledSelector(expr string) cel.CompilationResult {
	compiled.Lock()
	defer compiled.Unlock()
	if r, ok := compiled.m[expr]; ok {
		return r
	}
	r := cel.GetCompiler(cel.Features{}).CompileCELExpression(expr, cel.Options{DisableCostEstimation: true})
	if len(compiled.m) >= maxCompiledSelectors {
		clear(compiled.m)
	}
	compiled.m[expr] = r
	return r
}
