package abi

// Point identifies an extension point: an entry point of the guest that the
// host calls during a scheduling cycle. Its value is its row in Points and
// the position of its bit in the capabilities bit set, so the host's call
// kinds, export checks, capability handling and metric series, the SDK's
// capabilities and the tables of docs/abi.md are all derived from Points.
//
// To add an extension point, follow docs/contributing.md: add a constant
// here (before NumPoints), its row in Points, the host's call site and the
// SDK's registration, then run `make generate`. TestPointsTable (here),
// the host's TestCallKindsCoverPoints and the SDK's TestCapabilitiesCoverPoints
// fail until every derived place knows the new point.
type Point int32

// The extension points, in the order of a scheduling cycle, then the batch
// forms. The numbering is part of ABI v1 (it fixes the capability bits):
// append, never reorder.
const (
	PreFilter Point = iota
	Filter
	PreScore
	Score
	NormalizeScore
	FilterNodes
	ScoreNodes
	// PreEnqueue and PreBind (ABI v3) sit outside the scheduling cycle:
	// before the pod enters the queue, and after the cycle chose its node.
	PreEnqueue
	PreBind
	// PostFilter and PostBind (ABI v4) follow a cycle's outcome: no node
	// fit, or the pod was bound.
	PostFilter
	PostBind
	// Reserve and Unreserve (ABI v4) bracket a placement: counts a policy
	// takes for the pod when it gets a node, given back if it is undone.
	Reserve
	Unreserve
	// Permit (ABI v4) lets a reserved pod be bound, refuses it, or makes it
	// wait until the policy allows it (a gang, a quota).
	Permit
	// NumPoints is the number of extension points; arrays indexed by Point
	// are sized with it.
	NumPoints
)

// ValType is a wasm value type in an ABI signature.
type ValType byte

// The value types the ABI uses, with their wasm binary encoding.
const (
	I32 ValType = 0x7f
	I64 ValType = 0x7e
)

// String returns the type as the wasm text format spells it.
func (t ValType) String() string {
	if t == I64 {
		return "i64"
	}
	return "i32"
}

// Param is one named parameter of an ABI function, for signatures in docs
// and errors.
type Param struct {
	Name string
	Type ValType
}

// ExtensionPoint describes one guest export the host calls.
type ExtensionPoint struct {
	// Name is the extension point as kube-scheduler names it; a batch form
	// carries the name of the point it batches, so its calls count in the
	// same metric series.
	Name string
	// Export is the guest's export name.
	Export string
	// Params and Results are the export's wasm signature.
	Params  []Param
	Results []ValType
	// NodeData is true when the node_* host functions answer during the call
	// (otherwise they return NotAvailable).
	NodeData bool
	// Batch is the batch form of this point (BatchNone if there is none);
	// BatchOf, on a batch form, is the point it evaluates for many nodes.
	Batch, BatchOf Point
	// Called says when the host calls the export, for docs/abi.md.
	Called string
	// OnSkip and OnReject are what a status of Skip (5) and of
	// Unschedulable (2) or UnschedulableAndUnresolvable (3) mean at this
	// point; Success passes everywhere and Error (1), or any other code,
	// is the policy's error. The plugin reads every result through them,
	// and docs/abi.md's result table is generated from them.
	OnSkip, OnReject Meaning
	// OnWait is what CodeWait means: Waits at Permit, Invalid elsewhere.
	OnWait Meaning
	// Rejection says what a rejection does at this point, for docs/abi.md.
	Rejection string
	// Informational is true at a point whose status changes nothing: a
	// rejection or an error there is only logged (PostBind).
	Informational bool
	// JudgesNodes is true when the point's verdict is about one node for
	// the pod (Filter, Score and their batch forms): the host may remember
	// it for nodes whose rows read the same (§3.4).
	JudgesNodes bool
	// KeepsState is true at a point only a policy that declares
	// CapKeepsState may export: the host refuses the module otherwise.
	KeepsState bool
	// Entry is true when exporting this point makes a module a policy:
	// the host refuses a module that exports no entry point.
	Entry bool
	// ExtenderVerb is the kube-scheduler HTTP extender verb that reaches
	// this point ("filter" or "prioritize"); "" when the extender protocol
	// has none, and Without then says what a pod misses when the point is
	// never called (the extender's warning at load).
	ExtenderVerb, Without string
}

// Meaning is what a guest status code means at an extension point.
type Meaning uint8

// The meanings a status code can have.
const (
	// Invalid: the code is the policy's error here (its failurePolicy applies).
	Invalid Meaning = iota
	// Passes: the pod (on this node) passes; the next policy is asked.
	Passes
	// Skips: the policy sits out the point that follows (its filter after
	// prefilter, its score after prescore) for this pod.
	Skips
	// Rejects: the code stands: Unschedulable lets preemption try,
	// UnschedulableAndUnresolvable does not.
	Rejects
	// RejectsUnresolvable: either rejecting code is read as
	// UnschedulableAndUnresolvable: no node, and no preemption, can help.
	RejectsUnresolvable
	// Informs: either rejecting code adds its reason to the pod's message
	// and changes nothing else (PostFilter: no node fit already).
	Informs
	// Waits: the pod waits at Permit, for at most the call's result in
	// milliseconds, until the policy allows or rejects it.
	Waits
)

// Read is what status code means at point p.
func (p Point) Read(code int32) Meaning {
	if p < 0 || p >= NumPoints {
		return Invalid
	}
	switch code {
	case CodeSuccess:
		return Passes
	case CodeSkip:
		return Points[p].OnSkip
	case CodeUnschedulable, CodeUnschedulableAndUnresolvable:
		return Points[p].OnReject
	case CodeWait:
		return Points[p].OnWait
	}
	return Invalid
}

// BatchNone marks an ExtensionPoint without a batch form (Batch) or one that
// is not a batch form itself (BatchOf).
const BatchNone Point = -1

var cycleParam = Param{"cycle", I64}

// Points is the table of extension points, indexed by Point.
var Points = [NumPoints]ExtensionPoint{
	PreFilter: {Name: "PreFilter", Export: ExportPreFilter, Params: []Param{cycleParam},
		Batch: BatchNone, BatchOf: BatchNone, Called: "once per cycle, before any `filter`",
		OnSkip: Skips, OnReject: RejectsUnresolvable, Rejection: "the pod is rejected on every node", ExtenderVerb: "filter"},
	Filter: {Name: "Filter", Export: ExportFilter, Params: []Param{cycleParam}, NodeData: true,
		Batch: FilterNodes, BatchOf: BatchNone, Called: "once per (pod, node), in parallel on different instances",
		OnSkip: Passes, OnReject: Rejects, Rejection: "the node is rejected", JudgesNodes: true, Entry: true, ExtenderVerb: "filter"},
	PreScore: {Name: "PreScore", Export: ExportPreScore, Params: []Param{cycleParam},
		Batch: BatchNone, BatchOf: BatchNone, Called: "once per cycle, before any `score`",
		OnSkip: Skips, OnReject: Invalid, ExtenderVerb: "prioritize"},
	Score: {Name: "Score", Export: ExportScore, Params: []Param{cycleParam}, Results: []ValType{I64}, NodeData: true,
		Batch: ScoreNodes, BatchOf: BatchNone, Called: "once per (pod, feasible node), in parallel; returns the raw score",
		OnSkip: Invalid, OnReject: Invalid, JudgesNodes: true, Entry: true, ExtenderVerb: "prioritize"},
	NormalizeScore: {Name: "NormalizeScore", Export: ExportNormalizeScore, Params: []Param{cycleParam, {"n", I32}},
		Batch: BatchNone, BatchOf: BatchNone, Called: "once per cycle, after every `score`, with the `n` raw scores (§4.5); `select_node(i)` makes the node of score `i` current",
		OnSkip: Invalid, OnReject: Invalid, ExtenderVerb: "prioritize"},
	FilterNodes: {Name: "Filter", Export: ExportFilterNodes, Params: []Param{cycleParam, {"n", I32}}, NodeData: true,
		Batch: BatchNone, BatchOf: Filter, Called: "instead of `n` calls of `filter` (§3.1)",
		OnSkip: Passes, OnReject: Rejects, Rejection: "the node is rejected", JudgesNodes: true, ExtenderVerb: "filter"},
	ScoreNodes: {Name: "Score", Export: ExportScoreNodes, Params: []Param{cycleParam, {"n", I32}}, NodeData: true,
		Batch: BatchNone, BatchOf: Score, Called: "instead of `n` calls of `score`; reports the scores with `scores_set` (§3.1)",
		OnSkip: Invalid, OnReject: Invalid, JudgesNodes: true, ExtenderVerb: "prioritize"},
	PreEnqueue: {Name: "PreEnqueue", Export: ExportPreEnqueue, Params: []Param{cycleParam},
		Batch: BatchNone, BatchOf: BatchNone, Called: "ABI v3: before the pod enters the scheduling queue, each time it would (§3.3): pod data only, a new `cycle` every call; a rejection gates the pod, `recheck_on` says when to check it again",
		OnSkip: Passes, OnReject: RejectsUnresolvable, Rejection: "the pod is gated: it stays out of the scheduling queue",
		Entry: true, Without: "pods are never gated"},
	PreBind: {Name: "PreBind", Export: ExportPreBind, Params: []Param{cycleParam}, NodeData: true,
		Batch: BatchNone, BatchOf: BatchNone, Called: "ABI v3: once per pod about to be bound, with the chosen node current and the `cycle` of the scheduling cycle that chose it (§3.3); `patch_label` and `patch_annotation` record changes to the pod",
		OnSkip: Passes, OnReject: RejectsUnresolvable, Rejection: "the pod is not bound to the node; it waits for a cluster event or a new module",
		Entry: true, Without: "pods are never patched"},
	PostFilter: {Name: "PostFilter", Export: ExportPostFilter, Params: []Param{cycleParam},
		Batch: BatchNone, BatchOf: BatchNone, Called: "ABI v4: once per cycle in which no node fit the pod and preemption found none either, after every `filter` (§3.5); not for a member of a pod group, whose cycles kube-scheduler runs without a pod's PostFilter",
		OnSkip: Passes, OnReject: Informs, Rejection: "its reason is added to the pod's unschedulable message (the pod stays Unschedulable); no node is nominated and no pod evicted",
		Without: "no message of the policy's own is added when no node fits"},
	PostBind: {Name: "PostBind", Export: ExportPostBind, Params: []Param{cycleParam}, NodeData: true,
		Batch: BatchNone, BatchOf: BatchNone, Called: "ABI v4: once per pod bound, after the binding, with its node current and the `cycle` of the scheduling cycle that chose it (§3.5); informational: its status is only logged",
		OnSkip: Passes, OnReject: Invalid, Informational: true, Without: "bindings are never reported to the policy"},
	Reserve: {Name: "Reserve", Export: ExportReserve, Params: []Param{cycleParam}, NodeData: true,
		Batch: BatchNone, BatchOf: BatchNone, Called: "ABI v4: once per pod given a node, before it is bound, with the node current (§3.6); `counter_add` takes counts for the pod. Also for each trial placement of a pod-group cycle, which Unreserve then undoes",
		OnSkip: Passes, OnReject: Rejects, Rejection: "the pod is not placed: every policy's reservation is undone (Unreserve) and the pod is tried again later",
		KeepsState: true, Entry: true, Without: "no counts are taken as pods are placed"},
	Unreserve: {Name: "Unreserve", Export: ExportUnreserve, Params: []Param{cycleParam}, NodeData: true,
		Batch: BatchNone, BatchOf: BatchNone, Called: "ABI v4: when a pod's reserved placement is undone (a later Reserve or Permit refused it, binding failed, or a pod-group trial is reverted), after the host gave back every count the pod holds at this policy (§3.6); informational: its status is only logged",
		OnSkip: Passes, OnReject: Invalid, Informational: true, KeepsState: true, Without: "undone placements are never reported to the policy (its counts are given back all the same)"},
	Permit: {Name: "Permit", Export: ExportPermit, Params: []Param{cycleParam}, Results: []ValType{I64}, NodeData: true,
		Batch: BatchNone, BatchOf: BatchNone, Called: "ABI v4: once per reserved pod, after every `reserve`, with the node current (§3.7); status Wait (4) makes the pod wait for at most the returned milliseconds, until this policy allows it (`permit_allow`, from another pod's call); `permit_waiting` lists the pods waiting at this policy",
		OnSkip: Passes, OnReject: Rejects, OnWait: Waits, Rejection: "the pod is not bound: its placement is undone (Unreserve) and the pod is tried again later",
		Entry: true, Without: "pods never wait for the policy before they are bound"},
}

// Cap is the point's bit in the capabilities bit set.
func (p Point) Cap() int32 { return 1 << p }

// String returns the point's name as kube-scheduler spells it (a batch
// form reads as the point it batches), as logs and metric labels show it.
func (p Point) String() string {
	if p < 0 || p >= NumPoints {
		return "unknown"
	}
	return Points[p].Name
}

// Capability bits returned by the capabilities export, one per Point.
const (
	CapPreFilter      int32 = 1 << PreFilter
	CapFilter         int32 = 1 << Filter
	CapPreScore       int32 = 1 << PreScore
	CapScore          int32 = 1 << Score
	CapNormalizeScore int32 = 1 << NormalizeScore
	CapFilterNodes    int32 = 1 << FilterNodes
	CapScoreNodes     int32 = 1 << ScoreNodes
	CapPreEnqueue     int32 = 1 << PreEnqueue
	CapPreBind        int32 = 1 << PreBind
	CapPostFilter     int32 = 1 << PostFilter
	CapPostBind       int32 = 1 << PostBind
	CapReserve        int32 = 1 << Reserve
	CapUnreserve      int32 = 1 << Unreserve
	CapPermit         int32 = 1 << Permit

	// CapKeepsState is not a point: a guest sets it when its verdicts
	// depend on state it keeps across calls, so that the host never gives
	// one node's verdict to another with the same row (§3.4).
	CapKeepsState int32 = 1 << 30
)

// Signature formats a function type as docs/abi.md and load errors write
// it: "(cycle i64, n i32) -> i64".
func Signature(params []Param, results []ValType) string {
	s := "("
	for i, p := range params {
		if i > 0 {
			s += ", "
		}
		if p.Name != "" {
			s += p.Name + " "
		}
		s += p.Type.String()
	}
	s += ") -> "
	switch len(results) {
	case 0:
		s += "()"
	case 1:
		s += results[0].String()
	default:
		s += "("
		for i, r := range results {
			if i > 0 {
				s += ", "
			}
			s += r.String()
		}
		s += ")"
	}
	return s
}
