package host

import (
	"fmt"
	"github.com/wasmsched/wasmsched/host/defaults"

	"github.com/wasmsched/wasmsched/host/internal/wasmbin"
)

// checkBounds walks a module's binary structure and rejects any vector,
// name or byte string whose declared length cannot fit in the bytes that
// follow it. wazero v1.12 sizes its slices from these untrusted lengths
// before reading the elements (a 19-byte module declaring 2^31 imports made
// it allocate ~200 GB and the Go runtime abort the whole scheduler, found by
// FuzzLoad), and an out-of-memory abort cannot be recovered. Every element
// of those vectors takes at least one byte, so "count <= bytes left" is a
// sound bound that never rejects a well-formed module. Malformed structure
// that wazero would reject anyway is reported here with its offset.
// The walk is wasmbin.Measure.
func checkBounds(wasm []byte) error {
	_, err := wasmbin.Measure(wasm)
	return err
}

// codeSize is what a module declares and asks the compiler to compile.
type codeSize = wasmbin.Shape

// measure is checkBounds that also adds up the module's code.
func measure(wasm []byte) (codeSize, error) { return wasmbin.Measure(wasm) }

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
	DefaultMaxFunctions = defaults.MaxFunctions
	// DefaultMaxCodeBytes bounds the total size of a module's function bodies.
	DefaultMaxCodeBytes = defaults.MaxCodeBytes
	// DefaultMaxLocals bounds the locals all of a module's functions declare together.
	DefaultMaxLocals = defaults.MaxLocals
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
func checkSize(c codeSize, l CompileLimits) error {
	switch {
	case c.Functions > uint64(l.MaxFunctions):
		return &TooLargeError{"functions", c.Functions, uint64(l.MaxFunctions), "compileLimits.maxFunctions"}
	case c.BodyBytes > uint64(l.MaxCodeBytes):
		return &TooLargeError{"bytes of function bodies", c.BodyBytes, uint64(l.MaxCodeBytes), "compileLimits.maxCodeBytes"}
	case c.Locals > uint64(l.MaxLocals):
		return &TooLargeError{"locals", c.Locals, uint64(l.MaxLocals), "compileLimits.maxLocals"}
	}
	for _, d := range []struct {
		what     string
		n, limit uint64
	}{
		{"imports", c.Imports, maxImports},
		{"types", c.Types, maxTypes},
		{"exports", c.Exports, maxExports},
		{"globals", c.Globals, maxGlobals},
		{"data segments", c.DataSegments, maxDataSegments},
		{"element segments", c.ElemSegments, maxElemSegments},
		{"element segment entries", c.ElemEntries, maxElemEntries},
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
