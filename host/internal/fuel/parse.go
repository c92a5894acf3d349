package fuel

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/wasmsched/wasmsched/host/internal/wasmbin"
)

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
			err = m.readFunctions(sr)
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
		m.typeParams = append(m.typeParams, np)
		m.typeResults = append(m.typeResults, res)
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

// readFunctions reads the function section: how many functions the module
// defines and, when the section lists them all, the type of each (the
// index of a body's first added local is its parameters plus its declared
// locals, smallFill). A section that does not is left for the runtime to
// refuse, as before: its functions get no added local.
func (m *module) readFunctions(r *wasmbin.Reader) error {
	n, err := r.U32()
	if err != nil {
		return err
	}
	m.definedFuncs = n
	if uint64(n) > uint64(r.Left()) {
		return nil
	}
	types := make([]uint32, n)
	for i := range types {
		if types[i], err = r.U32(); err != nil {
			return nil
		}
	}
	m.funcTypes = types
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
			m.importTypes = append(m.importTypes, typ)
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
