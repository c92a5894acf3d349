package fuel

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmsched/wasmsched/host/internal/wasmbin"
)

// seeds are modules of every shape this repository holds: the host's
// hand-written fixtures (traps, loops, memory bombs, bad signatures) and
// a few of the specification suite's.
func seeds(t testing.TB) [][]byte {
	files, _ := filepath.Glob("../../testdata/*.wasm")
	root := wazeroDir(t)
	for _, n := range []string{"v2/testdata/names.0.wasm", "v2/testdata/elem.0.wasm", "v2/testdata/simd_lane.0.wasm", "v2/testdata/bulk.0.wasm", "v1/testdata/loop.0.wasm", "v2/testdata/ref_func.1.wasm"} {
		files = append(files, filepath.Join(root, n))
	}
	var out [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	if len(out) < 10 {
		t.Fatalf("only %d seed modules", len(out))
	}
	return out
}

// The rewrite keeps what tools read from a module: exports by name and
// kind, function names (the name section, shifted past the added import),
// and the imports it had, plus exactly the one it adds.
func TestInstrumentKeepsInterface(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().WithCoreFeatures(api.CoreFeaturesV2))
	defer rt.Close(ctx)
	for i, wasm := range seeds(t) {
		before, err := rt.CompileModule(ctx, wasm)
		if err != nil {
			continue // fixtures that are invalid on purpose
		}
		out, err := Instrument(wasm)
		if err != nil {
			t.Fatalf("seed %d: %v", i, err)
		}
		after, err := rt.CompileModule(ctx, out)
		if err != nil {
			t.Fatalf("seed %d: the instrumented module does not compile: %v", i, err)
		}
		bf, af := before.ExportedFunctions(), after.ExportedFunctions()
		if len(bf) != len(af) {
			t.Errorf("seed %d: %d exported functions, %d after", i, len(bf), len(af))
		}
		for name, d := range bf {
			a := af[name]
			if a == nil || a.Name() != d.Name() || !slices.Equal(a.ParamTypes(), d.ParamTypes()) || !slices.Equal(a.ResultTypes(), d.ResultTypes()) {
				t.Errorf("seed %d: export %q was %s%v->%v, is %v", i, name, d.Name(), d.ParamTypes(), d.ResultTypes(), a)
			}
		}
		bi, ai := before.ImportedFunctions(), after.ImportedFunctions()
		if len(ai) != len(bi)+2 {
			t.Fatalf("seed %d: %d imports, %d after", i, len(bi), len(ai))
		}
		if mod, name, _ := ai[len(bi)].Import(); mod != ImportModule || name != ImportName || len(ai[len(bi)].ParamTypes()) != 0 || !slices.Equal(ai[len(bi)].ResultTypes(), []api.ValueType{api.ValueTypeI32}) {
			t.Errorf("seed %d: added import %s.%s %v->%v", i, mod, name, ai[len(bi)].ParamTypes(), ai[len(bi)].ResultTypes())
		}
		i32 := []api.ValueType{api.ValueTypeI32}
		if mod, name, _ := ai[len(bi)+1].Import(); mod != ImportModule || name != StackImportName || !slices.Equal(ai[len(bi)+1].ParamTypes(), i32) || !slices.Equal(ai[len(bi)+1].ResultTypes(), i32) {
			t.Errorf("seed %d: added import %s.%s %v->%v", i, mod, name, ai[len(bi)+1].ParamTypes(), ai[len(bi)+1].ResultTypes())
		}
		_ = before.Close(ctx)
		_ = after.Close(ctx)
	}
}

// A module may not import the instrumentation's host function itself.
func TestInstrumentRefusesReservedImport(t *testing.T) {
	out, err := Instrument(seeds(t)[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Instrument(out); !errors.Is(err, ErrReserved) {
		t.Fatalf("instrumenting twice: %v, want ErrReserved", err)
	}
}

// Nor export anything under the name of the stack room's export.
func TestInstrumentRefusesReservedExport(t *testing.T) {
	var wasm []byte
	wasm = append(wasm, "\x00asm\x01\x00\x00\x00"...)
	wasm = wasmbin.AppendSection(wasm, secType, []byte{1, 0x60, 0, 0})
	wasm = wasmbin.AppendSection(wasm, secFunction, []byte{1, 0})
	wasm = wasmbin.AppendSection(wasm, secExport, append(wasmbin.AppendName([]byte{1}, StackExport), kindFunc, 0))
	wasm = wasmbin.AppendSection(wasm, secCode, []byte{1, 2, 0, opEnd})
	if _, err := Instrument(wasm); !errors.Is(err, ErrReservedExport) {
		t.Fatalf("a module exporting %q: %v, want ErrReservedExport", StackExport, err)
	}
}

// DWARF describes code offsets the rewrite moves: it is dropped, while the
// other custom sections stay.
func TestInstrumentDropsDWARF(t *testing.T) {
	wasm := append([]byte(nil), seeds(t)[0]...)
	wasm = wasmbin.AppendSection(wasm, secCustom, wasmbin.AppendName(nil, ".debug_info"))
	wasm = wasmbin.AppendSection(wasm, secCustom, append(wasmbin.AppendName(nil, "producers"), 0))
	out, err := Instrument(wasm)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for id, content := range sections(t, out) {
		if id == secCustom {
			name, _ := (wasmbin.NewReader(content)).Name()
			names = append(names, name)
		}
	}
	for _, n := range names {
		if n == ".debug_info" {
			t.Errorf("custom sections after the rewrite: %v; .debug_info should be gone", names)
		}
	}
	if len(names) == 0 || names[len(names)-1] != "producers" {
		t.Errorf("custom sections after the rewrite: %v; producers should stay", names)
	}
}

// wazeroDir returns the directory of the wazero module this test builds with.
func wazeroDir(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/tetratelabs/wazero").Output()
	if err != nil {
		t.Fatalf("locating the wazero module: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		t.Fatal("go list gave no directory for github.com/tetratelabs/wazero")
	}
	return filepath.Join(dir, "internal", "integration_test", "spectest")
}
