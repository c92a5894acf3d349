package abi

// Node tables (ABI v2, docs/abi.md §3.2). A guest declares, with
// node_table, the node fields it reads in batches and a region of its
// memory; before each filter_nodes or score_nodes call the host writes
// there a header and one row per node of the batch, so reading a declared
// field costs a load instead of a host call, and the guest writes each
// node's verdict into its row instead of calling set_status.

const (
	// FnNodeTable is `node_table(cols_ptr, cols_len, table_ptr, max_rows i32) -> i32`.
	FnNodeTable = "node_table"
	// FnReasonRegister is `reason_register(ptr, len i32) -> i32`.
	FnReasonRegister = "reason_register"
	// FnInternString is `intern_string(epoch, id, buf, cap i32) -> i32`.
	FnInternString = "intern_string"
	// FnPodLabelID is `pod_label_id(key_ptr, key_len i32) -> i32`.
	FnPodLabelID = "pod_label_id"
)

// The table's layout: a header, then rows of RowHeader bytes and 8 bytes
// per declared column, all little-endian.
const (
	// TableHeader is the header's size: epoch u32 at 0, current i32 at 4,
	// n u32 at 8, 4 reserved bytes.
	TableHeader = 16
	// HeaderEpoch is the header offset of the string ids' epoch.
	HeaderEpoch = 0
	// HeaderCurrent is the header offset where the guest writes the index
	// of the node it is evaluating (the host writes -1 before the call).
	HeaderCurrent = 4
	// HeaderRows is the header offset of the number of rows filled.
	HeaderRows = 8
	// RowHeader is the size of a row's verdict: code i32 at 0 (the host
	// writes NoVerdict), reason id i32 at 4 (0: none), score i64 at 8.
	RowHeader = 16
	// RowCode, RowReason and RowScore are offsets in a row.
	RowCode   = 0
	RowReason = 4
	RowScore  = 8
	// ColumnSize is the size of one column's slot.
	ColumnSize = 8
	// NoVerdict is the code the host writes into every row before the call:
	// a row still holding it has no verdict from the table.
	NoVerdict = -1
	// MaxColumns and MaxTableRows bound a declaration.
	MaxColumns   = 64
	MaxTableRows = 1024
	// MaxReasons is how many distinct reasons an instance may register.
	MaxReasons = 4096
)

// Column kinds: the part of a column name before the colon ("name",
// "pod_count", "unschedulable" and "taint_effects" have no argument).
const (
	ColName        = "name"        // string id of metadata.name
	ColLabel       = "label"       // label:<key>: string id of the value, 0 if unset
	ColAnnotation  = "annotation"  // annotation:<key>: string id, 0 if unset
	ColAllocatable = "allocatable" // allocatable:<resource>: i64, i64 min if not reported
	ColCapacity    = "capacity"    // capacity:<resource>: i64, i64 min if not reported
	ColRequested   = "requested"   // requested:<resource>: i64, 0 if none
	// nonzero_requested:<resource>: i64, cpu and memory as NodeResourcesFit
	// scores them, 0 for any other resource.
	ColNonZeroRequested = "nonzero_requested"
	ColPodCount         = "pod_count"     // i64: pods on the node
	ColUnschedulable    = "unschedulable" // i64: 1 if cordoned
	ColTaint            = "taint"         // taint:<key>: i64 bit set of the effects of the taints with the key
	ColTaintEffects     = "taint_effects" // i64 bit set of the effects of all the node's taints
	ColImage            = "image"         // image:<name>: i64 size of the image status.images lists under the name, -1 if none
)

// Taint effect bits in a taint column.
const (
	TaintNoSchedule       = 1
	TaintPreferNoSchedule = 2
	TaintNoExecute        = 4
)

// TableColumns lists the column kinds with what their slot holds, in the
// order docs/abi.md shows them.
var TableColumns = []struct{ Kind, Arg, Slot string }{
	{ColName, "", "string id of metadata.name"},
	{ColLabel, "key", "string id of metadata.labels[key], 0 if unset"},
	{ColAnnotation, "key", "string id of metadata.annotations[key], 0 if unset"},
	{ColAllocatable, "resource", "i64 status.allocatable[resource] in the units of §4.3, i64 min if the node does not report it"},
	{ColCapacity, "resource", "i64 status.capacity[resource], i64 min if the node does not report it"},
	{ColRequested, "resource", "i64 requested[resource] (the pods on the node), 0 if none"},
	{ColNonZeroRequested, "resource", "i64 non-zero requested[resource]: cpu and memory of the pods on the node as NodeResourcesFit scores them (a container without a request counts 100m cpu / 200Mi memory), 0 for any other resource"},
	{ColPodCount, "", "i64 pods on the node, assumed ones included"},
	{ColUnschedulable, "", "i64 1 if spec.unschedulable, else 0"},
	{ColTaint, "key", "i64 bit set of the effects of the node's taints with that key: 1 NoSchedule, 2 PreferNoSchedule, 4 NoExecute; 0 if none"},
	{ColTaintEffects, "", "i64 bit set of the effects of all the node's taints, as in taint:<key>; 0 for an untainted node"},
	{ColImage, "name", "i64 size in bytes of the image the node's status.images lists under that name (the last entry with the name), -1 if it lists none"},
}

// RowSize is the size of a row with n columns.
func RowSize(n int) int { return RowHeader + ColumnSize*n }
