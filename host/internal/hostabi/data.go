package hostabi

import (
	"sync"
	"sync/atomic"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
	"github.com/wasmsched/wasmsched/internal/kubemodel"
)

// What a guest reads is the data model of guest-sdk/model, encoded by its
// encoders. The host converts a cycle's v1.Pod and each NodeInfo into the
// model part by part (internal/kubemodel), the first time a policy reads a
// row of the part, and keeps the part and every encoded list for the cycle
// (the pod) or the NodeInfo generation (a node).

var cycleCounter atomic.Uint64

// PodState is the pod of one scheduling cycle as policies see it. It is built
// once per cycle and shared by every policy and every node of that cycle, so
// nothing about the pod is converted or encoded more than once per cycle,
// and only if some policy asks for it.
type PodState struct {
	Pod *v1.Pod
	// Cycle is unique per PodState; guests use it to cache pod reads.
	Cycle uint64
	// Cluster is what policies that declare the Cluster or Namespaces reads
	// see of the cluster in this cycle; nil answers NotAvailable.
	Cluster *ClusterView

	m model.Pod
	// filled and listed have a bit per part converted and per list
	// encoded, set after the work is done (so a reader that sees the bit
	// sees the result); mu serializes the work, the first read of each
	// part and list in the cycle. One mutex and two words rather than a
	// sync.Once per part and per list: a PodState is made for every pod
	// PreEnqueue sees, and the Onces made it 640 bytes larger
	// (BenchmarkPreEnqueue: 1344 -> 1984 B/op, +25% time).
	mu     sync.Mutex
	filled atomic.Uint64
	listed atomic.Uint64
	// lists are the encoded lists, allocated with the first (a gate that
	// reads a label or two encodes none).
	lists *[model.NumPodLists][]byte

	objOnce sync.Once
	// key is Key and base baseKey, each computed once (or taken from an
	// earlier cycle of the same pod object, TakeKeys); keyDone and
	// baseDone are set once they hold it.
	keyOnce, baseOnce sync.Once
	key, base         [32]byte
	keyDone, baseDone atomic.Bool
}

// The bit sets hold every part and list.
var (
	_ [64 - kubemodel.NumPodParts]struct{}
	_ [64 - model.NumPodLists]struct{}
)

// NewPodState starts a cycle for pod.
func NewPodState(pod *v1.Pod) *PodState {
	return &PodState{Pod: pod, Cycle: cycleCounter.Add(1)}
}

// model returns the pod's model with part converted.
func (p *PodState) model(part kubemodel.PodPart) *model.Pod {
	if p.filled.Load()&(1<<part) == 0 {
		p.fill(part)
	}
	return &p.m
}

func (p *PodState) fill(part kubemodel.PodPart) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.filled.Load()&(1<<part) != 0 {
		return
	}
	var spread kubemodel.DefaultSpread
	if c := p.Cluster; c != nil && c.DefaultSpreadSelector != nil {
		spread = c.DefaultSpreadSelector
	}
	kubemodel.FillPod(&p.m, p.Pod, part, spread)
	p.filled.Or(1 << part)
}

// Requests returns the pod's effective requests the way the scheduler counts
// them (max of init containers and the sum of containers, plus overhead):
// cpu in millicores, everything else in base units.
func (p *PodState) Requests() map[string]int64 {
	return p.model(kubemodel.PodRequests).Derived.Requests
}

func (p *PodState) list(kind int32) ([]byte, bool) {
	if kind < 0 || kind >= model.NumPodLists {
		return nil, false
	}
	if bit := uint64(1) << kind; p.listed.Load()&bit == 0 {
		m := p.model(kubemodel.PodListPart(kind)) // before mu: fill takes it
		p.mu.Lock()
		if p.listed.Load()&bit == 0 {
			if p.lists == nil {
				p.lists = new([model.NumPodLists][]byte)
			}
			p.lists[kind], _ = model.PodList(m, kind)
			p.listed.Or(bit)
		}
		p.mu.Unlock()
	}
	return p.lists[kind], true
}

func (p *PodState) str(field int32) (string, bool) {
	return model.PodString(p.model(kubemodel.PodScalars), field)
}

func (p *PodState) priority() int64 { return p.model(kubemodel.PodScalars).Priority }

// object is the whole pod as JSON (pod_object), encoded on first use.
func (p *PodState) object(format int32) ([]byte, bool) {
	if format != abi.ObjectJSON {
		return nil, false
	}
	p.objOnce.Do(func() { p.m.Object = kubemodel.PodObject(p.Pod) })
	return p.m.Object, true
}

// nodeCache keeps each node's model and encoded lists, keyed by node name
// and valid for one NodeInfo generation. The scheduler bumps the generation
// whenever the node or its pods change, so an entry is reused across cycles
// for as long as the node is unchanged. A sync.Map: the entry of a node is
// looked up on every batch (its table row) and by the first read of a node
// in a call, from every scheduling goroutine at once, and a lock-free hit
// costs about half what an RWMutex-guarded map did.
//
// Each Engine has its own: a generation means something only to the
// counter that issued it, and an engine's NodeInfos come from one (the
// scheduler's, or pkg/nodeinfo's for policytest and the CLI), while two
// engines in one process may be fed by different counters.
type nodeCache struct {
	m atomic.Pointer[sync.Map] // node name → *nodeEntry
	// n counts the names stored since m was last replaced.
	n atomic.Int64
	// recent holds m's entries by generation, direct-mapped: a hit costs
	// a load and two compares where m's costs a hash of the name and a
	// walk of the map (a third of a remembered verdict's cost,
	// BenchmarkShapes). An entry m replaces or drops leaves it too, so it
	// keeps no node alive that m does not.
	recent [recentSlots]atomic.Pointer[nodeEntry]
}

// recentSlots is the size of nodeCache.recent (512 KiB of pointers). The
// live generations of a cluster's nodes are spread over a range many times
// its size (every pod bound or removed takes one), so they fall on slots
// as if at random, and two that share one push each other out on every
// visit: with 8192 slots, 5000 nodes put about 45% of them through m's
// hash of the name on every read (a third of WasmPolicy's Score at 5000
// nodes, docs/architecture.md); with 65536, about 7%.
const recentSlots = 1 << 16

type nodeEntry struct {
	name string
	gen  int64
	// seen is the address of the last NodeInfo found to be this entry's
	// (its name checked): entry's hit compares it instead of reading the
	// name through the NodeInfo's Node, a second cache miss per node that
	// was a sixth of a distinct-rows Score batch (BenchmarkShapes).
	seen  atomic.Uintptr
	m     model.Node
	parts [kubemodel.NumNodeParts]sync.Once
	once  [model.NumNodeLists]sync.Once
	lists [model.NumNodeLists][]byte

	objOnce sync.Once

	// images is the node's image states as node_list encodes them, with
	// what they were encoded from (imageStates).
	images atomic.Pointer[imageList]

	// rows are the node's node-table rows, one per layout (table.go):
	// read without a lock, replaced under rowsMu.
	rowsMu sync.Mutex
	rows   atomic.Pointer[cachedRows]

	// tenant is the node's pod lists as one namespace's policies read
	// them (tenant.go): one namespace at a time, replaced, never changed.
	tenant atomic.Pointer[tenantLists]
}

// model returns the node's model with part converted from ni (a NodeInfo
// of the entry's generation; the entry keeps none, so it holds no pods).
func (e *nodeEntry) model(ni fwk.NodeInfo, part kubemodel.NodePart) *model.Node {
	if part < kubemodel.NumNodeParts {
		e.parts[part].Do(func() { kubemodel.FillNode(&e.m, ni, part) })
	}
	return &e.m
}

// imageList is an encoded image-state list and the summaries it was
// encoded from, by image name.
type imageList struct {
	from    map[string]imageSummary
	encoded []byte
}

// imageSummary is what node_list reads of an image state.
type imageSummary struct {
	size     int64
	numNodes int
}

// imageStates is node_list's image states of ni: encoded again only when
// they changed. They cannot be cached by generation alone: an image's
// NumNodes counts other nodes, and the snapshot may change it without
// this node's generation changing. So the cached encoding is checked
// against every summary (size and node count) on each read, which costs
// one map lookup per image instead of a conversion, a sort and an
// encoding, and nothing for a node without images.
func (e *nodeEntry) imageStates(ni fwk.NodeInfo) ([]byte, bool) {
	states := ni.GetImageStates()
	if l := e.images.Load(); l != nil && sameImages(l.from, states) {
		return l.encoded, true
	}
	var m model.Node
	kubemodel.FillNode(&m, ni, kubemodel.NodeImageStates)
	b, ok := model.NodeList(&m, model.NodeImageStates)
	if !ok {
		return nil, false
	}
	from := make(map[string]imageSummary, len(states))
	for name, s := range states {
		if s != nil {
			from[name] = imageSummary{s.Size, s.NumNodes}
		}
	}
	e.images.Store(&imageList{from: from, encoded: b})
	return b, true
}

// sameImages reports whether states holds exactly the summaries of from.
func sameImages(from map[string]imageSummary, states map[string]*fwk.ImageStateSummary) bool {
	if len(from) != len(states) {
		return false
	}
	for name, s := range states {
		f, ok := from[name]
		if !ok || s == nil || f != (imageSummary{s.Size, s.NumNodes}) {
			return false
		}
	}
	return true
}

// object is the whole node as JSON (node_object), encoded once per
// NodeInfo generation.
func (c *nodeCache) object(ni fwk.NodeInfo, format int32) ([]byte, bool) {
	if format != abi.ObjectJSON {
		return nil, false
	}
	e := c.entry(ni)
	e.objOnce.Do(func() { e.m.Object = kubemodel.NodeObject(ni.Node()) })
	return e.m.Object, true
}

func newNodeCache() *nodeCache {
	c := &nodeCache{}
	c.m.Store(new(sync.Map))
	return c
}

// maxNodeCacheEntries bounds the cache; it starts over when a cluster has
// churned through this many node names.
const maxNodeCacheEntries = 50000

func (c *nodeCache) entry(ni fwk.NodeInfo) *nodeEntry {
	gen, addr := Generation(ni), nodeInfoAddr(ni)
	slot := &c.recent[uint64(gen)%recentSlots]
	e := slot.Load()
	if e != nil && e.gen == gen {
		// The NodeInfo seen at this generation last time, or one with the
		// same name (the scheduler's snapshot and cache hold copies of one
		// generation). A NodeInfo at another address that this entry saw
		// before is its copy too: generations are never reused within one
		// counter, and an engine's NodeInfos come from one (nodeCache).
		if e.seen.Load() == addr && gen != 0 {
			return e
		}
		if e.name == ni.Node().Name {
			e.seen.Store(addr)
			return e
		}
	}
	if gen < 0 {
		// A node a pod-group cycle placed a member into (Generation): its
		// entry lives in recent only, for as long as the mark is on, and
		// m keeps the node's entry of its real generation, which is good
		// again once the mark comes off.
		e = &nodeEntry{name: ni.Node().Name, gen: gen}
	} else {
		e = c.lookup(ni.Node().Name, gen)
	}
	e.seen.Store(addr)
	slot.Store(e)
	return e
}

// nodeInfoAddr is the address of the NodeInfo behind ni: the data word of
// the interface value.
func nodeInfoAddr(ni fwk.NodeInfo) uintptr {
	return (*[2]uintptr)(unsafe.Pointer(&ni))[1]
}

// lookup is entry's way through m.
func (c *nodeCache) lookup(name string, gen int64) *nodeEntry {
	m := c.m.Load()
	v, ok := m.Load(name)
	if ok && v.(*nodeEntry).gen == gen {
		return v.(*nodeEntry)
	}
	e := &nodeEntry{name: name, gen: gen}
	for {
		if !ok {
			if v, ok = m.LoadOrStore(name, e); !ok {
				if c.n.Add(1) > maxNodeCacheEntries {
					c.n.Store(0)
					c.m.Store(new(sync.Map))
					for i := range c.recent {
						c.recent[i].Store(nil)
					}
				}
				return e
			}
		}
		// An entry was there: keep it if it is of this generation, else
		// replace it unless another goroutine replaced it first.
		old := v.(*nodeEntry)
		if old.gen == gen {
			return old
		}
		if m.CompareAndSwap(name, v, e) {
			c.recent[uint64(old.gen)%recentSlots].CompareAndSwap(old, nil)
			return e
		}
		v, ok = m.Load(name)
	}
}

// list is one of the node's lists (node_list), encoded once per NodeInfo
// generation.
func (c *nodeCache) list(ni fwk.NodeInfo, kind int32) ([]byte, bool) {
	if kind < 0 || kind >= model.NumNodeLists {
		return nil, false
	}
	if kind == model.NodeImageStates {
		return c.entry(ni).imageStates(ni)
	}
	e := c.entry(ni)
	e.once[kind].Do(func() {
		e.lists[kind], _ = model.NodeList(e.model(ni, kubemodel.NodeListPart(kind)), kind)
	})
	return e.lists[kind], true
}

// str reads node_string's fields; ok is false for an unknown one.
func (c *nodeCache) str(ni fwk.NodeInfo, field int32) (string, bool) {
	return model.NodeString(c.entry(ni).model(ni, kubemodel.NodeScalars), field)
}

// nodeResource reads node_resource's kinds: one resource in ABI units, or
// abi.MissingQuantity when absent; ok is false for an unknown kind (which
// also answers abi.MissingQuantity, as bad arguments do).
func nodeResource(ni fwk.NodeInfo, kind int32, name string) (int64, bool) {
	return kubemodel.NodeResource(ni, kind, name)
}

// model is the node's model with part converted, for the reads that
// need no list.
func (c *nodeCache) model(ni fwk.NodeInfo, part kubemodel.NodePart) *model.Node {
	return c.entry(ni).model(ni, part)
}
