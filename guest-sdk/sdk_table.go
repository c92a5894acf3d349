//go:build wasip1 && !wasmsched_abi1

package sdk

import (
	"unsafe"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
)

// Node tables (ABI v2, docs/abi.md §3.2). The SDK learns which node fields
// a policy reads in batches: the first batch reads them with host calls
// and records them as columns; at its end the SDK declares a table of
// those columns, and from the next batch on the host writes them into the
// table before the call. A read then costs a load, and each node's verdict
// is written into its row instead of a set_status call. A read of a field
// the table does not have falls back to a host call (and becomes a column
// for the next batch); so does every field a column cannot carry (taint
// values, lists, objects).

//go:wasmimport wasmsched node_table
func hostNodeTable(colsPtr, colsLen, tablePtr uint32, maxRows int32) int32

//go:wasmimport wasmsched reason_register
func hostReasonRegister(ptr, n uint32) int32

//go:wasmimport wasmsched intern_string
func hostInternString(epoch, id int32, buf, capacity uint32) int32

// sdkABIVersion is what abi_version reports: 2, node tables. Built with
// -tags wasmsched_abi1 the SDK reports 1 and never declares a table
// (sdk_table_abi1.go), which is how benchmarks put both side by side.
const sdkABIVersion = abi.Version

// tableRows is how many rows the SDK's table holds: more than a batch has
// today (32), so larger batches keep the table.
const tableRows = 128

// column is one declared column, found by kind and argument.
type column struct {
	kind string
	arg  string
}

var (
	// columns are the declared columns, in table order; wanted are columns
	// learned since, declared at the end of the batch that learned them.
	columns, wanted []column
	// table is the header and rows the host fills, tableBase its first
	// byte; rowSize its row size.
	table     []byte
	tableBase unsafe.Pointer
	rowSize   int
	// inTable is set while a batch runs from the table; rowIndex is the
	// current node's row, rowPtr its first byte.
	inTable  bool
	rowIndex int32
	rowPtr   unsafe.Pointer
	// selected is the node select_node made current in this batch (-1),
	// for the reads that fall back to a host call.
	selected int32
	// inBatch is set during filter_nodes and score_nodes: only their reads
	// are learned as columns.
	inBatch bool
	// epoch is the string ids' epoch the id cache holds.
	epoch uint32
	// rowError is the Error a read that was not declared in the policy's
	// args set for the current node (notDeclared): the node's verdict,
	// whatever it is, does not replace it.
	rowError string
)

// idCache maps string ids to strings, direct-mapped: label values repeat
// across nodes, so a small cache answers almost every read.
var idCache [1024]struct {
	id uint32
	s  string
}

// reasonCache remembers registered reasons: policies return the same few.
var reasonCache [16]struct {
	id int32
	s  string
}

// batchStart marks a batch call: its reads are learned as columns.
func batchStart() { inBatch = true }

// tableStart reports whether the host filled the table for this batch of
// n nodes (it writes n into the header; the SDK clears it after each
// batch, so a stale header never counts).
func tableStart(n int32) bool {
	if table == nil || n < 1 || n > tableRows || readU32(table, abi.HeaderRows) != uint32(n) {
		return false
	}
	if e := readU32(table, abi.HeaderEpoch); e != epoch {
		epoch = e
		idCache = [1024]struct {
			id uint32
			s  string
		}{}
	}
	inTable, selected = true, -1
	return true
}

// tableSelect makes node i the current one and tells the host, which
// restarts the node's deadline from it. It runs once per node, so it
// stores no more than it must: a pointer and the header's index, with no
// bounds check (tableStart checked i's range against the table), and
// rowError only when a read set it.
func tableSelect(i int32) {
	rowIndex = i
	rowPtr = unsafe.Add(tableBase, abi.TableHeader+int(i)*rowSize)
	*(*uint32)(unsafe.Add(tableBase, abi.HeaderCurrent)) = uint32(i)
	if len(rowError) != 0 {
		rowError = ""
	}
}

// tableEnd ends a batch: the header no longer counts, and columns learned
// during the batch are declared for the next one.
func tableEnd() {
	if table != nil {
		writeU32(table, abi.HeaderRows, 0)
	}
	inTable, rowPtr, inBatch = false, nil, false
	declareWanted()
}

// reportRow writes the current node's verdict into its row: a Success
// inline, anything else out of line (reportRowRest). Small enough to be
// inlined into the batch loops in Go builds too, where a call is a frame
// in linear memory: a Score batch's every node is a Success.
func reportRow(st Status, score int64) {
	if uint32(st.Code)|uint32(len(rowError)) == 0 { // a Success, and every read declared
		*(*[2]uint64)(rowPtr) = [2]uint64{0, uint64(score)} // code and reason at RowCode (0), score at RowScore (8)
		return
	}
	reportRowRest(st, score)
}

// reportRow's one store (and reportRowRest's) assumes this layout of a
// row's verdict: code and reason in the first word, the score in the
// second.
var (
	_ [-abi.RowCode]struct{}      // RowCode is 0
	_ [abi.RowReason - 4]struct{} // RowReason is 4 (wasm is little-endian)
	_ [4 - abi.RowReason]struct{}
	_ [abi.RowScore - 8]struct{} // RowScore is 8
	_ [8 - abi.RowScore]struct{}
)

// reportRowRest is reportRow for a rejection or an undeclared read.
//
//go:noinline
func reportRowRest(st Status, score int64) {
	if len(rowError) == 0 {
		// A rejection with the reason of the last one (a policy returns
		// the same constant on node after node): its id, by address.
		if p := unsafe.StringData(st.Reason); p == lastReason.p && len(st.Reason) == lastReason.n && lastReason.id != 0 {
			*(*[2]uint64)(rowPtr) = [2]uint64{uint64(uint32(st.Code)) | uint64(uint32(lastReason.id))<<32, uint64(score)}
			return
		}
	}
	reportRowSlow(st, score)
}

// lastReason is the reason reportRowSlow registered or found last.
var lastReason struct {
	p  *byte
	n  int
	id int32
}

//go:noinline
func reportRowSlow(st Status, score int64) {
	if rowError != "" {
		st = Status{Code: CodeError, Reason: rowError}
	}
	var id int32
	if st.Code != CodeSuccess && st.Reason != "" {
		id = reasonID(st.Reason)
		if rowError == "" || st.Reason != rowError {
			lastReason.p, lastReason.n, lastReason.id = unsafe.StringData(st.Reason), len(st.Reason), id
		}
	}
	*(*[2]uint64)(rowPtr) = [2]uint64{uint64(uint32(st.Code)) | uint64(uint32(id))<<32, uint64(score)}
}

func reasonID(s string) int32 {
	for i := range reasonCache {
		if reasonCache[i].id != 0 && Equal(reasonCache[i].s, s) {
			return reasonCache[i].id
		}
	}
	id := hostReasonRegister(strPtr(s), uint32(len(s)))
	if id <= 0 {
		return 0
	}
	slot := &reasonCache[int(id)%len(reasonCache)]
	slot.id, slot.s = id, s
	return id
}

// colCache remembers where col found a field, by the addresses of the
// strings naming it: a policy names its fields with the same strings for
// every node (constants, its config), so a lookup is two pointer compares.
// The entries keep their strings alive, so an address cannot be reused by
// another string while it is cached.
var colCache [64]colEntry

// colEntry is one colCache slot: the names' addresses (which keep their
// strings alive, so an address cannot be another string's while cached),
// their lengths, and the column's index. Small enough that col inlines in
// Go builds too.
type colEntry struct {
	kp, ap *byte
	lens   uint64 // len(kind)<<32 | len(arg)
	i      int32
}

// col returns the index of a declared column, or -1 after recording it as
// wanted for the next batch. The cache hit is all col does itself; the
// rest is colSlow, kept out of line: TinyGo gives a function that holds
// pointers across a call a stack frame it links and clears on every call,
// and a read of a column is the hot path of every batch.
func col(kind, arg string) int {
	kp, ap := unsafe.StringData(kind), unsafe.StringData(arg)
	c := &colCache[colSlot(kp, ap, len(arg))]
	if c.ap == ap && c.kp == kp && c.lens == uint64(len(kind))<<32|uint64(uint32(len(arg))) {
		return int(c.i)
	}
	return colSlow(kind, arg)
}

// colSlot is the colCache slot of a (kind, arg) pair by their addresses:
// a multiplicative hash, as the strings of one policy often sit next to
// each other (its config's names are slices of one string), and a
// shift-and-xor put cpu and memory of two kinds in one slot (bin-packing
// looked its columns up again on every node: a third of its time).
func colSlot(kp, ap *byte, n int) uint32 {
	return (uint32(uintptr(unsafe.Pointer(ap)))*0x9E3779B1 ^ uint32(uintptr(unsafe.Pointer(kp)))*0x85EBCA77 ^ uint32(n)) >> 26
}

//go:noinline
func colSlow(kind, arg string) int {
	for i := range columns {
		if Equal(columns[i].kind, kind) && Equal(columns[i].arg, arg) {
			kp, ap := unsafe.StringData(kind), unsafe.StringData(arg)
			if kp != nil && len(kind) < 1<<30 && len(arg) < 1<<30 {
				c := &colCache[colSlot(kp, ap, len(arg))]
				c.kp, c.ap, c.lens, c.i = kp, ap, uint64(len(kind))<<32|uint64(uint32(len(arg))), int32(i)
			}
			return i
		}
	}
	want(kind, arg)
	return -1
}

func want(kind, arg string) {
	if !inBatch || len(columns)+len(wanted) >= abi.MaxColumns {
		return
	}
	for i := range columns {
		if Equal(columns[i].kind, kind) && Equal(columns[i].arg, arg) {
			return // declared, but this batch was not filled (say, larger than the table)
		}
	}
	for i := range wanted {
		if Equal(wanted[i].kind, kind) && Equal(wanted[i].arg, arg) {
			return
		}
	}
	wanted = append(wanted, column{kind, arg})
}

// declareWanted declares the table with the learned columns added. If the
// host refuses it, the SDK keeps reading with host calls.
func declareWanted() {
	if len(wanted) == 0 {
		return
	}
	cols := append(append([]column(nil), columns...), wanted...)
	wanted = wanted[:0]
	list := abi.AppendListHeader(nil, len(cols))
	for _, c := range cols {
		name := c.kind
		if c.arg != "" {
			name += ":" + c.arg
		}
		list = abi.AppendString(list, name)
	}
	size := abi.RowSize(len(cols))
	buf := make([]byte, abi.TableHeader+tableRows*size)
	if hostNodeTable(ptrOf(list), uint32(len(list)), ptrOf(buf), tableRows) != int32(size) {
		return
	}
	columns, table, tableBase, rowSize = cols, buf, unsafe.Pointer(unsafe.SliceData(buf)), size
}

// resCache answers node_resource reads from the table: for each resource
// kind, a direct-mapped cache from the address and length of the name a
// policy asks with to the byte offset of its column in a row. A policy
// asks with the same strings on every node, so a read in a table batch is
// one compare and a load: no column search, no bounds check (an offset is
// cached only once checked against the row), and no call, which is what
// makes it cheap in Go builds (every Go call costs a frame in linear
// memory; bin-packing's Score made ten per node through col). The slot is
// the name's length (a compare and a load fewer than a hash of its
// address, which keeps nodeResource within Go's inlining budget; names
// of one length share a slot and miss in turn to tableResourceSlow's
// hashed cache). The entry keeps its string alive, so that its address
// cannot name another string while cached; column offsets never change
// once declared (the SDK only appends columns).
var resCache [4][8]resEntry

// resHashed is tableResourceSlow's cache behind resCache: by a hash of
// the name's address, for names whose length slot another name holds.
var resHashed [4][16]resEntry

// resCache has one row per node_resource kind: tableResource indexes it
// with kind&3, which the Node methods pass as constants.
var (
	_ [len(resCache) - len(resourceColumns)]struct{}
	_ [len(resourceColumns) - len(resCache)]struct{}
)

type resEntry struct {
	key uint64 // nameKey of the name; 0 marks an empty slot
	p   *byte  // the name's bytes, kept alive while cached
	off int32
}

// resSlot is resHashed's slot of a name's address.
func resSlot(p *byte) uint32 { return uint32(uintptr(unsafe.Pointer(p))) * 0x9E3779B1 >> 28 }

// tableResource reads resource name of kind from the current row; ok is
// false when the cache does not know its column (tableResourceSlow).
func tableResource(kind int32, name string) (int64, bool) {
	if c := &resCache[kind&3][len(name)&7]; c.key == nameKey(name) && inTable {
		return *(*int64)(unsafe.Add(rowPtr, c.off)), true
	}
	return 0, false
}

// tableResourceSlow finds the column of a resource read in the table (or
// learns it for the next batch) and caches its offset.
func tableResourceSlow(kind int32, name string) (int64, bool) {
	if kind < 0 || int(kind) >= len(resourceColumns) {
		return 0, false
	}
	if !inTable {
		want(resourceColumns[kind], name)
		return 0, false
	}
	p, key := unsafe.StringData(name), nameKey(name)
	slot, hashed := &resCache[kind&3][len(name)&7], &resHashed[kind&3][resSlot(p)]
	if hashed.key == key {
		*slot = *hashed
		return *(*int64)(unsafe.Add(rowPtr, hashed.off)), true
	}
	i := col(resourceColumns[kind], name)
	if i < 0 {
		return 0, false
	}
	off := abi.RowHeader + i*abi.ColumnSize
	if p != nil && off+8 <= rowSize && len(name) < 1<<30 {
		*slot = resEntry{key, p, int32(off)}
		*hashed = *slot
	}
	return int64(colU64(i)), true
}

// colU64 reads column i of the current row.
func colU64(i int) uint64 {
	off := abi.RowHeader + i*abi.ColumnSize
	if uint(off)+8 > uint(rowSize) { // never, for an i from col: rows hold every declared column
		return 0
	}
	return *(*uint64)(unsafe.Add(rowPtr, off))
}

// tableString returns the string of a string column of the current row.
func tableString(i int) (string, bool) {
	id := uint32(colU64(i))
	if id == 0 {
		return "", false
	}
	slot := &idCache[id%uint32(len(idCache))]
	if slot.id == id {
		return slot.s, true
	}
	n := hostInternString(int32(epoch), int32(id), ptrOf(scratch), uint32(len(scratch)))
	if int(n) > len(scratch) {
		scratch = make([]byte, int(n)+256)
		n = hostInternString(int32(epoch), int32(id), ptrOf(scratch), uint32(len(scratch)))
	}
	if n < 0 || int(n) > len(scratch) {
		return "", false // the epoch moved on: the caller falls back to a host call
	}
	s := string(scratch[:n])
	slot.id, slot.s = id, s
	return s, true
}

// selectForHost makes the current table node the host's current node
// before a read that needs a host call.
func selectForHost() {
	if inTable && selected != rowIndex {
		hostSelectNode(rowIndex)
		selected = rowIndex
	}
}

// tableKeyedFast answers a keyed column (a label or an annotation) of the
// current row when its column is declared and its string is in the id
// cache, without a call; ok is false otherwise, and the caller goes the
// slow way (tableKeyed).
func tableKeyedFast(kind, key string) (v string, found, ok bool) {
	if !inTable {
		return "", false, false
	}
	i := col(kind, key)
	if i < 0 {
		return "", false, false
	}
	id := uint32(colU64(i))
	if id == 0 {
		return "", false, true
	}
	if slot := &idCache[id%uint32(len(idCache))]; slot.id == id {
		return slot.s, true, true
	}
	return "", false, false
}

// tableLabel answers node_label and node_annotation from the table when
// it can; ok is false when the caller must ask the host.
func tableKeyed(kind, key string) (v string, found, ok bool) {
	if !inTable {
		want(kind, key)
		return "", false, false
	}
	i := col(kind, key)
	if i < 0 {
		selectForHost()
		return "", false, false
	}
	if uint32(colU64(i)) == 0 {
		return "", false, true
	}
	if v, found = tableString(i); !found {
		selectForHost()
	}
	return v, found, found
}

// tableInt answers an integer column from the table; ok is false when the
// caller must ask the host.
func tableInt(kind, arg string) (int64, bool) {
	if !inTable {
		want(kind, arg)
		return 0, false
	}
	i := col(kind, arg)
	if i < 0 {
		return 0, false
	}
	return int64(colU64(i)), true
}

func readU32(b []byte, off int) uint32 {
	_ = b[off+3]
	return *(*uint32)(unsafe.Pointer(&b[off]))
}

func readU64(b []byte, off int) uint64 {
	_ = b[off+7]
	return *(*uint64)(unsafe.Pointer(&b[off]))
}

func writeU32(b []byte, off int, v uint32) {
	_ = b[off+3]
	*(*uint32)(unsafe.Pointer(&b[off])) = v
}

func writeU64(b []byte, off int, v uint64) {
	_ = b[off+7]
	*(*uint64)(unsafe.Pointer(&b[off])) = v
}
