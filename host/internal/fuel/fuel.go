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

// StackImportName is the second import the rewriter adds, of type
// (i32) -> i32, right after refuel: the stack check (see Instrument).
const StackImportName = "stack"

// StackExport is the name the stack room's global is exported under, so
// that the host sets the room each call starts with (a call the host ends
// leaves it wherever it was, and the stack check's grants raise it). A
// module that exports anything under this name is refused (ErrReserved).
const StackExport = ImportModule + ".stack"

// StackCapExport is the name the room's cap is exported under: the host
// sets it with the room as each call starts.
const StackCapExport = ImportModule + ".stackcap"

// addedImports is how many function imports the rewrite adds (refuel and
// stack): every defined function's index grows by it.
const addedImports = 2

// ErrReserved is returned for a module that imports from ImportModule.
var ErrReserved = fmt.Errorf("module imports from %q, which is reserved for the host's instrumentation", ImportModule)

// ErrReservedExport is returned for a module that exports StackExport.
var ErrReservedExport = fmt.Errorf("module exports %q or %q, names reserved for the host's instrumentation", StackExport, StackCapExport)

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
	// typeParams is each type's parameter count and funcTypes each
	// defined function's type: the index a function body's first added
	// local gets is its parameters plus its declared locals. typeResults
	// are each type's result types, importTypes each imported function's
	// type (the stack check's weights and wrapper blocks).
	typeParams  []uint32
	funcTypes   []uint32
	typeResults [][]byte
	importTypes []uint32
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
		return f + addedImports + 3
	}
	return f + addedImports
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
	if !m.hasChargeType {
		// (i32) -> i32: the stack import's type, and $charge's.
		chargeType = m.numTypes + nAdded
		added, nAdded = append(added, 0x60, 1, valI32, 1, valI32), nAdded+1
	}
	x := &exprRewriter{shift: m.shift, check: check(fuelGlobal, m.importedFuncs), types: m.numTypes, globals: fuelGlobal, fillBytes: smallFillBudget}
	x.stackGlobal, x.stackCheck = fuelGlobal+1, m.importedFuncs+1
	// Wrapper blocks of functions with more than one result and
	// parameters need a type () -> results: they are added after the
	// types above, in the order the code first needs them.
	x.blockTypes = map[string]uint32{}
	x.newBlockType = func(results []byte) uint32 {
		t, ok := x.blockTypes[string(results)]
		if !ok {
			t = m.numTypes + nAdded
			x.blockTypes[string(results)] = t
			added = append(wasmbin.AppendU32(append(added, 0x60, 0), uint32(len(results))), results...)
			nAdded++
		}
		return t
	}
	if charge {
		// $charge, $fill and $copy follow the module's functions (and
		// the added imports).
		base := m.importedFuncs + addedImports + m.definedFuncs
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
	need := map[byte]bool{secImport: true, secGlobal: true, secExport: true}
	if nAdded > 0 {
		need[secType] = true
	}
	out := append([]byte(nil), "\x00asm\x01\x00\x00\x00"...)
	emitMissing := func(before byte) {
		for _, id := range []byte{secType, secImport, secGlobal, secExport} {
			if id < before && need[id] {
				out = wasmbin.AppendSection(out, id, m.newSection(id, refuelType, chargeType, nAdded, added))
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
			emitMissing(secExport + 1)
		}
		if s.id != secCustom {
			// Every section the rewrite may add (type, import, global,
			// export) has a smaller id than the sections that must
			// follow it.
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
			content, err = recount(s.content, addedImports, append(refuelImport(refuelType), stackImport(chargeType)...))
			need[secImport] = false
		case secGlobal:
			content, err = m.globals(s.content, consts)
			need[secGlobal] = false
		case secExport:
			content, err = m.exports(s.content)
			need[secExport] = false
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
				base := m.importedFuncs + addedImports + m.definedFuncs
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
	emitMissing(secExport + 1)
	shape.MaxDepth, shape.DepthSquares = x.maxDepth, x.depthSquares
	shape.MaxBrTable, shape.BrTableSquares = x.maxBrTable, x.brTableSquares
	return out, shape, nil
}
