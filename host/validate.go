package host

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host/internal/fuel"
)

// wasiModule is the WASI preview1 import module name.
const wasiModule = "wasi_snapshot_preview1"

// allowedWASI is the minimal WASI surface a policy may import. It is what the
// Go and TinyGo runtimes need to start and to write to stdout/stderr: no
// filesystem (no path_* and, with no preopened directories, fd_prestat_*
// only ever answers "none"), no sockets, an empty environment and argument
// list, and deterministic clocks and randomness unless the policy opts in.
// fd_fdstat_set_flags is there because Go's os package (and so fmt) calls it
// on stdin/stdout/stderr at start; it can only change the flags of those
// three descriptors, which the host owns. It is unexported so that nothing
// can widen the sandbox at run time; AllowedWASI returns a copy.
var allowedWASI = map[string]bool{
	"args_get":            true,
	"args_sizes_get":      true,
	"environ_get":         true,
	"environ_sizes_get":   true,
	"clock_res_get":       true,
	"clock_time_get":      true,
	"fd_write":            true,
	"fd_close":            true,
	"fd_fdstat_get":       true,
	"fd_fdstat_set_flags": true,
	"fd_seek":             true,
	"fd_prestat_get":      true,
	"fd_prestat_dir_name": true,
	"poll_oneoff":         true,
	"proc_exit":           true,
	"random_get":          true,
	"sched_yield":         true,
}

// AllowedWASI lists, sorted, the WASI functions a policy may import.
func AllowedWASI() []string {
	out := make([]string, 0, len(allowedWASI))
	for name := range allowedWASI {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// signature is a wasm function type.
type signature struct{ params, results []api.ValueType }

func valueTypes(ts []abi.ValType) []api.ValueType {
	if len(ts) == 0 {
		return nil
	}
	out := make([]api.ValueType, len(ts))
	for i, t := range ts {
		out[i] = api.ValueType(t)
	}
	return out
}

func paramTypes(ps []abi.Param) []api.ValueType {
	ts := make([]abi.ValType, len(ps))
	for i, p := range ps {
		ts[i] = p.Type
	}
	return valueTypes(ts)
}

// hostFunctionSignatures are the signatures of abi.HostFunctions by name; a
// module may import any of them.
var hostFunctionSignatures = func() map[string]signature {
	m := make(map[string]signature, len(abi.HostFunctions))
	for _, f := range abi.HostFunctions {
		m[f.Name] = signature{paramTypes(f.Params), valueTypes(f.Results)}
	}
	return m
}()

// exportSignatures are the ABI signatures of the guest exports: the
// extension points of abi.Points and the exports that are not extension points.
var exportSignatures = func() map[string]signature {
	m := map[string]signature{
		abi.ExportAbiVersion:   {nil, []api.ValueType{api.ValueTypeI32}},
		abi.ExportCapabilities: {nil, []api.ValueType{api.ValueTypeI32}},
		abi.ExportInitialize:   {nil, nil},
		abi.ExportStart:        {nil, nil},
	}
	for _, pt := range abi.Points {
		m[pt.Export] = signature{paramTypes(pt.Params), valueTypes(pt.Results)}
	}
	return m
}()

// entryPoints are the points whose export makes a module a policy
// (abi.ExtensionPoint.Entry); errNoEntryPoint names them.
var entryPoints, errNoEntryPoint = func() ([]CallKind, error) {
	var points []CallKind
	var exports, names []string
	for k := CallKind(0); k < NumCallKinds; k++ {
		if abi.Points[k].Entry {
			points, exports, names = append(points, k), append(exports, strconv.Quote(abi.Points[k].Export)), append(names, abi.Points[k].Name)
		}
	}
	return points, fmt.Errorf("module exports no entry point: none of %s; register a %s function in the guest SDK", orList(exports), orList(names))
}()

// orList writes "a, b, c or d".
func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// exportPoints maps an extension point's export name to its point.
var exportPoints = func() map[string]CallKind {
	m := make(map[string]CallKind, NumCallKinds)
	for k := CallKind(0); k < NumCallKinds; k++ {
		m[abi.Points[k].Export] = k
	}
	return m
}()

// Exports records which extension points a module implements.
type Exports struct {
	// Points is the set of implemented extension points, one bit per
	// abi.Point (the same bits as the capabilities export).
	Points int32
	// Initializer is "_initialize", "_start" or "" (none).
	Initializer string
	// KeepsState is set when the guest's capabilities say its verdicts
	// depend on state it keeps across calls (abi.CapKeepsState): they are
	// never shared between nodes or reused.
	KeepsState bool
}

// Has reports whether the module implements extension point k.
func (e Exports) Has(k CallKind) bool { return k >= 0 && k < NumCallKinds && e.Points&k.Cap() != 0 }

// narrow keeps the points whose bit is set in caps, and drops a batch form
// whose single form is gone.
func (e *Exports) narrow(caps int32) {
	e.Points &= caps
	for k := CallKind(0); k < NumCallKinds; k++ {
		if of := abi.Points[k].BatchOf; of != abi.BatchNone && !e.Has(of) {
			e.Points &^= k.Cap()
		}
	}
}

// String lists the extension points' exports, for logs and validation output.
func (e Exports) String() string {
	var s []string
	for k := CallKind(0); k < NumCallKinds; k++ {
		if e.Has(k) {
			s = append(s, abi.Points[k].Export)
		}
	}
	return strings.Join(s, ",")
}

// DecodeModule turns source bytes into wasm bytes: it accepts raw wasm or
// gzip-compressed wasm, enforces MaxModuleSize on the result and checks the
// wasm magic number. It returns the sha256 (hex) of the wasm bytes, which is
// what a policy's sha256 pin refers to.
func DecodeModule(src []byte) (wasm []byte, digest string, err error) {
	wasm = src
	if len(src) >= 2 && src[0] == 0x1f && src[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, "", fmt.Errorf("gzip header: %w", err)
		}
		wasm, err = io.ReadAll(io.LimitReader(zr, MaxModuleSize+1))
		if err != nil {
			return nil, "", fmt.Errorf("gunzip: %w", err)
		}
	}
	if len(wasm) > MaxModuleSize {
		return nil, "", fmt.Errorf("module is larger than the %d MiB limit", MaxModuleSize>>20)
	}
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], []byte("\x00asm")) {
		return nil, "", errors.New("not a wasm module: missing the \\0asm magic number (is this the .wasm file, raw or gzipped?)")
	}
	sum := sha256.Sum256(wasm)
	return wasm, hex.EncodeToString(sum[:]), nil
}

// compile compiles a module after checkBounds has made sure wazero's decoder
// will not size a slice from a length the module cannot hold, and the
// module is within the compile limits, already defaulted (a *TooLargeError
// otherwise).
func compile(ctx context.Context, rt wazero.Runtime, wasm []byte, limits CompileLimits) (wazero.CompiledModule, error) {
	size, err := measure(wasm)
	if err != nil {
		return nil, fmt.Errorf("malformed module: %w", err)
	}
	if err := checkSize(size, limits); err != nil {
		return nil, err
	}
	return rt.CompileModule(ctx, wasm)
}

// checkModule validates a compiled module against the ABI: only allowed
// imports, a memory export, the required exports with the right signatures.
func checkModule(cm wazero.CompiledModule) (Exports, error) {
	var bad []string
	for _, f := range cm.ImportedFunctions() {
		if instrumented(f) {
			continue // added by the rewriter, which refuses modules importing it
		}
		if problem := importProblem(f); problem != "" {
			bad = append(bad, problem)
		}
	}
	for _, m := range cm.ImportedMemories() {
		mod, name, _ := m.Import()
		bad = append(bad, mod+"."+name+" (imported memory)")
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return Exports{}, fmt.Errorf("module imports functions outside the sandbox allow-list: %s (policies may import only %q host functions and a minimal WASI without filesystem, sockets or environment)", strings.Join(bad, ", "), abi.HostModule)
	}
	if _, ok := cm.ExportedMemories()["memory"]; !ok {
		return Exports{}, errors.New(`module does not export its linear memory as "memory"`)
	}
	fns := cm.ExportedFunctions()
	var ex Exports
	for name, sig := range exportSignatures {
		def, ok := fns[name]
		if !ok {
			continue
		}
		if !sameTypes(def.ParamTypes(), sig.params) || !sameTypes(def.ResultTypes(), sig.results) {
			return Exports{}, fmt.Errorf("export %q has signature %s, the ABI requires %s", name, sigString(def.ParamTypes(), def.ResultTypes()), sigString(sig.params, sig.results))
		}
		if k, ok := exportPoints[name]; ok {
			ex.Points |= k.Cap()
		}
	}
	if _, ok := fns[abi.ExportAbiVersion]; !ok {
		return Exports{}, fmt.Errorf("module does not export %q: it was not built against the wasmsched guest SDK (ABI v%d)", abi.ExportAbiVersion, abi.Version)
	}
	ex.narrow(ex.Points)
	if !slices.ContainsFunc(entryPoints, ex.Has) {
		return Exports{}, errNoEntryPoint
	}
	if _, ok := fns[abi.ExportInitialize]; ok {
		ex.Initializer = abi.ExportInitialize
	} else if _, ok := fns[abi.ExportStart]; ok {
		ex.Initializer = abi.ExportStart
	}
	return ex, nil
}

// importProblem says why the sandbox refuses an imported function, or ""
// when it allows it: the one rule for loading and for Inspect.
func importProblem(f api.FunctionDefinition) string {
	mod, name, _ := f.Import()
	switch mod {
	case wasiModule:
		if allowedWASI[name] {
			return ""
		}
	case abi.HostModule:
		sig, ok := hostFunctionSignatures[name]
		if !ok {
			return mod + "." + name + " (unknown host function)"
		}
		if !sameTypes(f.ParamTypes(), sig.params) || !sameTypes(f.ResultTypes(), sig.results) {
			return fmt.Sprintf("%s.%s (signature %s, want %s)", mod, name, sigString(f.ParamTypes(), f.ResultTypes()), sigString(sig.params, sig.results))
		}
		return ""
	}
	return mod + "." + name
}

// instrumented reports whether f is the import host/internal/fuel adds.
func instrumented(f api.FunctionDefinition) bool {
	mod, name, _ := f.Import()
	return mod == fuel.ImportModule && (name == fuel.ImportName || name == fuel.StackImportName)
}

func sameTypes(a, b []api.ValueType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func sigString(params, results []api.ValueType) string {
	n := func(ts []api.ValueType) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = api.ValueTypeName(t)
		}
		return strings.Join(s, ",")
	}
	return "(" + n(params) + ")->(" + n(results) + ")"
}
