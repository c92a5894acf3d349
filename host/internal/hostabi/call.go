// Package hostabi is the host side of the ABI (docs/abi.md §4): the host
// functions a guest imports from "wasmsched" (Funcs), and the data they
// answer from: a cycle's pod (PodState), the nodes (a Caches per engine),
// the cluster (ClusterView), the policy's cycle state (Cycle) and node
// tables.
//
// It is one of the host's three parts. Package host is the runtime: it
// loads, compiles and instantiates modules, pools instances and enforces
// deadlines, budgets and memory; for each guest call it fills the
// instance's Call and puts it in the call's context, and the host
// functions read and write nothing else. Package wasmbin (with fuel) reads
// and rewrites the untrusted binaries before anything runs.
package hostabi

import (
	"context"
	"fmt"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/abi/fields"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
	"github.com/wasmsched/wasmsched/internal/kubemodel"
)

// Result is a guest's status: a code of abi.Code* and its reason.
type Result struct {
	Code   int32
	Reason string
}

// CodeUnselected marks a batch node the guest has not selected yet; it
// never leaves the host (the runtime turns it into an Error verdict).
const CodeUnselected int32 = -1

// Policy is what host functions need from the policy a call belongs to.
// The runtime implements it; the methods are called only from host
// functions, never on a call's fast path of pod and node reads.
type Policy interface {
	// Name names the policy in logs.
	Name() string
	// Config is the policy's config string (the config host function).
	Config() []byte
	// Permits reports whether the policy declared scope, and logs the
	// first undeclared read of each scope.
	Permits(scope fields.Scope, fn string, num int32) bool
	// BadTerm logs, once, a count_pods term that does not parse.
	BadTerm(term []byte)
	// Refused logs, once per fn, a read the policy declared but may not
	// make as a namespaced policy, and why.
	Refused(fn, why string)
	// LogPass grants n lines of guest log output within the policy's rate.
	LogPass(n int) int
	// PatchPrefixes are the keys its prebind may write.
	PatchPrefixes() []string
	// Objects are the readers of its declared objects, by declaration
	// (objects[i]); none while the kinds are not watched.
	Objects() []ObjectReader
}

// Runtime is what host functions tell the runtime about the call in flight.
type Runtime interface {
	// NodeStarted restarts the deadline: a batch's guest made its next
	// node current (select_node).
	NodeStarted()
}

// Call is the state of one guest call. The runtime embeds one in each
// instance, sets the exported fields before the call and reads the
// results after it; the host functions do the rest.
type Call struct {
	// Policy, Runtime, Caches and PodReads are set once per instance;
	// PodReads (its version's) records the pod's labels and annotations
	// the guest reads, nil to record none.
	Policy   Policy
	Runtime  Runtime
	Caches   *Caches
	PodReads *PodReads
	// Tenant, set once per instance, is the namespace of a namespaced
	// policy ("" for the operator's): the pods it is called for are of
	// that namespace, and what it reads about other namespaces' pods is
	// only counts (tenant.go).
	Tenant string
	// Counters, set once per instance, are the policy's counts when its
	// version declares KeepsState (nil otherwise: counter_add and
	// counter_get answer NotDeclared).
	Counters *Counters

	// Kind is the entry point of the call in flight.
	Kind abi.Point
	// Pod, Node, Cycle and Scores are what the call reads: Node is nil
	// outside node calls (and changes with select_node), Scores are
	// normalize_score's and score_nodes' in/out slice.
	Pod    *PodState
	Node   fwk.NodeInfo
	Cycle  *Cycle
	Scores []int64
	// Code and Reason are the call's status (set_status), outside batches.
	Code   int32
	Reason string

	// Batch calls (filter_nodes, score_nodes, normalize_score's select_node):
	// the nodes, their results (nil for normalize_score), and the index
	// select_node made current (-1 before the first). ScoresSet records
	// that score_nodes reported its scores.
	Batch     []fwk.NodeInfo
	Results   []Result
	Cur       int
	ScoresSet bool

	// ABI v2 node tables (table.go): the table the guest declared, the one
	// the batch in flight was filled with (nil: none), the highest node
	// index the guest reported evaluating in it, and the interner epoch it
	// was filled in.
	Table, CallTable *Table
	TableCur         int32
	TableEpoch       uint32
	// Groups are the batch's nodes grouped by row when the table holds
	// each distinct row once (FillTable).
	Groups RowGroups

	// Unkeyable records that the call read something its verdicts cannot
	// be keyed on by row: a node's data through select_node in a filter
	// or score batch (its name, its pods, anything outside the table), or
	// random bytes. The runtime clears it before each call.
	Unkeyable bool
	// VariesByPod records that the call read something that differs
	// between pods of one template or between cycles, so its verdicts
	// hold for this pod and cycle only: the pod's name, UID, creation
	// time or whole object, or the cluster (counts, other nodes,
	// namespaces, the pod's spread selector). The runtime clears it
	// before each call.
	VariesByPod bool
	// ReadsObjects records that the call read granted objects (§4.10):
	// its verdicts hold while the kinds it read are unchanged. The runtime
	// clears it before each call.
	ReadsObjects bool
	// Random records that the call drew random bytes (the runtime's
	// random_get, outside the ABI): its answer is its instance's. The
	// runtime clears it before each call; a guest's start-up draws (Go
	// and TinyGo seed their maps) come before any.
	Random bool

	// reasons registered with reason_register, by id - 1.
	reasons   []string
	reasonIDs map[string]int32
	// scratch is reused to encode answers built per call (node_taint).
	scratch []byte
	// lastReason is the last reason string, reused when a guest repeats it.
	lastReason string
	// nodeEnt is Node's cache entry (nodeEntFor the node it was looked up
	// for), so the reads of one node look it up once; nodeScratch holds
	// the cheap parts of the current node (NodeModel).
	nodeEnt     *nodeEntry
	nodeEntFor  fwk.NodeInfo
	nodeScratch model.Node
}

// Key is the context key under which a guest call's context answers its
// *Call: a pointer compare, with no map lookup and no allocation per call.
type Key struct{}

// CallOf is the Call a host function was called from.
func CallOf(ctx context.Context) *Call { return ctx.Value(Key{}).(*Call) }

// Release forgets what the last call read, so a pooled instance keeps no
// pod, node or cycle alive (nor a node's label and annotation maps).
func (c *Call) Release() {
	c.Pod, c.Node, c.Cycle, c.Scores = nil, nil, nil, nil
	c.nodeEnt, c.nodeEntFor = nil, nil
	c.nodeScratch.Labels, c.nodeScratch.Annotations = nil, nil
}

// SetStatus records the guest's status: the call's, or in a batch the
// current node's (every node's before the first select_node, abi.md §3.1).
// An unknown code becomes the policy's Error, with a reason that says so.
func (c *Call) SetStatus(code int32, reason []byte) {
	// Policies repeat the same reason across nodes: reuse the last string
	// instead of allocating one per node (the comparison does not allocate).
	var r string
	if string(reason) == c.lastReason {
		r = c.lastReason
	} else {
		r = SafeString(reason)
		c.lastReason = r
	}
	if !ValidCode(code) {
		r = invalidCode(code, r)
		code = abi.CodeError
	}
	if c.Results != nil {
		if c.Cur >= 0 && c.Cur < len(c.Results) {
			c.Results[c.Cur] = Result{Code: code, Reason: r}
		} else {
			for i := range c.Results {
				c.Results[i] = Result{Code: code, Reason: r}
			}
		}
		return
	}
	c.Code = code
	c.Reason = r
}

// invalidCode is the reason of an unknown status code: the policy's error,
// never a verdict.
func invalidCode(code int32, reason string) string {
	return fmt.Sprintf("invalid status code %d (valid: 0 Success, 1 Error, 2 Unschedulable, 3 UnschedulableAndUnresolvable, 4 Wait (in permit), 5 Skip); reason %q", code, reason)
}

// ValidCode reports whether c is a status code of the ABI.
func ValidCode(c int32) bool {
	switch c {
	case abi.CodeSuccess, abi.CodeError, abi.CodeUnschedulable, abi.CodeUnschedulableAndUnresolvable, abi.CodeWait, abi.CodeSkip:
		return true
	}
	return false
}

// selectNode makes node i of the batch current and, in a filter or score
// batch, gives it a fresh deadline.
func (c *Call) selectNode(i int32) bool {
	if c.Batch == nil || i < 0 || int(i) >= len(c.Batch) {
		return false
	}
	c.Cur = int(i)
	c.Node = c.Batch[i]
	if c.Results == nil {
		return true // normalize_score: node data only; the call keeps its deadline
	}
	if c.Results[i].Code == CodeUnselected {
		c.Results[i] = Result{} // selected and not rejected: Success
	}
	c.Unkeyable = true
	c.Runtime.NodeStarted()
	return true
}

// NodeModel is the current node's model with part converted. A part that
// costs only copies (kubemodel.Cheap: the name and scalars, the label and
// annotation maps) is converted into the call's own model on each read,
// which is cheaper than finding the node's cache entry; the others come
// from the entry, converted once per NodeInfo generation and looked up
// once per node a call reads.
func (c *Call) NodeModel(part kubemodel.NodePart) *model.Node {
	if kubemodel.Cheap(part) {
		kubemodel.FillNode(&c.nodeScratch, c.Node, part)
		return &c.nodeScratch
	}
	if c.nodeEnt == nil || c.nodeEntFor != c.Node || c.nodeEnt.gen != Generation(c.Node) {
		c.nodeEnt, c.nodeEntFor = c.Caches.nodes.entry(c.Node), c.Node
	}
	return c.nodeEnt.model(c.Node, part)
}

// cluster is the cycle's cluster view, nil outside a scheduling cycle.
// prebind and postbind run in the binding goroutine, after the cycle,
// while the next cycle updates the snapshot's NodeInfos the view holds in
// place, and unreserve may: they read no cluster.
func (c *Call) cluster() *ClusterView {
	if c.Pod == nil || c.Kind == abi.PreBind || c.Kind == abi.PostBind || c.Kind == abi.Unreserve {
		return nil
	}
	c.VariesByPod = true
	return c.Pod.Cluster
}

// Caches are what an engine's policies read, cached for all of them for as
// long as the engine lives: node models and lists by name and NodeInfo
// generation (nodeCache says why per engine), the strings node tables
// intern, and the table layouts their instances declared.
type Caches struct {
	nodes   *nodeCache
	strs    *interner
	layouts *layoutSet
}

// NewCaches returns an engine's empty caches.
func NewCaches() *Caches {
	return &Caches{nodes: newNodeCache(), strs: newInterner(), layouts: &layoutSet{m: map[string]*tableLayout{}}}
}

// Epoch is the interner's current epoch.
func (c *Caches) Epoch() uint32 { return c.strs.current() }
