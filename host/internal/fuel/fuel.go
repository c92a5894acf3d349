// Package fuel rewrites a WebAssembly module so that it stops itself: every
// function entry and every loop header decrements a counter in a global the
// rewriter adds, and when the counter is spent the code calls one imported
// host function, which may end the call (by panicking, which wazero turns
// into an error) or return how much more the guest may run.
//
// Why: wazero can stop a running guest only when it is compiled with
// close-on-context-done, which makes every loop iteration and function
// entry leave native code to look at the context (74 ns per iteration
// instead of about 2 on this project's machines) and starts a goroutine per
// call. A counter in a global costs a load, a compare and a store, and the
// host call it reaches every few thousand iterations is also a point where
// the Go runtime can stop the goroutine for a garbage collection, which
// native code cannot offer. docs/architecture.md (RATIONALE) has the numbers.
package fuel

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/wasmsched/wasmsched/host/internal/wasmbin"
	"strings"
)

// The import the rewriter adds: ImportModule.ImportName, of type () -> i32.
// The host instantiates a module of this name with that one function. A
// module that already imports from ImportModule is refused, so a guest
// cannot call it on its own.
const (
	ImportModule = "wasmsched:fuel"
	ImportName   = "refuel"
)

// ErrReserved is returned for a module that imports from ImportModule.
var ErrReserved = fmt.Errorf("module imports from %q, which is reserved for the host's instrumentation", ImportModule)

// Section ids (WebAssembly core specification, 5.5.2).
const (
	secCustom   = 0
	secType     = 1
	secImport   = 2
	secFunction = 3
	secTable    = 4
	secGlobal   = 6
	secExport   = 7
	secStart    = 8
	secElement  = 9
	secCode     = 10
	secData     = 11
	secDataCnt  = 12
)

const (
	valI32    = 0x7f
	kindFunc  = 0x00
	kindTable = 0x01
	kindMem   = 0x02
	kindGlob  = 0x03
)

type section struct {
	id      byte
	name    string // custom sections
	content []byte // for custom sections, after the name
}

// module is the parsed skeleton of a module: its sections in order, and the
// counts the rewrite needs.
type module struct {
	sections []section
	// importedFuncs and importedGlobals count the imports of each kind;
	// definedGlobals the global section's entries.
	importedFuncs, importedGlobals, definedGlobals uint32
	// refuelType is the index of a () -> i32 type, chargeType of an
	// (i32) -> i32 type, when the module has one (has*Type).
	refuelType, chargeType, numTypes uint32
	hasRefuelType, hasChargeType     bool
	// bulkType is the index of an (i32, i32, i32) -> () type.
	bulkType    uint32
	hasBulkType bool
	// definedFuncs is the function section's count; hasFuncs and hasCode
	// say whether the function and code sections are there. The charge
	// function is added only to a module with both.
	definedFuncs      uint32
	hasFuncs, hasCode bool
	// charge is set when the rewrite adds $charge, and added is how many
	// functions it adds: $charge, and $fill and $copy for a module with a
	// memory (hasMemory).
	charge    bool
	added     uint32
	hasMemory bool
	opts      Options
}

// Options bound what the instrumented module may do beyond what its own
// declarations allow.
type Options struct {
	// TableGrowth is how many entries table.grow may add to the module's
	// tables beyond their declared minimums, all tables together: each
	// defined table's maximum becomes at most its minimum plus an even
	// share of it (its minimum, when the code has no table.grow), so a
	// grow past that fails (returns -1) as the specification allows,
	// instead of allocating host memory. Zero leaves the tables' declared
	// maximums as they are.
	TableGrowth uint32
}

// Shape is what the module's code asks of the compiler beyond its size:
// measured while rewriting, for the host's compile limits.
type Shape struct {
	// MaxDepth is the deepest nesting of block, loop and if in any
	// function; DepthSquares adds up the square of each function's deepest
	// nesting, which is how wazero's compile time grows with it.
	MaxDepth     uint32
	DepthSquares uint64
	// MaxBrTable counts the labels of the largest br_table (the default
	// included); BrTableSquares adds up the square of each br_table's
	// labels, which is how wazero's compile time grows with them.
	MaxBrTable     uint32
	BrTableSquares uint64
	// Tables is how many tables the module defines, TableEntries their
	// declared minimums together, and TableGrowth how many entries
	// table.grow can add to them after the rewrite.
	Tables                    uint32
	TableEntries, TableGrowth uint64
}

// Instrument returns wasm rewritten to check in with the host: an added
// import ImportModule.ImportName of type () -> i32 and a mutable i32 global
// (the fuel, starting at 0) appended after the module's globals, so no
// global index moves; the import is the last function import, so every
// defined function's index grows by one wherever it appears (calls, tail
// calls, ref.func, element segments, global initializers, exports, the
// start function and the name section). At every function entry and after
// every loop instruction's block type it inserts
//
//	global.get $fuel; i32.eqz; if; call $refuel; global.set $fuel; end
//	global.get $fuel; i32.const 1; i32.sub; global.set $fuel
//
// which leaves the operand stack and the nesting of existing branches as
// they were. DWARF custom sections are dropped (they describe code offsets
// the rewrite moves); other custom sections are kept.
//
// An error means the input is not a module the rewriter can read: either
// it is invalid, or it uses an instruction outside WebAssembly 2.0 and the
// proposals wazero implements (tail calls, threads, extended constants).
//
// Bulk instructions (memory.fill, memory.copy, memory.init, table.fill,
// table.copy, table.init, table.grow) do work in proportion to their
// length operand, which one fuel unit does not pay for: a loop of
// memory.fill over 64 MiB would run minutes between two checks. The
// rewriter adds one function, $charge (i32) -> i32, after the module's
// own, and calls it before each bulk instruction with the length on top
// of the stack: it takes one unit per bulkUnit bytes (or table entries)
// from the fuel and returns the length unchanged; a length the fuel left
// cannot pay for calls refuel first, so the deadline is checked before
// every bulk instruction longer than the fuel left.
func Instrument(wasm []byte) ([]byte, error) {
	out, _, err := InstrumentWith(wasm, Options{})
	return out, err
}

// InstrumentWith is Instrument with bounds on the module's tables, and it
// reports the shape of the module's code.
func InstrumentWith(wasm []byte, o Options) ([]byte, Shape, error) {
	m, err := parse(wasm)
	if err != nil {
		return nil, Shape{}, err
	}
	m.opts = o
	return m.rewrite()
}

// bulkShift sets the price of bulk instructions: one unit of fuel per
// 1<<bulkShift bytes or table entries. A unit is what one loop iteration
// costs (2-4 ns); memset and memcpy move 32 bytes in about that time here.
const bulkShift = 5

func parse(wasm []byte) (*module, error) {
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], []byte("\x00asm")) || !bytes.Equal(wasm[4:8], []byte{1, 0, 0, 0}) {
		return nil, errors.New("not a WebAssembly 1.0 binary module (magic or version)")
	}
	r := &wasmbin.Reader{B: wasm, Pos: 8, End: len(wasm)}
	m := &module{}
	for r.Left() > 0 {
		id, err := r.Byte()
		if err != nil {
			return nil, err
		}
		size, err := r.U32()
		if err != nil {
			return nil, err
		}
		content, err := r.Bytes(uint64(size))
		if err != nil {
			return nil, fmt.Errorf("section %d: %w", id, err)
		}
		s := section{id: id, content: content}
		sr := wasmbin.NewReader(content)
		switch id {
		case secCustom:
			if s.name, err = sr.Name(); err != nil {
				return nil, fmt.Errorf("custom section name: %w", err)
			}
			s.content = content[sr.Pos:]
		case secType:
			err = m.readTypes(sr)
		case secImport:
			err = m.readImports(sr)
		case secGlobal:
			m.definedGlobals, err = sr.U32()
		case secFunction:
			m.definedFuncs, err = sr.U32()
			m.hasFuncs = true
		case secCode:
			m.hasCode = true
		case 5:
			var n uint32
			n, err = sr.U32()
			m.hasMemory = m.hasMemory || n > 0
		case secTable, secExport, secStart, secElement, secData, secDataCnt:
		default:
			return nil, fmt.Errorf("unknown or unsupported section id %d", id)
		}
		if err == nil && (id == secType || id == secImport) && sr.Left() != 0 {
			err = errors.New("section size mismatch") // the rewrite appends to these two
		}
		if err != nil {
			return nil, fmt.Errorf("section %d: %w", id, err)
		}
		m.sections = append(m.sections, s)
	}
	return m, nil
}

func (m *module) readTypes(r *wasmbin.Reader) error {
	n, err := r.VecLen(3)
	if err != nil {
		return err
	}
	m.numTypes = n
	for i := uint32(0); i < n; i++ {
		form, err := r.Byte()
		if err != nil {
			return err
		}
		if form != 0x60 {
			return fmt.Errorf("type %d: form 0x%x is not a function type", i, form)
		}
		np, err := r.VecLen(1)
		if err != nil {
			return err
		}
		params, err := r.Bytes(uint64(np))
		if err != nil {
			return err
		}
		nr, err := r.VecLen(1)
		if err != nil {
			return err
		}
		res, err := r.Bytes(uint64(nr))
		if err != nil {
			return err
		}
		if !m.hasRefuelType && np == 0 && nr == 1 && res[0] == valI32 {
			m.refuelType, m.hasRefuelType = i, true
		}
		if !m.hasChargeType && np == 1 && params[0] == valI32 && nr == 1 && res[0] == valI32 {
			m.chargeType, m.hasChargeType = i, true
		}
		if !m.hasBulkType && np == 3 && string(params) == "\x7f\x7f\x7f" && nr == 0 {
			m.bulkType, m.hasBulkType = i, true
		}
	}
	return nil
}

func (m *module) readImports(r *wasmbin.Reader) error {
	n, err := r.VecLen(4)
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		mod, err := r.Name()
		if err != nil {
			return err
		}
		if mod == ImportModule {
			return ErrReserved
		}
		if _, err := r.Name(); err != nil {
			return err
		}
		kind, err := r.Byte()
		if err != nil {
			return err
		}
		switch kind {
		case kindFunc:
			m.importedFuncs++
			var typ uint32
			if typ, err = r.U32(); err == nil && typ >= m.numTypes {
				err = fmt.Errorf("import %d: unknown type %d", i, typ)
			}
		case kindTable:
			if _, err = r.Byte(); err == nil {
				err = r.Limits()
			}
		case kindMem:
			m.hasMemory = true
			err = r.Limits()
		case kindGlob:
			m.importedGlobals++
			_, err = r.Bytes(2)
		default:
			err = fmt.Errorf("import %d: unknown or unsupported kind 0x%x", i, kind)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// shift maps a function index of the input to the output's.
func (m *module) shift(f uint32) uint32 {
	switch {
	case f < m.importedFuncs:
		return f
	case f >= 1<<32-5:
		return 1<<32 - 1 // invalid before, invalid after
	case m.charge && f-m.importedFuncs >= m.definedFuncs:
		// Past the module's functions, which is invalid: past the
		// functions the rewrite may add too (3, decided after the code is
		// rewritten), so that it stays invalid.
		return f + 4
	}
	return f + 1
}

// check returns the fuel check for a global index.
func check(global, refuel uint32) []byte {
	c := []byte{opGlobalGet}
	c = wasmbin.AppendU32(c, global)
	c = append(c, opI32Eqz, opIf, blockTypeEmpty, opCall)
	c = wasmbin.AppendU32(c, refuel)
	c = append(c, opGlobalSet)
	c = wasmbin.AppendU32(c, global)
	c = append(c, opEnd, opGlobalGet)
	c = wasmbin.AppendU32(c, global)
	c = append(c, opI32Const, 1, opI32Sub, opGlobalSet)
	return wasmbin.AppendU32(c, global)
}

func (m *module) rewrite() ([]byte, Shape, error) {
	fuelGlobal := m.importedGlobals + m.definedGlobals
	// The types the rewrite adds, after the module's own.
	var added []byte
	nAdded := uint32(0)
	refuelType, chargeType := m.refuelType, m.chargeType
	if !m.hasRefuelType {
		refuelType = m.numTypes + nAdded
		added, nAdded = append(added, 0x60, 0, 1, valI32), nAdded+1
	}
	charge := m.hasFuncs && m.hasCode
	m.charge = charge
	if charge && !m.hasChargeType {
		chargeType = m.numTypes + nAdded
		added, nAdded = append(added, 0x60, 1, valI32, 1, valI32), nAdded+1
	}
	x := &exprRewriter{shift: m.shift, check: check(fuelGlobal, m.importedFuncs), types: m.numTypes, globals: fuelGlobal}
	if charge {
		// $charge, $fill and $copy follow the module's functions (and
		// the added import).
		base := m.importedFuncs + 1 + m.definedFuncs
		x.charge = wasmbin.AppendU32([]byte{opCall}, base)
		if m.hasMemory {
			x.fill = wasmbin.AppendU32([]byte{opCall}, base+1)
			x.copy = wasmbin.AppendU32([]byte{opCall}, base+2)
		}
	}
	// The code is rewritten first: $fill and $copy are added only when
	// it uses memory.fill or memory.copy (a module without bulk memory
	// must stay valid without that feature).
	var code []byte
	for _, s := range m.sections {
		if s.id == secCode {
			var err error
			if code, err = m.code(s.content, x); err != nil {
				return nil, Shape{}, fmt.Errorf("section %d: %w", s.id, err)
			}
		}
	}
	if charge {
		m.added = 1
		if x.usedMemBulk {
			m.added = 3
		}
	}
	bulkType := m.bulkType
	if m.added == 3 && !m.hasBulkType {
		bulkType = m.numTypes + nAdded
		added, nAdded = append(added, 0x60, 3, valI32, valI32, valI32, 0), nAdded+1
	}
	consts := &exprRewriter{shift: m.shift, types: m.numTypes, globals: fuelGlobal}
	var shape Shape

	// Sections the module lacks but the rewrite needs are inserted where
	// their id orders them.
	need := map[byte]bool{secImport: true, secGlobal: true}
	if nAdded > 0 {
		need[secType] = true
	}
	out := append([]byte(nil), "\x00asm\x01\x00\x00\x00"...)
	emitMissing := func(before byte) {
		for _, id := range []byte{secType, secImport, secGlobal} {
			if id < before && need[id] {
				out = wasmbin.AppendSection(out, id, m.newSection(id, refuelType, nAdded, added))
				need[id] = false
			}
		}
	}
	// Custom sections after the last known section stay last: wazero reads
	// a module differently depending on what follows a custom section (an
	// empty one at the very end is refused, the same one before another
	// section accepted), so the added sections go before them.
	lastKnown := -1
	for i, s := range m.sections {
		if s.id != secCustom {
			lastKnown = i
		}
	}
	for i, s := range m.sections {
		if i == lastKnown+1 {
			emitMissing(secGlobal + 1)
		}
		if s.id != secCustom {
			// Every section the rewrite may add (type, import, global)
			// has a smaller id than the sections that must follow it.
			emitMissing(s.id)
		}
		var content []byte
		var err error
		switch s.id {
		case secCustom:
			if strings.HasPrefix(s.name, ".debug_") {
				continue
			}
			content = s.content
			if s.name == "name" {
				if content, err = m.names(s.content); err != nil {
					continue // a name section that does not parse is dropped, as engines ignore it
				}
			}
			b := wasmbin.AppendName(nil, s.name)
			out = wasmbin.AppendSection(out, secCustom, append(b, content...))
			continue
		case secType:
			content, err = recount(s.content, nAdded, added)
			need[secType] = false
		case secImport:
			content, err = recount(s.content, 1, refuelImport(refuelType))
			need[secImport] = false
		case secGlobal:
			content, err = m.globals(s.content, consts)
			need[secGlobal] = false
		case secExport:
			content, err = m.exports(s.content)
		case secStart:
			r := wasmbin.NewReader(s.content)
			var f uint32
			if f, err = r.U32(); err == nil {
				content = wasmbin.AppendU32(nil, m.shift(f))
			}
		case secElement:
			content, err = m.elements(s.content, consts)
		case secCode:
			content = code
			if charge {
				base := m.importedFuncs + 1 + m.definedFuncs
				var helpers []byte
				for _, body := range [][]byte{chargeBody(fuelGlobal, m.importedFuncs), fillBody(base), copyBody(base)}[:m.added] {
					helpers = wasmbin.AppendU32(helpers, uint32(len(body)))
					helpers = append(helpers, body...)
				}
				content, err = recount(code, m.added, helpers)
			}
		case secFunction:
			if err = m.checkFunctionTypes(s.content); err == nil && charge {
				types := wasmbin.AppendU32(nil, chargeType)
				if m.added == 3 {
					types = wasmbin.AppendU32(wasmbin.AppendU32(types, bulkType), bulkType)
				}
				content, err = recount(s.content, m.added, types)
			} else {
				content = s.content
			}
		case secTable:
			content, err = m.tables(s.content, &shape, x.usedTableGrow)
		default:
			content = s.content
		}
		if err != nil {
			return nil, Shape{}, fmt.Errorf("section %d: %w", s.id, err)
		}
		out = wasmbin.AppendSection(out, s.id, content)
	}
	emitMissing(secGlobal + 1)
	shape.MaxDepth, shape.DepthSquares = x.maxDepth, x.depthSquares
	shape.MaxBrTable, shape.BrTableSquares = x.maxBrTable, x.brTableSquares
	return out, shape, nil
}

// tables copies the table section, counting the tables and their entries,
// and lowers each table's maximum to what Options.TableGrowth allows: to
// its minimum when the code has no table.grow (nothing else grows a table
// here), so a module that cannot grow its tables is charged nothing for it.
func (m *module) tables(content []byte, shape *Shape, grows bool) ([]byte, error) {
	room := m.opts.TableGrowth
	if !grows {
		room = 0
	}
	r := wasmbin.NewReader(content)
	n, err := r.VecLen(3)
	if err != nil {
		return nil, err
	}
	shape.Tables = n
	out := wasmbin.AppendU32(nil, n)
	for i := uint32(0); i < n; i++ {
		start := r.Pos
		t, err := r.Byte()
		if err != nil {
			return nil, err
		}
		if t == 0x63 || t == 0x64 { // typed reference: a heap type follows
			if _, err := r.SLEB(33); err != nil {
				return nil, err
			}
		}
		typ := r.B[start:r.Pos]
		flags, err := r.Byte()
		if err != nil {
			return nil, err
		}
		if flags > 1 { // shared or 64-bit: not for tables here; wazero refuses it
			if err := wasmbin.NewReader([]byte{flags}).Limits(); err != nil {
				return nil, err
			}
			r.Pos--
			if err := r.Limits(); err != nil {
				return nil, err
			}
			out = append(out, r.B[start:r.Pos]...)
			continue
		}
		lo, err := r.U32()
		if err != nil {
			return nil, err
		}
		hi, hasMax := uint64(1<<32-1), flags == 1
		if hasMax {
			v, err := r.U32()
			if err != nil {
				return nil, err
			}
			hi = uint64(v)
		}
		shape.TableEntries += uint64(lo)
		if m.opts.TableGrowth == 0 || (hasMax && hi <= uint64(lo)) {
			shape.TableGrowth += hi - min(hi, uint64(lo))
			out = append(out, r.B[start:r.Pos]...)
			continue
		}
		hi = min(hi, uint64(lo)+uint64(room/n), 1<<32-1)
		shape.TableGrowth += hi - min(hi, uint64(lo))
		out = append(out, typ...)
		out = wasmbin.AppendU32(append(out, 1), lo)
		out = wasmbin.AppendU32(out, uint32(hi))
	}
	if r.Left() != 0 {
		return nil, errors.New("section size mismatch")
	}
	return out, nil
}

// checkFunctionTypes refuses a function whose type does not exist (the
// rewrite may add a type at the first missing index).
func (m *module) checkFunctionTypes(content []byte) error {
	r := wasmbin.NewReader(content)
	n, err := r.VecLen(1)
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		typ, err := r.U32()
		if err != nil {
			return err
		}
		if typ >= m.numTypes {
			return fmt.Errorf("function %d: unknown type %d", i, typ)
		}
	}
	if r.Left() != 0 {
		return errors.New("section size mismatch")
	}
	return nil
}

// newSection builds a type, import or global section holding only what the
// rewrite adds.
func (m *module) newSection(id byte, refuelType, nTypes uint32, types []byte) []byte {
	switch id {
	case secType:
		return append(wasmbin.AppendU32(nil, nTypes), types...)
	case secImport:
		return append([]byte{1}, refuelImport(refuelType)...)
	default:
		return append([]byte{1}, fuelGlobalEntry...)
	}
}

// fuelGlobalEntry is (mut i32) initialized to 0: the first check refuels.
var fuelGlobalEntry = []byte{valI32, 1, opI32Const, 0, opEnd}

func refuelImport(typ uint32) []byte {
	b := wasmbin.AppendName(nil, ImportModule)
	b = wasmbin.AppendName(b, ImportName)
	return wasmbin.AppendU32(append(b, kindFunc), typ)
}

// recount adds k to a vector's count and appends extra entries after the
// existing ones.
func recount(content []byte, k uint32, extra []byte) ([]byte, error) {
	if k == 0 {
		return content, nil
	}
	r := wasmbin.NewReader(content)
	n, err := r.U32()
	if err != nil {
		return nil, err
	}
	b := wasmbin.AppendU32(nil, n+k)
	b = append(b, content[r.Pos:]...)
	return append(b, extra...), nil
}

func (m *module) globals(content []byte, consts *exprRewriter) ([]byte, error) {
	r := wasmbin.NewReader(content)
	n, err := r.VecLen(3)
	if err != nil {
		return nil, err
	}
	out := wasmbin.AppendU32(nil, n+1)
	for i := uint32(0); i < n; i++ {
		typ, err := r.Bytes(2)
		if err != nil {
			return nil, err
		}
		out = append(out, typ...)
		if out, err = consts.rewrite(r, out, -1); err != nil {
			return nil, fmt.Errorf("global %d: %w", i, err)
		}
	}
	if r.Left() != 0 {
		return nil, errors.New("section size mismatch")
	}
	return append(out, fuelGlobalEntry...), nil
}

func (m *module) exports(content []byte) ([]byte, error) {
	r := wasmbin.NewReader(content)
	n, err := r.VecLen(3)
	if err != nil {
		return nil, err
	}
	out := wasmbin.AppendU32(nil, n)
	for i := uint32(0); i < n; i++ {
		name, err := r.Name()
		if err != nil {
			return nil, err
		}
		kind, err := r.Byte()
		if err != nil {
			return nil, err
		}
		idx, err := r.U32()
		if err != nil {
			return nil, err
		}
		switch {
		case kind == kindFunc:
			idx = m.shift(idx)
		case kind == kindGlob && idx >= m.importedGlobals+m.definedGlobals:
			return nil, fmt.Errorf("export %q: unknown global %d", name, idx)
		}
		out = wasmbin.AppendU32(append(wasmbin.AppendName(out, name), kind), idx)
	}
	if r.Left() != 0 {
		return nil, errors.New("section size mismatch")
	}
	return out, nil
}

// elements rewrites the element section's eight segment forms.
func (m *module) elements(content []byte, consts *exprRewriter) ([]byte, error) {
	r := wasmbin.NewReader(content)
	n, err := r.VecLen(1)
	if err != nil {
		return nil, err
	}
	out := wasmbin.AppendU32(nil, n)
	for i := uint32(0); i < n; i++ {
		flags, err := r.U32()
		if err != nil {
			return nil, err
		}
		if flags > 7 {
			return nil, fmt.Errorf("element segment %d: invalid flags %d", i, flags)
		}
		out = wasmbin.AppendU32(out, flags)
		if flags == 2 || flags == 6 { // explicit table index
			t, err := r.U32()
			if err != nil {
				return nil, err
			}
			out = wasmbin.AppendU32(out, t)
		}
		if flags&1 == 0 { // active: offset expression
			if out, err = consts.rewrite(r, out, -1); err != nil {
				return nil, fmt.Errorf("element segment %d offset: %w", i, err)
			}
		}
		if flags&3 != 0 { // element kind (0x00) or reference type
			k, err := r.Byte()
			if err != nil {
				return nil, err
			}
			out = append(out, k)
		}
		cnt, err := r.VecLen(1)
		if err != nil {
			return nil, err
		}
		out = wasmbin.AppendU32(out, cnt)
		for j := uint32(0); j < cnt; j++ {
			if flags&4 == 0 {
				f, err := r.U32()
				if err != nil {
					return nil, err
				}
				out = wasmbin.AppendU32(out, m.shift(f))
				continue
			}
			if out, err = consts.rewrite(r, out, -1); err != nil {
				return nil, fmt.Errorf("element segment %d item %d: %w", i, j, err)
			}
		}
	}
	if r.Left() != 0 {
		return nil, errors.New("section size mismatch")
	}
	return out, nil
}

func (m *module) code(content []byte, x *exprRewriter) ([]byte, error) {
	r := wasmbin.NewReader(content)
	n, err := r.VecLen(1)
	if err != nil {
		return nil, err
	}
	out := wasmbin.AppendU32(nil, n)
	var body []byte
	for i := uint32(0); i < n; i++ {
		size, err := r.U32()
		if err != nil {
			return nil, err
		}
		if uint64(size) > uint64(r.Left()) {
			return nil, fmt.Errorf("function body %d: %w", i, wasmbin.ErrTruncated)
		}
		end := r.Pos + int(size)
		br := &wasmbin.Reader{B: r.B, Pos: r.Pos, End: end}
		groups, err := br.VecLen(2)
		if err != nil {
			return nil, fmt.Errorf("function body %d locals: %w", i, err)
		}
		for g := uint32(0); g < groups; g++ {
			if _, err := br.U32(); err != nil {
				return nil, err
			}
			if _, err := br.Byte(); err != nil {
				return nil, err
			}
		}
		body = append(body[:0], r.B[r.Pos:br.Pos]...)
		body = append(body, x.check...)
		if body, err = x.rewrite(br, body, end); err != nil {
			return nil, fmt.Errorf("function body %d: %w", i, err)
		}
		out = wasmbin.AppendU32(out, uint32(len(body)))
		out = append(out, body...)
		r.Pos = end
	}
	if r.Left() != 0 {
		return nil, errors.New("section size mismatch")
	}
	return out, nil
}

// bulkChunk is the most memory.fill and memory.copy move between two
// charges: each chunk of a longer one is charged (and, since it costs more
// than refuelAmount units, checks the deadline) before it runs. A 64 MiB
// fill of memory never touched took 25-50 ms here in one piece.
const bulkChunk = 1 << 20

// Opcodes of the helpers' code.
var (
	memFill = []byte{prefixMisc, 11, 0}
	memCopy = []byte{prefixMisc, 10, 0, 0}
)

// inBounds pushes whether [local a, local a + local n) lies in memory:
// (u64) a + n <= memory.size << 16.
func inBounds(b []byte, a, n byte) []byte {
	b = append(b, opLocalGet, a, opI64ExtendI32U, opLocalGet, n, opI64ExtendI32U, opI64Add)
	return append(b, opMemorySize, 0, opI64ExtendI32U, opI64Const, 16, opI64Shl, opI64LeU)
}

// fillBody is $fill (d, v, n): memory.fill in chunks of bulkChunk, each
// charged first. A fill that is out of bounds is left to memory.fill
// itself, which traps before it writes anything, as the specification
// says; one in bounds writes the same bytes in pieces.
func fillBody(charge uint32) []byte {
	b := []byte{0}
	b = inBounds(b, 0, 2)
	b = append(b, opI32Eqz, opIf, blockTypeEmpty, opLocalGet, 0, opLocalGet, 1, opLocalGet, 2)
	b = append(append(b, memFill...), opReturn, opEnd)
	b = append(b, opBlock, blockTypeEmpty, opLoop, blockTypeEmpty)
	b = sconst(append(b, opLocalGet, 2), bulkChunk)
	b = append(b, opI32LeU, opBrIf, 1)
	b = wasmbin.AppendU32(append(sconst(b, bulkChunk), opCall), charge)
	b = append(b, opDrop, opLocalGet, 0, opLocalGet, 1)
	b = append(sconst(b, bulkChunk), memFill...)
	b = append(sconst(append(b, opLocalGet, 0), bulkChunk), opI32Add, opLocalSet, 0)
	b = append(sconst(append(b, opLocalGet, 2), bulkChunk), opI32Sub, opLocalSet, 2)
	b = append(b, opBr, 0, opEnd, opEnd)
	b = append(b, opLocalGet, 0, opLocalGet, 1, opLocalGet, 2)
	b = wasmbin.AppendU32(append(b, opCall), charge)
	return append(append(b, memFill...), opEnd)
}

// copyBody is $copy (d, s, n): memory.copy in chunks of bulkChunk, each
// charged first, low chunks first when d <= s and high chunks first
// otherwise, so that overlapping ranges copy as one memory.copy would.
func copyBody(charge uint32) []byte {
	b := []byte{0}
	b = inBounds(b, 0, 2)
	b = inBounds(b, 1, 2)
	b = append(b, opI32And, opI32Eqz, opIf, blockTypeEmpty, opLocalGet, 0, opLocalGet, 1, opLocalGet, 2)
	b = append(append(b, memCopy...), opReturn, opEnd)
	step := func(b []byte, forward bool) []byte {
		b = append(b, opBlock, blockTypeEmpty, opLoop, blockTypeEmpty)
		b = sconst(append(b, opLocalGet, 2), bulkChunk)
		b = append(b, opI32LeU, opBrIf, 1)
		b = append(sconst(append(b, opLocalGet, 2), bulkChunk), opI32Sub, opLocalSet, 2)
		b = wasmbin.AppendU32(append(sconst(b, bulkChunk), opCall), charge)
		b = append(b, opDrop)
		if forward {
			b = append(b, opLocalGet, 0, opLocalGet, 1)
			b = append(sconst(b, bulkChunk), memCopy...)
			b = append(sconst(append(b, opLocalGet, 0), bulkChunk), opI32Add, opLocalSet, 0)
			b = append(sconst(append(b, opLocalGet, 1), bulkChunk), opI32Add, opLocalSet, 1)
		} else {
			b = append(b, opLocalGet, 0, opLocalGet, 2, opI32Add, opLocalGet, 1, opLocalGet, 2, opI32Add)
			b = append(sconst(b, bulkChunk), memCopy...)
		}
		return append(b, opBr, 0, opEnd, opEnd)
	}
	b = append(b, opLocalGet, 0, opLocalGet, 1, opI32LeU, opIf, blockTypeEmpty)
	b = step(b, true)
	b = append(b, opElse)
	b = step(b, false)
	b = append(b, opEnd, opLocalGet, 0, opLocalGet, 1, opLocalGet, 2)
	b = wasmbin.AppendU32(append(b, opCall), charge)
	return append(append(b, memCopy...), opEnd)
}

// sconst appends i32.const v.
func sconst(b []byte, v int32) []byte { return AppendI32Const(b, v) }

// AppendI32Const appends the instruction i32.const v (its immediate a
// signed LEB128), for tests that build modules by hand.
func AppendI32Const(b []byte, v int32) []byte {
	b = append(b, opI32Const)
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// chargeBody is the code of $charge (i32 n) -> i32:
//
//	if (n >> bulkShift) <u fuel { fuel -= n >> bulkShift } else { fuel = refuel() }
//	return n
//
// A bulk instruction the fuel left cannot pay for checks the deadline
// first; the unpaid rest is forgiven, as a loop's units are between two
// checks.
func chargeBody(global, refuel uint32) []byte {
	cost := []byte{opLocalGet, 0, opI32Const, bulkShift, opI32ShrU}
	b := []byte{0} // no locals
	b = append(b, cost...)
	b = wasmbin.AppendU32(append(b, opGlobalGet), global)
	b = append(b, opI32LtU, opIf, blockTypeEmpty)
	b = wasmbin.AppendU32(append(b, opGlobalGet), global)
	b = append(b, cost...)
	b = wasmbin.AppendU32(append(b, opI32Sub, opGlobalSet), global)
	b = wasmbin.AppendU32(append(b, opElse, opCall), refuel)
	b = wasmbin.AppendU32(append(b, opGlobalSet), global)
	return append(b, opEnd, opLocalGet, 0, opEnd)
}

// names shifts the function indices of the name section's function (1),
// local (2) and label (3) subsections and copies the others.
func (m *module) names(content []byte) ([]byte, error) {
	r := wasmbin.NewReader(content)
	var out []byte
	for r.Left() > 0 {
		id, err := r.Byte()
		if err != nil {
			return nil, err
		}
		size, err := r.U32()
		if err != nil {
			return nil, err
		}
		sub, err := r.Bytes(uint64(size))
		if err != nil {
			return nil, err
		}
		if id >= 1 && id <= 3 {
			if sub, err = m.nameMap(sub, id != 1); err != nil {
				return nil, err
			}
		}
		out = wasmbin.AppendU32(append(out, id), uint32(len(sub)))
		out = append(out, sub...)
	}
	return out, nil
}

// nameMap shifts the function indices of a name map, or of an indirect name
// map (per function, a name map of locals or labels) when indirect.
func (m *module) nameMap(content []byte, indirect bool) ([]byte, error) {
	r := wasmbin.NewReader(content)
	n, err := r.VecLen(2)
	if err != nil {
		return nil, err
	}
	out := wasmbin.AppendU32(nil, n)
	for i := uint32(0); i < n; i++ {
		f, err := r.U32()
		if err != nil {
			return nil, err
		}
		out = wasmbin.AppendU32(out, m.shift(f))
		start := r.Pos
		if indirect {
			k, err := r.VecLen(2)
			if err != nil {
				return nil, err
			}
			for j := uint32(0); j < k; j++ {
				if _, err := r.U32(); err != nil {
					return nil, err
				}
				if _, err := r.Name(); err != nil {
					return nil, err
				}
			}
		} else if _, err := r.Name(); err != nil {
			return nil, err
		}
		out = append(out, r.B[start:r.Pos]...)
	}
	if r.Left() != 0 {
		return nil, errors.New("name map size mismatch")
	}
	return out, nil
}
