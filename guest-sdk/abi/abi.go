// Package abi holds the names and numbers of the wasmsched guest ABI, version 4.
//
// It is the single source of truth shared by the host (which imports it from the
// main module) and the guest SDK, so the two can never disagree about a function
// name or a field number. docs/abi.md describes the same contract for authors of
// guests in other languages. The package has no dependencies and compiles for
// every target, wasm included.
package abi

// Version is the ABI version this package describes. A guest reports the
// version it was built for from the AbiVersion export; the host accepts
// MinVersion to Version and refuses any other. Version 2 adds node tables
// (table.go), version 3 PreEnqueue gates and PreBind patches (gates.go),
// version 4 the points after a cycle's outcome (PostFilter, PostBind),
// around a placement (Reserve, Unreserve) with host-kept counters
// (counters.go), and Permit with waiting pods (permit.go); a guest of an older version never uses them and runs as
// it always did.
const Version = 4

// MinVersion is the oldest ABI version the host still runs.
const MinVersion = 1

// HostModule is the import module name of the host functions.
const HostModule = "wasmsched"

// Guest exports.
const (
	// ExportAbiVersion is `abi_version() -> i32`, required.
	ExportAbiVersion = "abi_version"
	// ExportCapabilities is `capabilities() -> i32`, optional: a bit set of
	// the extension points the policy implements (CapPreFilter...). Without
	// it, every present export counts as implemented.
	ExportCapabilities = "capabilities"
	// ExportPreFilter is `prefilter(cycle i64)`, optional, once per scheduling cycle.
	ExportPreFilter = "prefilter"
	// ExportFilter is `filter(cycle i64)`, once per (pod, node).
	ExportFilter = "filter"
	// ExportPreScore is `prescore(cycle i64)`, optional, once per scheduling cycle.
	ExportPreScore = "prescore"
	// ExportScore is `score(cycle i64) -> i64`, once per (pod, feasible node).
	ExportScore = "score"
	// ExportFilterNodes is `filter_nodes(cycle i64, n i32)`, optional: Filter
	// for n nodes in one call; the guest calls select_node(i) before each.
	ExportFilterNodes = "filter_nodes"
	// ExportScoreNodes is `score_nodes(cycle i64, n i32)`, optional: Score for
	// n nodes in one call; the guest reports the n scores with scores_set.
	ExportScoreNodes = "score_nodes"
	// ExportNormalizeScore is `normalize_score(cycle i64, n i32)`, optional.
	ExportNormalizeScore = "normalize_score"
	// ExportPostFilter is `postfilter(cycle i64)`, optional (ABI v4): once
	// per cycle in which no node fit.
	ExportPostFilter = "postfilter"
	// ExportPostBind is `postbind(cycle i64)`, optional (ABI v4): once per
	// pod bound.
	ExportPostBind = "postbind"
	// ExportReserve is `reserve(cycle i64)`, optional (ABI v4): once per
	// pod given a node, before it is bound; counts taken with counter_add.
	ExportReserve = "reserve"
	// ExportPermit is `permit(cycle i64) -> i64`, optional (ABI v4): once
	// per reserved pod; with status Wait, the result is the longest the
	// pod waits, in milliseconds.
	ExportPermit = "permit"
	// ExportUnreserve is `unreserve(cycle i64)`, optional (ABI v4): when a
	// reserved placement is undone, after the host gave back its counts.
	ExportUnreserve = "unreserve"
	// ExportInitialize is the reactor initializer that compilers emit for
	// -buildmode=c-shared; the host calls it once per instance.
	ExportInitialize = "_initialize"
	// ExportStart is the command entry point; the host calls it once per
	// instance when there is no _initialize, and it must return normally.
	ExportStart = "_start"
)

// Status codes, equal to the kube-scheduler framework's codes.
const (
	CodeSuccess                      int32 = 0
	CodeError                        int32 = 1
	CodeUnschedulable                int32 = 2
	CodeUnschedulableAndUnresolvable int32 = 3
	// CodeWait is Permit's alone (ABI v4): the pod waits, for at most the
	// milliseconds permit returns, until the policy allows it.
	CodeWait int32 = 4
	CodeSkip int32 = 5
)

// Host functions, all in module HostModule. Pointers and lengths are i32
// offsets into the guest's exported "memory".
const (
	// FnSetStatus is `set_status(code i32, reason_ptr i32, reason_len i32)`.
	FnSetStatus = "set_status"
	// FnConfig is `config(buf i32, cap i32) -> i32`.
	FnConfig = "config"
	// FnLog is `log(level i32, list_ptr i32, list_len i32)`; the payload is a
	// string list: message, then key/value pairs.
	FnLog = "log"
	// FnPodString is `pod_string(field i32, buf i32, cap i32) -> i32`.
	FnPodString = "pod_string"
	// FnPodLabel is `pod_label(key_ptr, key_len, buf, cap) -> i32`.
	FnPodLabel = "pod_label"
	// FnPodAnnotation is `pod_annotation(key_ptr, key_len, buf, cap) -> i32`.
	FnPodAnnotation = "pod_annotation"
	// FnPodList is `pod_list(kind i32, buf i32, cap i32) -> i32`.
	FnPodList = "pod_list"
	// FnPodRequest is `pod_request(name_ptr, name_len) -> i64`.
	FnPodRequest = "pod_request"
	// FnPodPriority is `pod_priority() -> i64`.
	FnPodPriority = "pod_priority"
	// FnNodeString is `node_string(field i32, buf i32, cap i32) -> i32`.
	FnNodeString = "node_string"
	// FnNodeLabel is `node_label(key_ptr, key_len, buf, cap) -> i32`.
	FnNodeLabel = "node_label"
	// FnNodeAnnotation is `node_annotation(key_ptr, key_len, buf, cap) -> i32`.
	FnNodeAnnotation = "node_annotation"
	// FnNodeList is `node_list(kind i32, buf i32, cap i32) -> i32`.
	FnNodeList = "node_list"
	// FnNodeResource is `node_resource(kind i32, name_ptr, name_len) -> i64`.
	FnNodeResource = "node_resource"
	// FnNodePodCount is `node_pod_count() -> i32`.
	FnNodePodCount = "node_pod_count"
	// FnNodeUnschedulable is `node_unschedulable() -> i32` (1 or 0).
	FnNodeUnschedulable = "node_unschedulable"
	// FnCycleStateSet is `cycle_state_set(ptr i32, len i32)`.
	FnCycleStateSet = "cycle_state_set"
	// FnCycleStateGet is `cycle_state_get(buf i32, cap i32) -> i32`.
	FnCycleStateGet = "cycle_state_get"
	// FnSelectNode is `select_node(i i32) -> i32`: in filter_nodes and
	// score_nodes, makes node i of the batch current (0, or -2 if i is out of range).
	FnSelectNode = "select_node"
	// FnScoresGet is `scores_get(buf i32, n i32) -> i32`.
	FnScoresGet = "scores_get"
	// FnScoresSet is `scores_set(buf i32, n i32) -> i32`.
	FnScoresSet = "scores_set"
	// FnNodeTaint is `node_taint(key_ptr, key_len, buf, cap) -> i32`: the
	// node's taints with that key as a string list of (value, effect) pairs.
	FnNodeTaint = "node_taint"
	// FnPreFilterNodes is `prefilter_nodes(list_ptr, list_len) -> i32`: in
	// prefilter, the names of the only nodes the pod may run on.
	FnPreFilterNodes = "prefilter_nodes"
	// FnPodObject is `pod_object(format, buf, cap) -> i32`: the whole pod,
	// for a field no accessor reads.
	FnPodObject = "pod_object"
	// FnNodeObject is `node_object(format, buf, cap) -> i32`: the whole node.
	FnNodeObject = "node_object"
	// FnClusterNodes is `cluster_nodes() -> i32`: how many nodes the
	// scheduler's snapshot of the cycle holds.
	FnClusterNodes = "cluster_nodes"
	// FnClusterNode is `cluster_node(i, kind, buf, cap) -> i32`: one field
	// (ClusterNodeName...) of node i of the snapshot.
	FnClusterNode = "cluster_node"
	// FnCountPods is `count_pods(term_ptr, term_len, buf, cap) -> i32`: the
	// pods matching a term (JSON, a PodAffinityTerm) per topology value,
	// computed by the host once per cycle per distinct term.
	FnCountPods = "count_pods"
	// FnExistingTerms is `existing_terms(kind, buf, cap) -> i32`: the
	// affinity terms of one kind of the pods already on nodes that the pod
	// being scheduled matches, summed per topology pair (docs/abi.md
	// §4.6.2), what InterPodAffinity checks in the other direction.
	FnExistingTerms = "existing_terms"
	// FnNamespaceLabels is `namespace_labels(name_ptr, name_len, buf, cap)
	// -> i32`: a namespace's labels.
	FnNamespaceLabels = "namespace_labels"
	// FnVolumeClaims is `volume_claims(kind, buf, cap) -> i32`: the pod's
	// persistentVolumeClaim volumes with their claims, bound volumes and
	// storage classes (docs/abi.md §4.6.3).
	FnVolumeClaims = "volume_claims"
	// FnResourceClaims is `resource_claims(kind, buf, cap) -> i32`: the
	// pod's Dynamic Resource Allocation requests and the devices of their
	// classes on each node, as the DynamicResources plugin sees them
	// (docs/abi.md §4.6.5).
	FnResourceClaims = "resource_claims"
	// FnObjectGet is `object_get(read, ns_ptr, ns_len, name_ptr, name_len,
	// buf, cap) -> i32`: the declared fields of one object of a granted
	// kind (docs/abi.md §4.10).
	FnObjectGet = "object_get"
	// FnObjectList is `object_list(read, ns_ptr, ns_len, sel_ptr, sel_len,
	// buf, cap) -> i32`: the objects of a granted kind whose labels match
	// a selector, with their declared fields (docs/abi.md §4.10).
	FnObjectList = "object_list"
)

// Bounds of the granted object reads (docs/abi.md §4.10).
const (
	// MaxObjectName bounds object_get's namespace and name.
	MaxObjectName = 253
	// MaxObjectSelector bounds object_list's label selector.
	MaxObjectSelector = 4096
	// MaxObjectAnswer bounds what object_get and object_list answer, in
	// bytes: a policy declaring a large field (a ConfigMap's data) of many
	// objects cannot make the host encode gigabytes.
	MaxObjectAnswer = 1 << 20
)

// Formats for pod_object and node_object.
const (
	// ObjectJSON is the object as the apiserver serves it in JSON
	// (apiVersion and kind set), without metadata.managedFields.
	ObjectJSON int32 = 0
)

// Return values of the read functions other than a length.
const (
	// NotFound means the key, field or object does not exist (-1).
	NotFound int32 = -1
	// BadArgs means a pointer or length was outside guest memory, or a field or
	// kind number is unknown (-2). The call does not trap; the SDK treats it as a bug.
	BadArgs int32 = -2
	// NotAvailable means the data does not exist at this extension point, such
	// as node data during prefilter (-3).
	NotAvailable int32 = -3
	// NotDeclared means the policy's args do not declare the read (-4): the
	// pods on nodes and whole objects are read only by policies that list
	// them in reads (docs/security.md).
	NotDeclared int32 = -4
)

// MissingQuantity is what pod_request and node_resource return for an unknown resource or a bad argument.
const MissingQuantity int64 = -1 << 63

// Parts of a term row (docs/abi.md §4.2.1). A TermStart row opens term i
// (so an empty term exists); the rows after it, with the same term index,
// fill it in.
const (
	// TermStart opens a term: weight for preferred terms; key the
	// topologyKey of a pod affinity term or spread constraint; for a
	// spread constraint operator is whenUnsatisfiable and values maxSkew.
	TermStart = "term"
	// TermMatchExpressions and TermMatchFields are a node selector term's
	// requirements (key, operator, values).
	TermMatchExpressions = "matchExpressions"
	TermMatchFields      = "matchFields"
	// TermLabelSelector and TermNamespaceSelector rows are a label
	// selector: a row without a key marks the selector as present (it may
	// be empty); operator "=" is a matchLabels entry (values: its value),
	// any other a matchExpressions requirement.
	TermLabelSelector     = "labelSelector"
	TermNamespaceSelector = "namespaceSelector"
	// TermNamespaces, TermMatchLabelKeys and TermMismatchLabelKeys carry
	// one name each, in key.
	TermNamespaces        = "namespaces"
	TermMatchLabelKeys    = "matchLabelKeys"
	TermMismatchLabelKeys = "mismatchLabelKeys"
	// A spread constraint's optional fields, each in key when set.
	TermMinDomains         = "minDomains"
	TermNodeAffinityPolicy = "nodeAffinityPolicy"
	TermNodeTaintsPolicy   = "nodeTaintsPolicy"
)

// MaxReasonLength is the longest status reason the host keeps: it cuts a
// longer one at this many bytes (then replaces each byte that is not valid
// UTF-8, including a character the cut split, with U+FFFD). The SDK's
// native backend does the same, so a policy's unit tests see what the
// scheduler would report.
const MaxReasonLength = 1024

// Resource values: cpu is in millicores, everything else in base units
// (memory and ephemeral-storage in bytes, extended resources as integers).
const (
	ResourceCPU    = "cpu"
	ResourceMemory = "memory"
	ResourcePods   = "pods"
)
