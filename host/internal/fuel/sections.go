package fuel

import (
	"errors"
	"fmt"
	"github.com/wasmsched/wasmsched/host/internal/wasmbin"
)

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
func (m *module) newSection(id byte, refuelType, stackType, nTypes uint32, types []byte) []byte {
	switch id {
	case secType:
		return append(wasmbin.AppendU32(nil, nTypes), types...)
	case secImport:
		return append(append([]byte{addedImports}, refuelImport(refuelType)...), stackImport(stackType)...)
	case secExport:
		return append([]byte{2}, m.stackExport()...)
	default:
		return append([]byte{addedGlobalCount}, addedGlobals...)
	}
}

// addedGlobals are the fuel, (mut i32) initialized to 0 so that the
// first check refuels, and the stack room and its cap, (mut i32)
// initialized to StackStart.
var addedGlobals = func() []byte {
	b := []byte{valI32, 1, opI32Const, 0, opEnd}
	for range 2 {
		b = append(AppendI32Const(append(b, valI32, 1), StackStart/StackUnit), opEnd)
	}
	return b
}()

// addedGlobalCount is how many globals the rewrite adds (addedGlobals).
const addedGlobalCount = 3

// stackExport is the exports of the stack room's global and its cap's
// (StackExport, StackCapExport).
func (m *module) stackExport() []byte {
	room := m.importedGlobals + m.definedGlobals + 1
	b := wasmbin.AppendU32(append(wasmbin.AppendName(nil, StackExport), kindGlob), room)
	return wasmbin.AppendU32(append(wasmbin.AppendName(b, StackCapExport), kindGlob), room+1)
}

func stackImport(typ uint32) []byte {
	b := wasmbin.AppendName(nil, ImportModule)
	b = wasmbin.AppendName(b, StackImportName)
	return wasmbin.AppendU32(append(b, kindFunc), typ)
}

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
	out := wasmbin.AppendU32(nil, n+addedGlobalCount)
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
	return append(out, addedGlobals...), nil
}

func (m *module) exports(content []byte) ([]byte, error) {
	r := wasmbin.NewReader(content)
	n, err := r.VecLen(3)
	if err != nil {
		return nil, err
	}
	out := wasmbin.AppendU32(nil, n+2)
	for i := uint32(0); i < n; i++ {
		name, err := r.Name()
		if err != nil {
			return nil, err
		}
		if name == StackExport || name == StackCapExport {
			return nil, ErrReservedExport
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
	return append(out, m.stackExport()...), nil
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
		groupsStart := br.Pos
		locals := uint64(0)
		for g := uint32(0); g < groups; g++ {
			n, err := br.U32()
			if err != nil {
				return nil, err
			}
			if _, err := br.Byte(); err != nil {
				return nil, err
			}
			locals += uint64(n)
		}
		// The scratch local smallFill may use: one i32 after the body's
		// own, when the function's type is known and the count stays
		// far from any runtime's limit.
		x.tmpOK, x.usedTmp = false, false
		if int(i) < len(m.funcTypes) && int(m.funcTypes[i]) < len(m.typeParams) {
			if all := uint64(m.typeParams[m.funcTypes[i]]) + locals; all < maxLocalsForScratch {
				x.tmp, x.tmpOK = uint32(all), true
			}
		}
		localsEnd := br.Pos
		body = append(body[:0], r.B[r.Pos:localsEnd]...)
		// A body that calls gets the stack check: its weight taken at
		// entry, then its code in a block of the function's results,
		// which every branch to the function's own label now leaves,
		// then its weight given back (and before each return and tail
		// call).
		x.epilogue = nil
		if int(i) < len(m.funcTypes) && int(m.funcTypes[i]) < len(m.typeParams) {
			t := m.funcTypes[i]
			st := m.scanBody(*br, *x)
			est := FrameEstimate(uint64(m.typeParams[t]), locals, st.instrs, st.slots)
			if st.calls || est >= leafWeight {
				w := weight(uint64(m.typeParams[t]), locals, st.instrs, st.slots)
				body = stackPrologue(body, x.stackGlobal, x.stackGlobal+1, x.stackCheck, w)
				body = append(body, opBlock)
				body = append(body, m.wrapperBlockType(t, x)...)
				x.epilogue = stackEpilogue(x.stackGlobal, x.stackGlobal+1, w)
			}
		}
		if !entersLoop(*br) {
			body = append(body, x.check...)
		}
		if body, err = x.rewrite(br, body, end); err != nil {
			return nil, fmt.Errorf("function body %d: %w", i, err)
		}
		if x.epilogue != nil {
			body = append(append(body, x.epilogue...), opEnd)
		}
		if x.usedTmp {
			// The same locals and one i32 more, then the code.
			code := body[localsEnd-r.Pos:]
			with := wasmbin.AppendU32(nil, groups+1)
			with = append(with, r.B[groupsStart:localsEnd]...)
			with = append(with, 1, valI32)
			body = append(with, code...)
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

// entersLoop reports whether a function body, read from r, reaches a loop
// header on every entry before it can do anything else: only block,
// nop, local and global reads and writes and i32.const come first. The
// check after that loop's header then runs on every call, and the one at
// the function's entry would run right before it for nothing. Every
// function of a Go (GOOS=wasip1) module starts this way (its resumption
// loop), so this halves the checks a Go guest's calls run.
func entersLoop(r wasmbin.Reader) bool {
	for range 64 {
		op, err := r.Byte()
		if err != nil {
			return false
		}
		switch op {
		case opLoop:
			return true
		case opBlock:
			_, err = r.SLEB(33)
		case opLocalGet, opLocalSet, opLocalTee, opGlobalGet:
			_, err = r.U32()
		case opI32Const:
			_, err = r.SLEB(32)
		case opNop:
		default:
			return false
		}
		if err != nil {
			return false
		}
	}
	return false
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
