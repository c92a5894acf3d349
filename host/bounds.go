package host

import (
	"fmt"

	"github.com/wasmsched/wasmsched/host/internal/wasmbin"
)

// maxLocalsPerFunction bounds the locals one function body may declare.
// Go and TinyGo guests declare a few hundred at most; wazero itself allows
// up to 2^32 and reserves room for all of them before compiling.
const maxLocalsPerFunction = 1 << 20

// checkBounds walks a module's binary structure and rejects any vector,
// name or byte string whose declared length cannot fit in the bytes that
// follow it. wazero v1.12 sizes its slices from these untrusted lengths
// before reading the elements (a 19-byte module declaring 2^31 imports made
// it allocate ~200 GB and the Go runtime abort the whole scheduler, found by
// FuzzLoad), and an out-of-memory abort cannot be recovered. Every element
// of those vectors takes at least one byte, so "count <= bytes left" is a
// sound bound that never rejects a well-formed module. Malformed structure
// that wazero would reject anyway is reported here with its offset.
func checkBounds(wasm []byte) error {
	_, err := measure(wasm)
	return err
}

// Compile limits: what one module may ask the compiler to do, checked
// before compiling. wazero's compiler runs inside the scheduler, and an
// untrusted module's shape decides its memory: measured with
// hack/compilecost (docs/security.md), the worst shape (one huge function)
// takes about 60 bytes of memory per byte of function body, and each
// declared local about 2.4 bytes; 1.5 million tiny functions (6 MB, 64 KB
// gzipped) took 5 s and 434 MiB. The example policies have at most 1,666
// functions, 1.4 MB of function bodies and 6,261 locals (Go; TinyGo under
// 100 functions and 65 KB), so the limits leave a Go policy many times its
// size while keeping a compile under about 300 MiB.
// They are the defaults of PolicySpec.Limits (and of the args'
// compileLimits).
const (
	// DefaultMaxFunctions bounds the functions a module defines.
	DefaultMaxFunctions = 50_000
	// DefaultMaxCodeBytes bounds the total size of a module's function bodies.
	DefaultMaxCodeBytes = 4 << 20
	// DefaultMaxLocals bounds the locals all of a module's functions declare together.
	DefaultMaxLocals = 1_000_000
)

// CompileLimits bound a module's code; zero fields take the defaults.
type CompileLimits struct {
	MaxFunctions, MaxCodeBytes, MaxLocals int64
}

func (l CompileLimits) withDefaults() CompileLimits {
	if l.MaxFunctions <= 0 {
		l.MaxFunctions = DefaultMaxFunctions
	}
	if l.MaxCodeBytes <= 0 {
		l.MaxCodeBytes = DefaultMaxCodeBytes
	}
	if l.MaxLocals <= 0 {
		l.MaxLocals = DefaultMaxLocals
	}
	return l
}

// TooLargeError refuses a module that would cost more to compile than the
// compile limits allow.
type TooLargeError struct {
	What        string
	Size, Limit uint64
	// Arg is the WasmPolicy args field that raises the limit ("": the
	// limit is fixed).
	Arg string
}

func (e *TooLargeError) Error() string {
	if e.Arg == "" {
		return fmt.Sprintf("module has %d %s, more than the limit of %d: compiling or instantiating it could take the scheduler's memory or minutes of CPU (docs/security.md, declaration and code-shape limits); the limit is fixed and a policy built with Go or TinyGo stays far below it: rebuild the policy from source, or split generated code into smaller functions", e.Size, e.What, e.Limit)
	}
	return fmt.Sprintf("module has %d %s, more than the limit of %d: compiling it could take the scheduler's memory (docs/security.md, compile limits); drop unused code, or raise %s in the WasmPolicy args", e.Size, e.What, e.Limit, e.Arg)
}

// check compares a module's code with the compile limits, and its
// declarations with the fixed declaration limits.
func (c codeSize) check(l CompileLimits) error {
	switch {
	case c.functions > uint64(l.MaxFunctions):
		return &TooLargeError{"functions", c.functions, uint64(l.MaxFunctions), "compileLimits.maxFunctions"}
	case c.bodyBytes > uint64(l.MaxCodeBytes):
		return &TooLargeError{"bytes of function bodies", c.bodyBytes, uint64(l.MaxCodeBytes), "compileLimits.maxCodeBytes"}
	case c.locals > uint64(l.MaxLocals):
		return &TooLargeError{"locals", c.locals, uint64(l.MaxLocals), "compileLimits.maxLocals"}
	}
	for _, d := range []struct {
		what     string
		n, limit uint64
	}{
		{"imports", c.imports, maxImports},
		{"types", c.types, maxTypes},
		{"exports", c.exports, maxExports},
		{"globals", c.globals, maxGlobals},
		{"data segments", c.dataSegments, maxDataSegments},
		{"element segments", c.elemSegments, maxElemSegments},
		{"element segment entries", c.elemEntries, maxElemEntries},
	} {
		if d.n > d.limit {
			return &TooLargeError{What: d.what, Size: d.n, Limit: d.limit}
		}
	}
	return nil
}

// Declaration limits: what a module may declare, fixed, checked before
// wazero decodes it. wazero holds a few dozen to a few hundred bytes of
// host memory for every declared import, type, export, global and segment
// (1M globals compiled at 139 MiB here, hack/compilecost), and a module of
// 32 MiB could declare millions of each. The 52 example, port and test
// policies (Go and TinyGo) declare at most 35 imports, 29 types, 21
// exports, 8 globals, 29,117 data segments (Go's linker writes many) and
// one element segment of 1,690 entries: the limits are 17 times the data
// segments and hundreds of times the rest, and bound what a module's
// declarations hold to a few tens of MiB. docs/security.md (RATIONALE:
// declaration and code-shape limits).
const (
	maxImports      = 1_000
	maxTypes        = 10_000
	maxExports      = 10_000
	maxGlobals      = 100_000
	maxDataSegments = 500_000
	maxElemSegments = 10_000
	maxElemEntries  = 1 << 20
)

// codeSize is what a module asks the compiler to compile, and what it
// declares.
type codeSize struct {
	functions, bodyBytes, locals            uint64
	imports, types, exports, globals        uint64
	dataSegments, elemSegments, elemEntries uint64
}

// measure is checkBounds that also adds up the module's code.
func measure(wasm []byte) (codeSize, error) {
	var size codeSize
	r := &reader{Reader: wasmbin.Reader{B: wasm, Pos: 8, End: len(wasm)}, size: &size}
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

// reader reads a module for checkBounds and measure; size, when set,
// accumulates the code it reads.
type reader struct {
	wasmbin.Reader
	size *codeSize
}

// sized is wasmbin.Reader.Sized keeping size.
func (r *reader) sized(what string) (byte, *reader, error) {
	id, s, err := r.Sized(what)
	if err != nil {
		return 0, nil, err
	}
	return id, &reader{Reader: *s, size: r.size}, nil
}

func (r *reader) section(id byte) error {
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
			r.size.types += uint64(n)
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
			r.size.imports += uint64(n)
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
			r.size.globals += uint64(n)
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
			r.size.exports += uint64(n)
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
			body := &reader{Reader: wasmbin.Reader{B: r.B, Pos: r.Pos, End: r.Pos + int(size)}, size: r.size}
			if err = body.locals(i); err != nil {
				break
			}
			r.Pos = body.End
			if r.size != nil {
				r.size.functions++
				r.size.bodyBytes += uint64(size)
			}
		}
		return err
	case 11: // data
		n, err := r.Count("data section", 2)
		if r.size != nil {
			r.size.dataSegments += uint64(n)
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

func (r *reader) locals(fn uint32) error {
	groups, err := r.Count("local declarations", 2)
	var total uint64
	for j := uint32(0); err == nil && j < groups; j++ {
		var n uint32
		if n, err = r.U32(); err != nil {
			break
		}
		if total += uint64(n); total > maxLocalsPerFunction {
			return r.Errorf("function %d declares more than %d locals", fn, maxLocalsPerFunction)
		}
		if r.size != nil {
			r.size.locals += uint64(n)
		}
		var t byte
		if t, err = r.Byte(); err == nil && (t == 0x63 || t == 0x64) {
			_, err = r.SLEB(33) // reference type with a heap type
		}
	}
	return err
}

func (r *reader) elements() error {
	n, err := r.Count("element section", 2)
	if r.size != nil {
		r.size.elemSegments += uint64(n)
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
				r.size.elemEntries += uint64(m)
			}
			for k := uint32(0); k < m && err == nil; k++ {
				_, err = r.U32()
			}
		} else { // expressions
			if m, err = r.Count("element expressions", 2); err != nil {
				return err
			}
			if r.size != nil {
				r.size.elemEntries += uint64(m)
			}
			for k := uint32(0); k < m && err == nil; k++ {
				err = r.ConstExpr()
			}
		}
	}
	return err
}

// nameSection checks the function and local name maps wazero decodes.
func (r *reader) nameSection() error {
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

func (r *reader) nameMap(what string) error {
	n, err := r.Count(what, 2)
	for i := uint32(0); err == nil && i < n; i++ {
		if _, err = r.U32(); err == nil {
			err = r.BytesVec("name")
		}
	}
	return err
}
