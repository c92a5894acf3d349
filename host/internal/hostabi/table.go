package hostabi

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero/api"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
	"github.com/wasmsched/wasmsched/internal/kubemodel"
)

// Node tables (ABI v2, docs/abi.md §3.2): a guest declares the node fields
// it reads in batches, and before each batch call the host writes them,
// one row per node, into the guest's memory. A row is built once per
// NodeInfo generation and layout and then copied, so a node that did not
// change costs a map lookup and a copy; strings travel as ids of the
// engine's interner, so comparing a node's label with the pod's is an
// integer compare for a guest that wants it.

// tableLayout is a parsed node_table declaration. Instances declaring the
// same columns share it, and with it the rows cached for each node.
type tableLayout struct {
	key     string
	cols    []tableCol
	rowSize int
}

type tableCol struct {
	kind string
	arg  string
}

// layoutSet is an engine's parsed layouts by their column list.
type layoutSet struct {
	sync.Mutex
	m map[string]*tableLayout
}

// maxLayouts bounds the layouts kept; past it the map starts over (cached
// rows of a dropped layout are rebuilt when it is declared again).
const maxLayouts = 1024

// parseLayout reads node_table's column list: nil for a malformed list, an
// unknown column or too many columns.
func (layouts *layoutSet) parse(b []byte) *tableLayout {
	r := abi.NewListReader(b)
	if r.Len() < 1 || r.Len() > abi.MaxColumns {
		return nil
	}
	cols := make([]tableCol, 0, r.Len())
	for r.Len() > 0 {
		c, ok := r.Next()
		if !ok {
			return nil
		}
		kind, arg, hasArg := strings.Cut(string(c), ":")
		known := false
		for _, tc := range abi.TableColumns {
			if tc.Kind == kind && (tc.Arg != "") == hasArg && (!hasArg || arg != "") {
				known = true
				break
			}
		}
		if !known {
			return nil
		}
		cols = append(cols, tableCol{kind: kind, arg: arg})
	}
	key := string(b)
	layouts.Lock()
	defer layouts.Unlock()
	if l := layouts.m[key]; l != nil {
		return l
	}
	if len(layouts.m) >= maxLayouts {
		layouts.m = map[string]*tableLayout{}
	}
	l := &tableLayout{key: key, cols: cols, rowSize: abi.RowSize(len(cols))}
	layouts.m[key] = l
	return l
}

// interner gives strings an engine's ids (≥ 1) within an epoch. When it
// holds maxInterned strings it starts a new epoch; the previous epoch
// still answers intern_string, so a guest reading a table filled just
// before the change gets the right strings.
type interner struct {
	mu    sync.RWMutex
	epoch uint32
	// cur is epoch, for current() to read without the lock: every row of
	// every batch asks for it.
	cur  atomic.Uint32
	ids  map[string]uint32
	strs []string
	prev []string
	// podOnly marks, by id - 1, the strings only pods' labels added
	// (pod_label_id), not a node table: their values may be another
	// namespace's, which namespaced policies may not read back.
	podOnly, prevPodOnly []bool
	// bytes is the size of strs' strings.
	bytes int
}

// maxInterned and maxInternedBytes bound the interner: label values of a
// churning cluster (hostnames) would otherwise grow it forever, and a
// column of a large annotation (up to 256 KiB each) would grow it fast.
const (
	maxInterned      = 1 << 20
	maxInternedBytes = 64 << 20
)

func newInterner() *interner {
	t := &interner{epoch: 1, ids: map[string]uint32{}}
	t.cur.Store(1)
	return t
}

// id returns s's id in the current epoch, adding it if new: a node
// table's string.
func (t *interner) id(s string) (epoch, id uint32) { return t.intern(s, false) }

// podID is id for a pod's label value (pod_label_id).
func (t *interner) podID(s string) (epoch, id uint32) { return t.intern(s, true) }

// nodeID is s's id if a node table holds it, without adding it.
func (t *interner) nodeID(s string) (epoch, id uint32, ok bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	id, ok = t.ids[s]
	if !ok || t.podOnly[id-1] {
		return 0, 0, false
	}
	return t.epoch, id, true
}

func (t *interner) intern(s string, fromPod bool) (epoch, id uint32) {
	t.mu.RLock()
	id, ok := t.ids[s]
	epoch = t.epoch
	stillPodOnly := ok && !fromPod && t.podOnly[id-1]
	t.mu.RUnlock()
	if ok && !stillPodOnly {
		return epoch, id
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if id, ok := t.ids[s]; ok {
		if !fromPod {
			t.podOnly[id-1] = false // a node's too now
		}
		return t.epoch, id
	}
	if len(t.strs) >= maxInterned || t.bytes+len(s) > maxInternedBytes {
		t.prev, t.strs, t.ids, t.bytes = t.strs, nil, map[string]uint32{}, 0
		t.prevPodOnly, t.podOnly = t.podOnly, nil
		t.epoch++
		t.cur.Store(t.epoch)
	}
	t.strs = append(t.strs, s)
	t.podOnly = append(t.podOnly, fromPod)
	t.bytes += len(s)
	id = uint32(len(t.strs))
	t.ids[s] = id
	return t.epoch, id
}

func (t *interner) current() uint32 { return t.cur.Load() }

// str returns the string of id in epoch, which must be the current or the
// previous one; nodeOnly refuses a string only pods' labels added.
func (t *interner) str(epoch, id uint32, nodeOnly bool) (string, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	strs, podOnly := t.strs, t.podOnly
	switch epoch {
	case t.epoch:
	case t.epoch - 1:
		strs, podOnly = t.prev, t.prevPodOnly
	default:
		return "", false
	}
	if id < 1 || int(id) > len(strs) || nodeOnly && podOnly[id-1] {
		return "", false
	}
	return strs[id-1], true
}

// cachedRow is a node's row for one layout, in one interner epoch.
type cachedRow struct {
	layout *tableLayout
	epoch  uint32
	b      []byte
}

// maxCachedRows is how many layouts' rows a node keeps (policies with
// different declared columns); a ninth replaces none.
const maxCachedRows = 8

// cachedRows is a node's rows, in one allocation with their count: a
// hit reads the set and then the row's bytes, one dependent load fewer
// than through a slice.
type cachedRows struct {
	n int
	r [maxCachedRows]cachedRow
}

// row returns ni's row for layout in epoch: from the node's cache entry
// when the NodeInfo generation and the epoch are unchanged (no lock: the
// entry's rows are replaced, never changed), else built and cached.
func (l *tableLayout) row(eng *Caches, ni fwk.NodeInfo, epoch uint32) ([]byte, uint32) {
	e := eng.nodes.entry(ni)
	if rows := e.rows.Load(); rows != nil {
		for i := range rows.r[:rows.n] {
			if r := &rows.r[i]; r.layout == l && r.epoch == epoch {
				return r.b, epoch
			}
		}
	}
	b, built := l.build(eng, ni)
	e.rowsMu.Lock()
	next := new(cachedRows)
	if old := e.rows.Load(); old != nil {
		for _, r := range old.r[:old.n] {
			if r.layout != l {
				next.r[next.n] = r
				next.n++
			}
		}
	}
	if next.n < maxCachedRows {
		next.r[next.n] = cachedRow{l, built, b}
		next.n++
	}
	e.rows.Store(next)
	e.rowsMu.Unlock()
	return b, built
}

// build encodes ni's columns (the row without its verdict header) from
// the node's model.
func (l *tableLayout) build(eng *Caches, ni fwk.NodeInfo) ([]byte, uint32) {
	b := make([]byte, len(l.cols)*abi.ColumnSize)
	e := eng.nodes.entry(ni)
	epoch := eng.strs.current()
	for i, c := range l.cols {
		s, isString, ok, v := model.TableColumn(e.model(ni, kubemodel.ColumnPart(c.kind)), c.kind, c.arg)
		if isString {
			v = 0
			if ok {
				var id uint32
				epoch, id = eng.strs.id(s)
				v = uint64(id)
			}
		}
		binary.LittleEndian.PutUint64(b[i*abi.ColumnSize:], v)
	}
	return b, epoch
}

// Table is a call's declared node table (node_table): where it is in the
// guest's memory, its layout and how many rows it holds.
type Table struct {
	layout *tableLayout
	ptr    uint32
	rows   int
}

// Layout is a node table's declared columns: rows of one layout (and one
// interner epoch) are equal exactly when the columns' values are.
type Layout = tableLayout

// Layout is the table's layout.
func (t *Table) Layout() *Layout { return t.layout }

// Row returns ni's row in layout l (the columns, without the verdict
// header) and the interner epoch its strings are in, from the node's
// cache entry. The row is shared: it must not be changed.
func (c *Caches) Row(l *Layout, ni fwk.NodeInfo) ([]byte, uint32) {
	return l.row(c, ni, c.strs.current())
}

// Rows is how many rows the table holds.
func (t *Table) Rows() int { return t.rows }

// FillTable writes the header and one row per node into the call's table
// in mem, for a batch call. It returns false, writing nothing the guest
// could mistake for rows, when the table does not fit in memory.
//
// With groups, nodes whose rows are equal share one row: the table holds
// each distinct row once, for the first node that has it, and groups
// says which row is each node's (RowGroups).
func (in *Call) FillTable(mem api.Memory, t *Table, nodes []fwk.NodeInfo, groups *RowGroups) bool {
	eng := in.Caches
	size := uint32(abi.TableHeader + t.rows*t.layout.rowSize)
	buf, ok := mem.Read(t.ptr, size)
	if !ok {
		return false
	}
	// A batch's rows must share one epoch. If the interner starts a new
	// one while they are built, build them again; a cluster whose columns
	// hold more distinct strings than the interner keeps would do that
	// forever, so after three tries the batch runs without its table.
	for try := 0; try < 3; try++ {
		epoch := eng.strs.current()
		groups.reset(len(nodes))
		n := 0
		for _, ni := range nodes {
			cols, e := t.layout.row(eng, ni, epoch)
			if e != epoch {
				epoch = 0 // the interner moved on while filling: fill again
			}
			if groups != nil && !groups.add(ni, cols) {
				continue
			}
			row := buf[abi.TableHeader+n*t.layout.rowSize:]
			binary.LittleEndian.PutUint64(row[abi.RowCode:], 0xffffffff) // code NoVerdict (-1), reason 0
			binary.LittleEndian.PutUint64(row[abi.RowScore:], 0)
			copy(row[abi.RowHeader:t.layout.rowSize], cols)
			n++
		}
		if epoch != 0 && epoch == eng.strs.current() {
			binary.LittleEndian.PutUint32(buf[abi.HeaderEpoch:], epoch)
			binary.LittleEndian.PutUint32(buf[abi.HeaderCurrent:], uint32(0xffffffff))
			binary.LittleEndian.PutUint32(buf[abi.HeaderRows:], uint32(n))
			return true
		}
	}
	binary.LittleEndian.PutUint32(buf[abi.HeaderRows:], 0)
	return false
}

// TableVerdicts reads the verdicts the guest wrote into the first n rows:
// results[i] (and scores[i] for a score batch) for each row with one, and
// fromTable[i] set. Unknown codes become the policy's Error, as with
// set_status.
// mem is nil when the module's memory is gone (closed at its deadline).
func (in *Call) TableVerdicts(mem api.Memory, t *Table, n int, results []Result, scores []int64, fromTable []bool) {
	if mem == nil {
		return
	}
	buf, ok := mem.Read(t.ptr+abi.TableHeader, uint32(n*t.layout.rowSize))
	if !ok {
		return
	}
	for i := 0; i < n; i++ {
		row := buf[i*t.layout.rowSize:]
		code := int32(binary.LittleEndian.Uint32(row[abi.RowCode:]))
		if code == abi.NoVerdict {
			continue
		}
		reason := ""
		if id := int32(binary.LittleEndian.Uint32(row[abi.RowReason:])); id != 0 {
			if id > 0 && int(id) <= len(in.reasons) {
				reason = in.reasons[id-1]
			} else {
				code, reason = abi.CodeError, fmt.Sprintf("table row %d names reason id %d, which the policy never registered", i, id)
			}
		}
		if !ValidCode(code) {
			reason = invalidCode(code, reason)
			code = abi.CodeError
		}
		results[i] = Result{Code: code, Reason: reason}
		if scores != nil {
			scores[i] = int64(binary.LittleEndian.Uint64(row[abi.RowScore:]))
		}
		fromTable[i] = true
	}
}

// TableProgress reads which node of a table batch the guest evaluates, so
// its deadline restarts as select_node's does in a batch without a table:
// true when the guest moved on to a later node. Only an index past the
// last one counts: a guest cannot extend a node's deadline by writing the
// same or an earlier index.
func (in *Call) TableProgress(mem api.Memory) bool {
	t := in.CallTable
	if t == nil {
		return false
	}
	cur, ok := mem.ReadUint32Le(t.ptr + abi.HeaderCurrent)
	if !ok {
		return false
	}
	if c := int32(cur); c > in.TableCur && int(c) < len(in.Batch) {
		in.TableCur = c
		return true
	}
	return false
}

// Host functions of the node table.
var tableFuncs = map[string]api.GoModuleFunc{
	abi.FnNodeTable: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		colsPtr, colsLen, ptr, rows := uint32(s[0]), uint32(s[1]), uint32(s[2]), int32(s[3])
		if colsLen == 0 {
			in.Table = nil
			s[0] = 0
			return
		}
		cols, ok := m.Memory().Read(colsPtr, colsLen)
		if !ok || rows < 1 || rows > abi.MaxTableRows {
			s[0] = retBadArgs
			return
		}
		l := in.Caches.layouts.parse(cols)
		if l == nil {
			s[0] = retBadArgs
			return
		}
		if _, ok := m.Memory().Read(ptr, uint32(abi.TableHeader+int(rows)*l.rowSize)); !ok {
			s[0] = retBadArgs
			return
		}
		in.Table = &Table{layout: l, ptr: ptr, rows: int(rows)}
		s[0] = uint64(uint32(l.rowSize))
	},
	abi.FnReasonRegister: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		b, ok := m.Memory().Read(uint32(s[0]), uint32(s[1]))
		if !ok {
			s[0] = retBadArgs
			return
		}
		if id, ok := in.reasonIDs[string(b)]; ok {
			s[0] = uint64(uint32(id))
			return
		}
		if len(in.reasons) >= abi.MaxReasons {
			s[0] = retBadArgs
			return
		}
		if in.reasonIDs == nil {
			in.reasonIDs = map[string]int32{}
		}
		in.reasons = append(in.reasons, SafeString(b))
		id := int32(len(in.reasons))
		in.reasonIDs[string(b)] = id
		s[0] = uint64(uint32(id))
	},
	abi.FnInternString: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		// A namespaced policy never reads back a string only a pod's
		// label added: it may be another namespace's (tenant.go).
		str, ok := in.Caches.strs.str(uint32(s[0]), uint32(s[1]), in.Tenant != "")
		if !ok {
			s[0] = retNotFound
			return
		}
		s[0] = writeOutString(m, s[2], s[3], str)
	},
	abi.FnPodLabelID: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Pod == nil {
			s[0] = retNotAvailable
			return
		}
		key, ok := m.Memory().Read(uint32(s[0]), uint32(s[1]))
		if !ok {
			s[0] = retBadArgs
			return
		}
		in.PodReads.label(key)
		v, ok := in.Pod.model(kubemodel.PodLabels).Labels[string(key)]
		if !ok {
			s[0] = 0
			return
		}
		var epoch, id uint32
		if in.Tenant != "" {
			// A namespaced policy gets an id only for a string a node
			// table holds: whether a value is interned, and when, would
			// tell it what other pods' labels say. Otherwise -1, and
			// the SDK compares strings.
			var ok bool
			if epoch, id, ok = in.Caches.strs.nodeID(v); !ok {
				s[0] = retNotFound
				return
			}
		} else {
			epoch, id = in.Caches.strs.podID(v)
		}
		if in.CallTable != nil && epoch != in.TableEpoch {
			s[0] = retNotFound // the interner moved on since the table was filled: compare strings
			return
		}
		s[0] = uint64(id)
	},
}
