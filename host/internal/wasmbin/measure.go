package wasmbin

import "fmt"

// MaxLocalsPerFunction bounds the locals one function body may declare.
// Go and TinyGo guests declare a few hundred at most; wazero itself allows
// up to 2^32 and reserves room for all of them before compiling.
const MaxLocalsPerFunction = 1 << 20

// Shape is what a module asks the compiler to compile, and what it
// declares: the counts the host's compile and declaration limits bound.
type Shape struct {
	Functions, BodyBytes, Locals            uint64
	Imports, Types, Exports, Globals        uint64
	DataSegments, ElemSegments, ElemEntries uint64
}

// Measure walks a module's binary structure and rejects any vector, name
// or byte string whose declared length cannot fit in the bytes that follow
// it, and any function declaring more than MaxLocalsPerFunction locals; it
// returns what the module declares and asks the compiler to compile.
// Every element of those vectors takes at least one byte, so "count <=
// bytes left" is a sound bound that never rejects a well-formed module.
// Malformed structure a decoder would reject anyway is reported with its
// offset.
func Measure(wasm []byte) (Shape, error) {
	var size Shape
	r := &walker{Reader: Reader{B: wasm, Pos: 8, End: len(wasm)}, size: &size}
	for r.Pos < r.End {
		id, s, err := r.sized("section")
		if err != nil {
			return size, err
		}
		if err := s.section(id); err != nil {
			return size, fmt.Errorf("section %d: %w", id, err)
		}
	}
	return size, nil
}

// walker reads a module for Measure; size accumulates what it reads.
type walker struct {
	Reader
	size *Shape
}

// sized is Reader.Sized keeping size.
func (r *walker) sized(what string) (byte, *walker, error) {
	id, s, err := r.Sized(what)
	if err != nil {
		return 0, nil, err
	}
	return id, &walker{Reader: *s, size: r.size}, nil
}

func (r *walker) section(id byte) error {
	switch id {
	case 0: // custom
		n, err := r.Count("custom section name", 1)
		if err != nil {
			return err
		}
		name := string(r.B[r.Pos : r.Pos+int(n)])
		r.Pos += int(n)
		if name == "name" {
			return r.nameSection()
		}
		return nil
	case 1: // type
		n, err := r.Count("type section", 3)
		if r.size != nil {
			r.size.Types += uint64(n)
		}
		for i := uint32(0); err == nil && i < n; i++ {
			if _, err = r.Byte(); err == nil {
				if err = r.ValTypes("parameter types"); err == nil {
					err = r.ValTypes("result types")
				}
			}
		}
		return err
	case 2: // import
		n, err := r.Count("import section", 4)
		if r.size != nil {
			r.size.Imports += uint64(n)
		}
		for i := uint32(0); err == nil && i < n; i++ {
			if err = r.BytesVec("import module name"); err != nil {
				break
			}
			if err = r.BytesVec("import name"); err != nil {
				break
			}
			var kind byte
			if kind, err = r.Byte(); err != nil {
				break
			}
			switch kind {
			case 0: // func
				_, err = r.U32()
			case 1: // table
				if err = r.ValType(); err == nil {
					err = r.Limits()
				}
			case 2: // memory
				err = r.Limits()
			case 3: // global
				if err = r.ValType(); err == nil {
					err = r.Skip(1)
				}
			case 4: // tag
				if _, err = r.Byte(); err == nil {
					_, err = r.U32()
				}
			default:
				err = r.Errorf("unknown import kind %d", kind)
			}
		}
		return err
	case 3, 4, 5, 13: // function, table, memory, tag: fixed-size entries
		_, err := r.Count("vector", 1)
		return err
	case 6: // global
		n, err := r.Count("global section", 3)
		if r.size != nil {
			r.size.Globals += uint64(n)
		}
		for i := uint32(0); err == nil && i < n; i++ {
			if err = r.ValType(); err == nil {
				if err = r.Skip(1); err == nil {
					err = r.ConstExpr()
				}
			}
		}
		return err
	case 7: // export
		n, err := r.Count("export section", 3)
		if r.size != nil {
			r.size.Exports += uint64(n)
		}
		for i := uint32(0); err == nil && i < n; i++ {
			if err = r.BytesVec("export name"); err == nil {
				if err = r.Skip(1); err == nil {
					_, err = r.U32()
				}
			}
		}
		return err
	case 9: // element
		return r.elements()
	case 10: // code
		n, err := r.Count("code section", 2)
		for i := uint32(0); err == nil && i < n; i++ {
			var size uint32
			if size, err = r.U32(); err != nil {
				break
			}
			if int(size) > r.Left() {
				return r.Errorf("function body %d declares %d bytes, %d are left", i, size, r.Left())
			}
			body := &walker{Reader: Reader{B: r.B, Pos: r.Pos, End: r.Pos + int(size)}, size: r.size}
			if err = body.locals(i); err != nil {
				break
			}
			r.Pos = body.End
			if r.size != nil {
				r.size.Functions++
				r.size.BodyBytes += uint64(size)
			}
		}
		return err
	case 11: // data
		n, err := r.Count("data section", 2)
		if r.size != nil {
			r.size.DataSegments += uint64(n)
		}
		for i := uint32(0); err == nil && i < n; i++ {
			var flags uint32
			if flags, err = r.U32(); err != nil {
				break
			}
			if flags == 2 {
				_, err = r.U32()
			}
			if err == nil && flags != 1 {
				err = r.ConstExpr()
			}
			if err == nil {
				err = r.BytesVec("data segment")
			}
		}
		return err
	}
	return nil // start, data count: fixed size
}

func (r *walker) locals(fn uint32) error {
	groups, err := r.Count("local declarations", 2)
	var total uint64
	for j := uint32(0); err == nil && j < groups; j++ {
		var n uint32
		if n, err = r.U32(); err != nil {
			break
		}
		if total += uint64(n); total > MaxLocalsPerFunction {
			return r.Errorf("function %d declares more than %d locals", fn, MaxLocalsPerFunction)
		}
		if r.size != nil {
			r.size.Locals += uint64(n)
		}
		var t byte
		if t, err = r.Byte(); err == nil && (t == 0x63 || t == 0x64) {
			_, err = r.SLEB(33) // reference type with a heap type
		}
	}
	return err
}

func (r *walker) elements() error {
	n, err := r.Count("element section", 2)
	if r.size != nil {
		r.size.ElemSegments += uint64(n)
	}
	for i := uint32(0); err == nil && i < n; i++ {
		var flags uint32
		if flags, err = r.U32(); err != nil {
			return err
		}
		if flags > 7 {
			return r.Errorf("element segment %d has flags %d", i, flags)
		}
		if flags == 2 || flags == 6 { // table index
			if _, err = r.U32(); err != nil {
				return err
			}
		}
		if flags&1 == 0 { // active: offset expression
			if err = r.ConstExpr(); err != nil {
				return err
			}
		}
		if flags&3 != 0 { // element kind or reference type
			if err = r.ValType(); err != nil {
				return err
			}
		}
		var m uint32
		if flags&4 == 0 { // function indices
			if m, err = r.Count("element function indices", 1); err != nil {
				return err
			}
			if r.size != nil {
				r.size.ElemEntries += uint64(m)
			}
			for k := uint32(0); k < m && err == nil; k++ {
				_, err = r.U32()
			}
		} else { // expressions
			if m, err = r.Count("element expressions", 2); err != nil {
				return err
			}
			if r.size != nil {
				r.size.ElemEntries += uint64(m)
			}
			for k := uint32(0); k < m && err == nil; k++ {
				err = r.ConstExpr()
			}
		}
	}
	return err
}

// nameSection checks the function and local name maps wazero decodes.
func (r *walker) nameSection() error {
	for r.Pos < r.End {
		id, sub, err := r.sized("name subsection")
		if err != nil {
			return err
		}
		switch id {
		case 1:
			err = sub.nameMap("function names")
		case 2:
			var n uint32
			n, err = sub.Count("local names", 2)
			for i := uint32(0); err == nil && i < n; i++ {
				if _, err = sub.U32(); err == nil {
					err = sub.nameMap("local names of a function")
				}
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *walker) nameMap(what string) error {
	n, err := r.Count(what, 2)
	for i := uint32(0); err == nil && i < n; i++ {
		if _, err = r.U32(); err == nil {
			err = r.BytesVec("name")
		}
	}
	return err
}
