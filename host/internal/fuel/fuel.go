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
	// refuelType is the index of a () -> i32 type (numTypes when absent).
	refuelType, numTypes uint32
	hasRefuelType        bool
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
func Instrument(wasm []byte) ([]byte, error) {
	m, err := parse(wasm)
	if err != nil {
		return nil, err
	}
	return m.rewrite()
}

func parse(wasm []byte) (*module, error) {
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], []byte("\x00asm")) || !bytes.Equal(wasm[4:8], []byte{1, 0, 0, 0}) {
		return nil, errors.New("not a WebAssembly 1.0 binary module (magic or version)")
	}
	r := &reader{b: wasm, pos: 8}
	m := &module{}
	for r.left() > 0 {
		id, err := r.byte()
		if err != nil {
			return nil, err
		}
		size, err := r.u32()
		if err != nil {
			return nil, err
		}
		content, err := r.bytes(uint64(size))
		if err != nil {
			return nil, fmt.Errorf("section %d: %w", id, err)
		}
		s := section{id: id, content: content}
		sr := &reader{b: content}
		switch id {
		case secCustom:
			if s.name, err = sr.name(); err != nil {
				return nil, fmt.Errorf("custom section name: %w", err)
			}
			s.content = content[sr.pos:]
		case secType:
			err = m.readTypes(sr)
		case secImport:
			err = m.readImports(sr)
		case secGlobal:
			m.definedGlobals, err = sr.u32()
		case 4, 5, secFunction, secExport, secStart, secElement, secCode, secData, secDataCnt:
		default:
			return nil, fmt.Errorf("unknown or unsupported section id %d", id)
		}
		if err == nil && (id == secType || id == secImport) && sr.left() != 0 {
			err = errors.New("section size mismatch") // the rewrite appends to these two
		}
		if err != nil {
			return nil, fmt.Errorf("section %d: %w", id, err)
		}
		m.sections = append(m.sections, s)
	}
	return m, nil
}

func (m *module) readTypes(r *reader) error {
	n, err := r.vecLen(3)
	if err != nil {
		return err
	}
	m.numTypes = n
	for i := uint32(0); i < n; i++ {
		form, err := r.byte()
		if err != nil {
			return err
		}
		if form != 0x60 {
			return fmt.Errorf("type %d: form 0x%x is not a function type", i, form)
		}
		np, err := r.vecLen(1)
		if err != nil {
			return err
		}
		if _, err := r.bytes(uint64(np)); err != nil {
			return err
		}
		nr, err := r.vecLen(1)
		if err != nil {
			return err
		}
		res, err := r.bytes(uint64(nr))
		if err != nil {
			return err
		}
		if !m.hasRefuelType && np == 0 && nr == 1 && res[0] == valI32 {
			m.refuelType, m.hasRefuelType = i, true
		}
	}
	return nil
}

func (m *module) readImports(r *reader) error {
	n, err := r.vecLen(4)
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		mod, err := r.name()
		if err != nil {
			return err
		}
		if mod == ImportModule {
			return ErrReserved
		}
		if _, err := r.name(); err != nil {
			return err
		}
		kind, err := r.byte()
		if err != nil {
			return err
		}
		switch kind {
		case kindFunc:
			m.importedFuncs++
			var typ uint32
			if typ, err = r.u32(); err == nil && typ >= m.numTypes {
				err = fmt.Errorf("import %d: unknown type %d", i, typ)
			}
		case kindTable:
			if _, err = r.byte(); err == nil {
				err = r.limits()
			}
		case kindMem:
			err = r.limits()
		case kindGlob:
			m.importedGlobals++
			_, err = r.bytes(2)
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
	if f >= m.importedFuncs {
		return f + 1
	}
	return f
}

// check returns the fuel check for a global index.
func check(global, refuel uint32) []byte {
	c := []byte{opGlobalGet}
	c = appendU32(c, global)
	c = append(c, opI32Eqz, opIf, blockTypeEmpty, opCall)
	c = appendU32(c, refuel)
	c = append(c, opGlobalSet)
	c = appendU32(c, global)
	c = append(c, opEnd, opGlobalGet)
	c = appendU32(c, global)
	c = append(c, opI32Const, 1, opI32Sub, opGlobalSet)
	return appendU32(c, global)
}

func (m *module) rewrite() ([]byte, error) {
	fuelGlobal := m.importedGlobals + m.definedGlobals
	refuelType := m.refuelType
	if !m.hasRefuelType {
		refuelType = m.numTypes
	}
	x := &exprRewriter{shift: m.shift, check: check(fuelGlobal, m.importedFuncs), types: m.numTypes, globals: fuelGlobal}
	consts := &exprRewriter{shift: m.shift, types: m.numTypes, globals: fuelGlobal}

	// Sections the module lacks but the rewrite needs are inserted where
	// their id orders them.
	need := map[byte]bool{secImport: true, secGlobal: true}
	if !m.hasRefuelType {
		need[secType] = true
	}
	out := append([]byte(nil), "\x00asm\x01\x00\x00\x00"...)
	emitMissing := func(before byte) {
		for _, id := range []byte{secType, secImport, secGlobal} {
			if id < before && need[id] {
				out = appendSection(out, id, m.newSection(id, refuelType))
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
			b := appendName(nil, s.name)
			out = appendSection(out, secCustom, append(b, content...))
			continue
		case secType:
			content, err = m.appendType(s.content, refuelType)
			need[secType] = false
		case secImport:
			content, err = m.appendImport(s.content, refuelType)
			need[secImport] = false
		case secGlobal:
			content, err = m.globals(s.content, consts)
			need[secGlobal] = false
		case secExport:
			content, err = m.exports(s.content)
		case secStart:
			r := &reader{b: s.content}
			var f uint32
			if f, err = r.u32(); err == nil {
				content = appendU32(nil, m.shift(f))
			}
		case secElement:
			content, err = m.elements(s.content, consts)
		case secCode:
			content, err = m.code(s.content, x)
		case secFunction:
			content, err = s.content, m.checkFunctionTypes(s.content)
		default:
			content = s.content
		}
		if err != nil {
			return nil, fmt.Errorf("section %d: %w", s.id, err)
		}
		out = appendSection(out, s.id, content)
	}
	emitMissing(secGlobal + 1)
	return out, nil
}

// checkFunctionTypes refuses a function whose type does not exist (the
// rewrite may add a type at the first missing index).
func (m *module) checkFunctionTypes(content []byte) error {
	r := &reader{b: content}
	n, err := r.vecLen(1)
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		typ, err := r.u32()
		if err != nil {
			return err
		}
		if typ >= m.numTypes {
			return fmt.Errorf("function %d: unknown type %d", i, typ)
		}
	}
	if r.left() != 0 {
		return errors.New("section size mismatch")
	}
	return nil
}

// newSection builds a type, import or global section holding only what the
// rewrite adds.
func (m *module) newSection(id byte, refuelType uint32) []byte {
	switch id {
	case secType:
		return []byte{1, 0x60, 0, 1, valI32}
	case secImport:
		return append([]byte{1}, refuelImport(refuelType)...)
	default:
		return append([]byte{1}, fuelGlobalEntry...)
	}
}

// fuelGlobalEntry is (mut i32) initialized to 0: the first check refuels.
var fuelGlobalEntry = []byte{valI32, 1, opI32Const, 0, opEnd}

func refuelImport(typ uint32) []byte {
	b := appendName(nil, ImportModule)
	b = appendName(b, ImportName)
	return appendU32(append(b, kindFunc), typ)
}

// recount rewrites a vector's count and appends extra entries after the
// existing ones.
func recount(content []byte, extra []byte) ([]byte, error) {
	r := &reader{b: content}
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	b := appendU32(nil, n+1)
	b = append(b, content[r.pos:]...)
	return append(b, extra...), nil
}

func (m *module) appendType(content []byte, refuelType uint32) ([]byte, error) {
	if m.hasRefuelType {
		return content, nil
	}
	return recount(content, []byte{0x60, 0, 1, valI32})
}

func (m *module) appendImport(content []byte, refuelType uint32) ([]byte, error) {
	return recount(content, refuelImport(refuelType))
}

func (m *module) globals(content []byte, consts *exprRewriter) ([]byte, error) {
	r := &reader{b: content}
	n, err := r.vecLen(3)
	if err != nil {
		return nil, err
	}
	out := appendU32(nil, n+1)
	for i := uint32(0); i < n; i++ {
		typ, err := r.bytes(2)
		if err != nil {
			return nil, err
		}
		out = append(out, typ...)
		if out, err = consts.rewrite(r, out, -1); err != nil {
			return nil, fmt.Errorf("global %d: %w", i, err)
		}
	}
	if r.left() != 0 {
		return nil, errors.New("section size mismatch")
	}
	return append(out, fuelGlobalEntry...), nil
}

func (m *module) exports(content []byte) ([]byte, error) {
	r := &reader{b: content}
	n, err := r.vecLen(3)
	if err != nil {
		return nil, err
	}
	out := appendU32(nil, n)
	for i := uint32(0); i < n; i++ {
		name, err := r.name()
		if err != nil {
			return nil, err
		}
		kind, err := r.byte()
		if err != nil {
			return nil, err
		}
		idx, err := r.u32()
		if err != nil {
			return nil, err
		}
		switch {
		case kind == kindFunc:
			idx = m.shift(idx)
		case kind == kindGlob && idx >= m.importedGlobals+m.definedGlobals:
			return nil, fmt.Errorf("export %q: unknown global %d", name, idx)
		}
		out = appendU32(append(appendName(out, name), kind), idx)
	}
	if r.left() != 0 {
		return nil, errors.New("section size mismatch")
	}
	return out, nil
}

// elements rewrites the element section's eight segment forms.
func (m *module) elements(content []byte, consts *exprRewriter) ([]byte, error) {
	r := &reader{b: content}
	n, err := r.vecLen(1)
	if err != nil {
		return nil, err
	}
	out := appendU32(nil, n)
	for i := uint32(0); i < n; i++ {
		flags, err := r.u32()
		if err != nil {
			return nil, err
		}
		if flags > 7 {
			return nil, fmt.Errorf("element segment %d: invalid flags %d", i, flags)
		}
		out = appendU32(out, flags)
		if flags == 2 || flags == 6 { // explicit table index
			t, err := r.u32()
			if err != nil {
				return nil, err
			}
			out = appendU32(out, t)
		}
		if flags&1 == 0 { // active: offset expression
			if out, err = consts.rewrite(r, out, -1); err != nil {
				return nil, fmt.Errorf("element segment %d offset: %w", i, err)
			}
		}
		if flags&3 != 0 { // element kind (0x00) or reference type
			k, err := r.byte()
			if err != nil {
				return nil, err
			}
			out = append(out, k)
		}
		cnt, err := r.vecLen(1)
		if err != nil {
			return nil, err
		}
		out = appendU32(out, cnt)
		for j := uint32(0); j < cnt; j++ {
			if flags&4 == 0 {
				f, err := r.u32()
				if err != nil {
					return nil, err
				}
				out = appendU32(out, m.shift(f))
				continue
			}
			if out, err = consts.rewrite(r, out, -1); err != nil {
				return nil, fmt.Errorf("element segment %d item %d: %w", i, j, err)
			}
		}
	}
	if r.left() != 0 {
		return nil, errors.New("section size mismatch")
	}
	return out, nil
}

func (m *module) code(content []byte, x *exprRewriter) ([]byte, error) {
	r := &reader{b: content}
	n, err := r.vecLen(1)
	if err != nil {
		return nil, err
	}
	out := appendU32(nil, n)
	var body []byte
	for i := uint32(0); i < n; i++ {
		size, err := r.u32()
		if err != nil {
			return nil, err
		}
		if uint64(size) > uint64(r.left()) {
			return nil, fmt.Errorf("function body %d: %w", i, errTruncated)
		}
		end := r.pos + int(size)
		br := &reader{b: r.b[:end], pos: r.pos}
		groups, err := br.vecLen(2)
		if err != nil {
			return nil, fmt.Errorf("function body %d locals: %w", i, err)
		}
		for g := uint32(0); g < groups; g++ {
			if _, err := br.u32(); err != nil {
				return nil, err
			}
			if _, err := br.byte(); err != nil {
				return nil, err
			}
		}
		body = append(body[:0], r.b[r.pos:br.pos]...)
		body = append(body, x.check...)
		if body, err = x.rewrite(br, body, end); err != nil {
			return nil, fmt.Errorf("function body %d: %w", i, err)
		}
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
		r.pos = end
	}
	if r.left() != 0 {
		return nil, errors.New("section size mismatch")
	}
	return out, nil
}

// names shifts the function indices of the name section's function (1),
// local (2) and label (3) subsections and copies the others.
func (m *module) names(content []byte) ([]byte, error) {
	r := &reader{b: content}
	var out []byte
	for r.left() > 0 {
		id, err := r.byte()
		if err != nil {
			return nil, err
		}
		size, err := r.u32()
		if err != nil {
			return nil, err
		}
		sub, err := r.bytes(uint64(size))
		if err != nil {
			return nil, err
		}
		if id >= 1 && id <= 3 {
			if sub, err = m.nameMap(sub, id != 1); err != nil {
				return nil, err
			}
		}
		out = appendU32(append(out, id), uint32(len(sub)))
		out = append(out, sub...)
	}
	return out, nil
}

// nameMap shifts the function indices of a name map, or of an indirect name
// map (per function, a name map of locals or labels) when indirect.
func (m *module) nameMap(content []byte, indirect bool) ([]byte, error) {
	r := &reader{b: content}
	n, err := r.vecLen(2)
	if err != nil {
		return nil, err
	}
	out := appendU32(nil, n)
	for i := uint32(0); i < n; i++ {
		f, err := r.u32()
		if err != nil {
			return nil, err
		}
		out = appendU32(out, m.shift(f))
		start := r.pos
		if indirect {
			k, err := r.vecLen(2)
			if err != nil {
				return nil, err
			}
			for j := uint32(0); j < k; j++ {
				if _, err := r.u32(); err != nil {
					return nil, err
				}
				if _, err := r.name(); err != nil {
					return nil, err
				}
			}
		} else if _, err := r.name(); err != nil {
			return nil, err
		}
		out = append(out, r.b[start:r.pos]...)
	}
	if r.left() != 0 {
		return nil, errors.New("name map size mismatch")
	}
	return out, nil
}
