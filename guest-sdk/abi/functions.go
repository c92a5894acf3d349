package abi

// Section groups host functions in docs/abi.md §4.
type Section int

// The sections of docs/abi.md §4, in order.
const (
	SectionResults Section = iota
	SectionPod
	SectionNode
	SectionBatch
	SectionCycleState
	SectionScores
	SectionCluster
	SectionGates
	SectionCounters
	SectionPermit
	SectionObjects
)

// SectionTitles are the headings of the sections in docs/abi.md.
var SectionTitles = map[Section]string{
	SectionResults:    "4.1 Results and logging",
	SectionPod:        "4.2 The pod",
	SectionNode:       "4.3 The node (in `filter`, `score`, and their batch forms after `select_node`)",
	SectionBatch:      "4.3.1 Batches",
	SectionCycleState: "4.4 Cycle state",
	SectionScores:     "4.5 Scores (in `normalize_score` and `score_nodes`)",
	SectionCluster:    "4.6 The cluster (wherever the pod is; declared with `reads: [Cluster]` or `[Namespaces]`)",
	SectionGates:      "4.7 Gates and patches (ABI v3: in `preenqueue` and `prebind`)",
	SectionCounters:   "4.8 Counters (ABI v4: policies that declare KeepsState)",
	SectionPermit:     "4.9 Waiting pods (ABI v4: in `permit`, `postfilter` and `unreserve`)",
	SectionObjects:    "4.10 Granted objects (wherever the pod is; declared with `objects`)",
}

// HostFunction describes one function of module HostModule.
type HostFunction struct {
	Name    string
	Section Section
	Params  []Param
	Results []ValType
	// Doc is the function's row in docs/abi.md (markdown). For a function
	// whose first parameter numbers fields or kinds, the docs add what each
	// number reads from the fields table (package fields), so the numbers
	// are never written twice.
	Doc string
}

var (
	keyParams = []Param{{"key_ptr", I32}, {"key_len", I32}, {"buf", I32}, {"cap", I32}}
	bufParams = []Param{{"buf", I32}, {"cap", I32}}
	i32Result = []ValType{I32}
)

// HostFunctions is the table of host functions. The host implements exactly
// these, with exactly these signatures (its TestHostFunctionsMatchTable
// fails otherwise); a module that imports anything else from HostModule is
// refused at load. To add one, follow docs/contributing.md.
var HostFunctions = []HostFunction{
	{FnSetStatus, SectionResults, []Param{{"code", I32}, {"reason_ptr", I32}, {"reason_len", I32}}, nil,
		"sets the call's status (§3). An out-of-range reason becomes `(reason pointer out of range)`"},
	{FnLog, SectionResults, []Param{{"level", I32}, {"list_ptr", I32}, {"list_len", I32}}, nil,
		"a structured log line at klog verbosity `level`; the payload is a string list (§5): message, then key, value, key, value… Dropped unless the scheduler runs with `-v=level` or more; at most 16 KiB"},
	{FnConfig, SectionResults, bufParams, i32Result,
		"the policy's `config` string from its args. It does not change during the life of a loaded policy (a new config is a new load, with new instances), so a guest may parse it once and keep the result"},

	{FnPreFilterNodes, SectionResults, []Param{{"list_ptr", I32}, {"list_len", I32}}, i32Result,
		"in `prefilter`: the pod may run only on the nodes named in the string list (§5), as an in-tree PreFilter's `PreFilterResult`; the scheduler then filters only those (with several policies, their lists intersect). 0; -2 for a malformed list; -3 outside `prefilter`. The last call wins"},

	{FnPodString, SectionPod, append([]Param{{"field", I32}}, bufParams...), i32Result,
		"one string of the pod"},
	{FnPodLabel, SectionPod, keyParams, i32Result, "one label, -1 if unset"},
	{FnPodAnnotation, SectionPod, keyParams, i32Result, "one annotation, -1 if unset"},
	{FnPodList, SectionPod, append([]Param{{"kind", I32}}, bufParams...), i32Result,
		"a string list (§5)"},
	{FnPodRequest, SectionPod, []Param{{"name_ptr", I32}, {"name_len", I32}}, []ValType{I64},
		"the pod's effective request of one resource as the scheduler computes it (containers, init containers, overhead); 0 if not requested"},
	{FnPodPriority, SectionPod, nil, []ValType{I64}, "spec.priority, 0 if unset"},
	{FnPodObject, SectionPod, append([]Param{{"format", I32}}, bufParams...), i32Result,
		"the whole pod, for a field no other function reads; encoded at most once per cycle"},

	{FnNodeString, SectionNode, append([]Param{{"field", I32}}, bufParams...), i32Result, "one string of the node"},
	{FnNodeLabel, SectionNode, keyParams, i32Result, "one label, -1 if unset"},
	{FnNodeAnnotation, SectionNode, keyParams, i32Result, "one annotation, -1 if unset"},
	{FnNodeTaint, SectionNode, keyParams, i32Result,
		"the taints with that key, as a string list (§5) of (value, effect) pairs (a key may carry several effects); -1 if the node has no taint with that key"},
	{FnNodeList, SectionNode, append([]Param{{"kind", I32}}, bufParams...), i32Result,
		"a string list (§5)"},
	{FnNodeResource, SectionNode, []Param{{"kind", I32}, {"name_ptr", I32}, {"name_len", I32}}, []ValType{I64},
		"one resource of the node in the units below"},
	{FnNodePodCount, SectionNode, nil, i32Result, "pods on the node"},
	{FnNodeUnschedulable, SectionNode, nil, i32Result, "1 if cordoned"},
	{FnNodeObject, SectionNode, append([]Param{{"format", I32}}, bufParams...), i32Result,
		"the whole node; encoded at most once per node generation"},

	{FnSelectNode, SectionBatch, []Param{{"i", I32}}, i32Result,
		"in `filter_nodes`/`score_nodes`: make node `i` of the batch current and start its deadline; in `normalize_score`: make the node of score `i` current (the call keeps its deadline); 0, or -2 if `i` is out of range or elsewhere"},

	{FnNodeTable, SectionBatch, []Param{{"cols_ptr", I32}, {"cols_len", I32}, {"table_ptr", I32}, {"max_rows", I32}}, i32Result,
		"ABI v2: declares this instance's node table (§3.2): the columns, a string list (§5) of column names, and `max_rows` rows at `table_ptr`, which the guest keeps for the host to write. Returns the row size in bytes; -2 for a malformed list, an unknown column, more than 64 columns, `max_rows` outside 1..1024, or a table outside memory. `cols_len` 0 removes the table. Takes effect at the next batch call"},
	{FnReasonRegister, SectionBatch, []Param{{"ptr", I32}, {"len", I32}}, i32Result,
		"ABI v2: registers a reason for this instance and returns its id (≥ 1), the same id for the same bytes, for a table row's reason (§3.2). Cut at 1024 bytes like `set_status`'s; -2 for bad arguments or past 4096 distinct reasons"},
	{FnInternString, SectionBatch, []Param{{"epoch", I32}, {"id", I32}, {"buf", I32}, {"cap", I32}}, i32Result,
		"ABI v2: the string with id `id` in epoch `epoch` (the table header's); -1 if the id is unknown or the epoch no longer answers. Ids are the same for every instance and policy of the scheduler: equal strings have equal ids within an epoch"},
	{FnPodLabelID, SectionBatch, []Param{{"key_ptr", I32}, {"key_len", I32}}, i32Result,
		"ABI v2: the string id (in the current epoch) of the pod's label `key`, comparable with a table's `label:` columns; 0 if the pod has no such label"},

	{FnCycleStateSet, SectionCycleState, []Param{{"ptr", I32}, {"len", I32}}, nil,
		"stores bytes for this policy and cycle (at most 1 MiB). Meant for `prefilter`/`prescore`"},
	{FnCycleStateGet, SectionCycleState, bufParams, i32Result,
		"reads them back in any later call of the cycle, on any instance; -1 if none"},

	{FnScoresGet, SectionScores, []Param{{"buf", I32}, {"n", I32}}, i32Result,
		"writes up to `n` raw scores as little-endian i64 at `buf`; returns the total count"},
	{FnScoresSet, SectionScores, []Param{{"buf", I32}, {"n", I32}}, i32Result,
		"replaces the scores with the `n` i64 at `buf`; `n` must equal the count, else -2. Also used by `score_nodes` to report its batch"},

	{FnClusterNodes, SectionCluster, nil, i32Result,
		"how many nodes the scheduler's snapshot of this cycle holds (every node, not only those the pod may run on); nodes are numbered 0..n-1, in the same order for the whole cycle"},
	{FnClusterNode, SectionCluster, append([]Param{{"i", I32}, {"kind", I32}}, bufParams...), i32Result,
		"one field of node `i` of the snapshot; -2 if `i` is out of range"},
	{FnCountPods, SectionCluster, []Param{{"term_ptr", I32}, {"term_len", I32}, {"buf", I32}, {"cap", I32}}, i32Result,
		"the pods matching a term, per topology value, as a string list of (value, decimal count) pairs sorted by value; the term is a PodAffinityTerm in JSON, with upstream's namespace rules and extensions (§4.6.1): which pods also count (alsoMatching, includeTerminating) and which nodes (nodeKeys, nodeAffinityPolicy, nodeTaintsPolicy). Every value of a node that counts and holds the topology key is listed, with 0 when no pod matches. Computed by the host once per cycle per distinct term; -2 for a malformed term"},
	{FnExistingTerms, SectionCluster, append([]Param{{"kind", I32}}, bufParams...), i32Result,
		"the terms of one kind of the pods on the snapshot's nodes that the pod being scheduled matches, summed per topology pair, as a string list of (topologyKey, value, decimal sum) records sorted by key and value (§4.6.2); only pairs with a match are listed. Computed by the host once per cycle per kind; -2 for an unknown kind"},
	{FnNamespaceLabels, SectionCluster, []Param{{"name_ptr", I32}, {"name_len", I32}, {"buf", I32}, {"cap", I32}}, i32Result,
		"the labels of the namespace named at `name_ptr`, as (key, value) pairs; -1 if there is no such namespace"},
	{FnVolumeClaims, SectionCluster, append([]Param{{"kind", I32}}, bufParams...), i32Result,
		"the pod's persistentVolumeClaim volumes as the scheduler's listers hold them (§4.6.3): kind 0 the claims (with their phase, bound volume and storage class), 1 the bound volumes' labels, 2 their node affinity, 3 the classes' allowed topologies; computed by the host once per cycle per kind; -2 for an unknown kind"},
	{FnResourceClaims, SectionCluster, append([]Param{{"kind", I32}}, bufParams...), i32Result,
		"the pod's Dynamic Resource Allocation claims as the DynamicResources plugin sees them (§4.6.5): kind 0 the requests of each claim (class, count, whether the claim is allocated), 1 per node the devices of each requested class its ResourceSlices hold, total and free (allocations in flight count as taken); computed by the host once per cycle per kind; -2 for an unknown kind"},

	{FnRecheckOn, SectionGates, []Param{{"events", I32}, {"after_ms", I32}}, i32Result,
		"in `preenqueue`, when the call gates the pod: check it again when one of `events` happens (a bit set, §3.3) or, with `after_ms` > 0, after that many milliseconds (clamped to 1000..3600000). Without a call the pod is checked again when its own labels or annotations change. 0; -2 for an unknown event bit; -3 outside `preenqueue`. The last call wins"},
	{FnPatchLabel, SectionGates, []Param{{"key_ptr", I32}, {"key_len", I32}, {"value_ptr", I32}, {"value_len", I32}}, i32Result,
		"in `prebind`: set the pod's label `key` to the value; the host applies the changes of every policy in one patch before the pod is bound. 0; -2 for memory out of range or a key or value Kubernetes refuses; -3 outside `prebind`; -5 for a key under none of the policy's `patchPrefixes`; -6 past 64 keys or 16 KiB per policy and pod. Setting a key again replaces its value"},
	{FnPatchAnnotation, SectionGates, []Param{{"key_ptr", I32}, {"key_len", I32}, {"value_ptr", I32}, {"value_len", I32}}, i32Result,
		"in `prebind`: set the pod's annotation `key`, as `patch_label` does (any value)"},
	{FnCyclePolicies, SectionGates, bufParams, i32Result,
		"in `prebind`: the policies of the scheduling cycle that placed the pod, as records of 3 strings: name, the sha256 of the module version the cycle ran, mode (`Enforce` or `Audit`); -3 elsewhere"},

	{FnCounterAdd, SectionCounters, []Param{{"key_ptr", I32}, {"key_len", I32}, {"n", I64}}, []ValType{I64},
		"in `reserve`: takes `n` (1..2^53) of the count `key` (1..253 bytes) for the pod being placed and returns the key's new count. The pod holds what it took until its placement is undone or it is deleted or finishes (§3.6). -2 for a bad key or `n`; -3 outside `reserve`; -4 for a policy that does not declare KeepsState; -6 past 2^53, 64 takes for one pod, or a new key past 1024 opened by the pod's namespace or 16384 in all"},
	{FnCounterGet, SectionCounters, []Param{{"key_ptr", I32}, {"key_len", I32}}, []ValType{I64},
		"the count `key`: what the pods holding it took, 0 if none; wherever there is a pod. -2 for a bad key; -3 in `_initialize`; -4 for a policy that does not declare KeepsState"},
	{FnPermitWaiting, SectionPermit, []Param{{"sel_ptr", I32}, {"sel_len", I32}, {"buf", I32}, {"cap", I32}}, i32Result,
		"the pods waiting at this policy (its `permit` returned Wait and it has not allowed them) whose labels match the label selector at `sel_ptr` (kubectl's syntax, `gang=a,tier!=x`; empty: all), as records of 4 strings: UID, namespace, name, node (§3.7), ordered by namespace and name. -2 for a selector that does not parse or is longer than 4096 bytes; -3 outside `permit`, `postfilter` and `unreserve`"},
	{FnPermitAllow, SectionPermit, []Param{{"uid_ptr", I32}, {"uid_len", I32}}, i32Result,
		"allows the waiting pod with that UID on this policy's behalf: once every policy that made it wait allowed it, it goes on to be bound. 0; -1 if the pod is not waiting at this policy (the host logs the policy, the point and the fix); -2 for a UID outside memory or longer than 128 bytes; -3 outside `permit`, `postfilter` and `unreserve`"},
	{FnPermitReject, SectionPermit, []Param{{"uid_ptr", I32}, {"uid_len", I32}, {"msg_ptr", I32}, {"msg_len", I32}}, i32Result,
		"rejects the waiting pod with that UID: its placement is undone and the message (at most 1024 bytes) is in its `PodScheduled` condition as `WasmPolicy/<policy>: <message>`. 0; -1 if the pod is not waiting at this policy; -2 for a UID outside memory or longer than 128 bytes; -3 outside `permit`, `postfilter` and `unreserve`"},

	{FnObjectGet, SectionObjects, []Param{{"read", I32}, {"ns_ptr", I32}, {"ns_len", I32}, {"name_ptr", I32}, {"name_len", I32}, {"buf", I32}, {"cap", I32}}, i32Result,
		"the object named in namespace `ns` (empty for a cluster-scoped kind) of the kind the policy declared at `objects[read]`, as a string list (§5) of its declared fields in their order (a scalar as text, anything else as compact JSON, \"\" when absent), from the scheduler's watch of the kind. -1 if there is no such object, or it is in a namespace the policy may not read; -2 for a namespace or name outside memory, longer than 253 bytes or holding `/`, or an answer longer than 1 MiB; -3 in `_initialize`; -4 for a `read` the policy did not declare (or whose kind this host does not watch)"},
	{FnObjectList, SectionObjects, []Param{{"read", I32}, {"ns_ptr", I32}, {"ns_len", I32}, {"sel_ptr", I32}, {"sel_len", I32}, {"buf", I32}, {"cap", I32}}, i32Result,
		"the objects of the kind declared at `objects[read]` in namespace `ns` (empty: every namespace the policy may read) whose labels match the label selector at `sel_ptr` (kubectl's syntax; empty: all), as a string list (§5) of n, the number of declared fields (decimal), then records of 2 + n strings: namespace, name and the fields, ordered by namespace and name. -2 for a namespace with `/` or longer than 253 bytes, a selector that does not parse or is longer than 4096 bytes, more than 4096 objects, or an answer longer than 1 MiB; -3 in `_initialize`; -4 for a `read` the policy did not declare (or whose kind this host does not watch)"},
}
