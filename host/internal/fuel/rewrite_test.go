package fuel

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmsched/wasmsched/host/internal/wasmbin"
)

// fillModule is a module with one page of memory and, for each length n,
// an export "fill<n>" (param d i32, param unused i32) with a local of its
// own that runs memory.fill(d, v, n) with v and n as constants: the shape
// TinyGo clears its stack frames with. "fillvar" takes the length as its
// second parameter instead, which the rewrite leaves to $fill; it is
// there when withVar is set.
func fillModule(v int32, lengths []int32, withVar bool) []byte {
	var types, funcs, exports, code []byte
	types = append(wasmbin.AppendU32(nil, 1), 0x60, 2, valI32, valI32, 0)
	n := uint32(len(lengths))
	if withVar {
		n++
	}
	funcs = wasmbin.AppendU32(nil, n)
	exports = wasmbin.AppendU32(nil, n+1) // and the memory
	code = wasmbin.AppendU32(nil, n)
	for i, length := range lengths {
		funcs = append(funcs, 0)
		exports = append(wasmbin.AppendName(exports, fmt.Sprintf("fill%d", length)), kindFunc)
		exports = wasmbin.AppendU32(exports, uint32(i))
		body := []byte{1, 1, 0x7e, opLocalGet, 0} // one i64 local
		body = AppendI32Const(AppendI32Const(body, v), length)
		body = append(body, prefixMisc, 11, 0, opEnd)
		code = append(wasmbin.AppendU32(code, uint32(len(body))), body...)
	}
	if withVar {
		funcs = append(funcs, 0)
		exports = append(wasmbin.AppendName(exports, "fillvar"), kindFunc)
		exports = wasmbin.AppendU32(exports, uint32(len(lengths)))
		body := []byte{0, opLocalGet, 0}
		body = append(AppendI32Const(body, v), opLocalGet, 1, prefixMisc, 11, 0, opEnd)
		code = append(wasmbin.AppendU32(code, uint32(len(body))), body...)
	}
	exports = append(wasmbin.AppendName(exports, "memory"), kindMem, 0)

	wasm := []byte("\x00asm\x01\x00\x00\x00")
	wasm = wasmbin.AppendSection(wasm, secType, types)
	wasm = wasmbin.AppendSection(wasm, secFunction, funcs)
	wasm = wasmbin.AppendSection(wasm, 5, []byte{1, 0, 1}) // memory: 1 page
	wasm = wasmbin.AppendSection(wasm, secExport, exports)
	return wasmbin.AppendSection(wasm, secCode, code)
}

// A memory.fill of constant length and value, written inline as stores,
// does what memory.fill does: the same bytes at every address that fits,
// and a trap with nothing written at every address that does not (the
// last byte past the memory's end, the address past it, addresses that
// wrap around 2^32). Compared with the module run as it was, memory
// byte for byte after every call.
func TestSmallFillMatchesMemoryFill(t *testing.T) {
	ctx := context.Background()
	lengths := []int32{1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 84, 104, 255, smallFillMax}
	for _, v := range []int32{0, 0x55, -1, 0x1234} {
		wasm := fillModule(v, lengths, true)
		out, err := Instrument(wasm)
		if err != nil {
			t.Fatal(err)
		}
		// Every constant fill was written inline: without fillvar the
		// rewrite adds $charge alone, not $fill and $copy.
		constOnly, err := Instrument(fillModule(v, lengths, false))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := definedFunctions(t, constOnly), len(lengths)+1; got != want {
			t.Fatalf("instrumented module without fillvar defines %d functions, want %d (its own and $charge)", got, want)
		}
		plain, instrumented := instantiate(t, ctx, wasm), instantiate(t, ctx, out)
		const page = 1 << 16
		for _, n := range append(lengths, 0) {
			name := fmt.Sprintf("fill%d", n)
			args := func(d uint32) []uint64 { return []uint64{uint64(d), 0} }
			if n == 0 {
				name = "fillvar"
			}
			for _, length := range []int32{n, 300} {
				if n != 0 && length != n {
					continue
				}
				if n == 0 {
					args = func(d uint32) []uint64 { return []uint64{uint64(d), uint64(uint32(length))} }
				}
				for _, d := range []uint32{0, 1, 13, page/2 + 3, page - uint32(length) - 1, page - uint32(length), page - uint32(length) + 1, page - 1, page, page + 1, -uint32(length), 1<<32 - 1} {
					_, errPlain := plain.ExportedFunction(name).Call(ctx, args(d)...)
					_, errInst := instrumented.ExportedFunction(name).Call(ctx, args(d)...)
					if (errPlain == nil) != (errInst == nil) {
						t.Fatalf("v=%d %s(%d) len %d: plain %v, instrumented %v", v, name, d, length, errPlain, errInst)
					}
					a, _ := plain.Memory().Read(0, page)
					b, _ := instrumented.Memory().Read(0, page)
					if !bytes.Equal(a, b) {
						i := 0
						for a[i] == b[i] {
							i++
						}
						t.Fatalf("v=%d %s(%d) len %d: memories differ from byte %d (plain %#x, instrumented %#x)", v, name, d, length, i, a[i], b[i])
					}
				}
			}
		}
	}
}

// fuelHost instantiates the instrumentation's imports in rt: refuel, and
// stack (nil: one that always grants StackStart more).
func fuelHost(ctx context.Context, rt wazero.Runtime, refuel func() int32, stack func(int32) int32) error {
	if stack == nil {
		stack = func(int32) int32 { return StackStart / StackUnit }
	}
	_, err := rt.NewHostModuleBuilder(ImportModule).
		NewFunctionBuilder().WithFunc(refuel).Export(ImportName).
		NewFunctionBuilder().WithFunc(stack).Export(StackImportName).
		Instantiate(ctx)
	return err
}

// instantiate runs wasm in a runtime of its own, with the refuel import.
func instantiate(t *testing.T, ctx context.Context, wasm []byte) api.Module {
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().WithCoreFeatures(api.CoreFeaturesV2))
	t.Cleanup(func() { _ = rt.Close(ctx) })
	if err := fuelHost(ctx, rt, func() int32 { return 1 << 20 }, nil); err != nil {
		t.Fatal(err)
	}
	m, err := rt.Instantiate(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// definedFunctions is the function section's count.
func definedFunctions(t *testing.T, wasm []byte) int {
	for id, content := range sections(t, wasm) {
		if id == secFunction {
			n, _ := wasmbin.NewReader(content).U32()
			return int(n)
		}
	}
	return 0
}

// sections yields a module's sections, id and content, in order.
func sections(t *testing.T, wasm []byte) iter.Seq2[byte, []byte] {
	return func(yield func(byte, []byte) bool) {
		r := &wasmbin.Reader{B: wasm, Pos: 8, End: len(wasm)}
		for r.Left() > 0 {
			id, _ := r.Byte()
			size, _ := r.U32()
			content, err := r.Bytes(uint64(size))
			if err != nil {
				t.Fatal(err)
			}
			if !yield(id, content) {
				return
			}
		}
	}
}

// A function whose body reaches a loop header before anything else (every
// function of a Go module does) is checked once per call, by that loop's
// check; any other function keeps its check at entry as well. Counted in
// checks, through refuel: each refuel pays for 10 of them.
func TestEntryCheckFoldsIntoLoopHeader(t *testing.T) {
	ctx := context.Background()
	types := append(wasmbin.AppendU32(nil, 2), 0x60, 0, 0, 0x60, 1, valI32, 0)
	funcs := append(wasmbin.AppendU32(nil, 4), 0, 0, 1, 1)
	var exports []byte
	exports = wasmbin.AppendU32(exports, 2)
	exports = append(wasmbin.AppendName(exports, "drive_loop"), kindFunc, 2)
	exports = append(wasmbin.AppendName(exports, "drive_plain"), kindFunc, 3)
	fLoop := []byte{0, opBlock, blockTypeEmpty, opLoop, blockTypeEmpty, opEnd, opEnd, opEnd}
	fPlain := []byte{0, opI32Const, 0, opDrop, opBlock, blockTypeEmpty, opLoop, blockTypeEmpty, opEnd, opEnd, opEnd}
	drive := func(f byte) []byte {
		return []byte{0, opLoop, blockTypeEmpty, opCall, f, opLocalGet, 0, opI32Const, 1, opI32Sub, opLocalTee, 0, opBrIf, 0, opEnd, opEnd}
	}
	code := wasmbin.AppendU32(nil, 4)
	for _, body := range [][]byte{fLoop, fPlain, drive(0), drive(1)} {
		code = append(wasmbin.AppendU32(code, uint32(len(body))), body...)
	}
	wasm := []byte("\x00asm\x01\x00\x00\x00")
	wasm = wasmbin.AppendSection(wasm, secType, types)
	wasm = wasmbin.AppendSection(wasm, secFunction, funcs)
	wasm = wasmbin.AppendSection(wasm, secExport, exports)
	wasm = wasmbin.AppendSection(wasm, secCode, code)
	out, err := Instrument(wasm)
	if err != nil {
		t.Fatal(err)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	refuels := 0
	if err := fuelHost(ctx, rt, func() int32 { refuels++; return 10 }, nil); err != nil {
		t.Fatal(err)
	}
	m, err := rt.Instantiate(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	// 1000 iterations: the driver's loop header, then the callee's checks.
	for _, c := range []struct {
		name   string
		checks int
	}{{"drive_loop", 2000}, {"drive_plain", 3000}} {
		refuels = 0
		if _, err := m.ExportedFunction(c.name).Call(ctx, 1000); err != nil {
			t.Fatal(err)
		}
		if want := c.checks / 10; refuels < want-2 || refuels > want+2 {
			t.Errorf("%s: %d refuels for 1000 calls, want %d (%d checks)", c.name, refuels, want, c.checks)
		}
	}
}

// Inline fills are bounded per module: a module of nothing but constant
// 256-byte fills (10 bytes of code each, about 260 inline) grows by at
// most smallFillBudget, the rest going through $fill, and still fills
// what memory.fill would.
func TestSmallFillBudget(t *testing.T) {
	ctx := context.Background()
	const fills = 20_000
	body := []byte{0}
	for i := range fills {
		body = AppendI32Const(body, int32(i%200)*256)
		body = AppendI32Const(AppendI32Const(body, int32(i)), smallFillMax)
		body = append(body, prefixMisc, 11, 0)
	}
	body = append(body, opEnd)
	wasm := []byte("\x00asm\x01\x00\x00\x00")
	wasm = wasmbin.AppendSection(wasm, secType, append(wasmbin.AppendU32(nil, 1), 0x60, 0, 0))
	wasm = wasmbin.AppendSection(wasm, secFunction, []byte{1, 0})
	wasm = wasmbin.AppendSection(wasm, 5, []byte{1, 0, 1})
	exports := append(wasmbin.AppendName(wasmbin.AppendU32(nil, 2), "fill"), kindFunc, 0)
	exports = append(wasmbin.AppendName(exports, "memory"), kindMem, 0)
	wasm = wasmbin.AppendSection(wasm, secExport, exports)
	wasm = wasmbin.AppendSection(wasm, secCode, append(wasmbin.AppendU32(wasmbin.AppendU32(nil, 1), uint32(len(body))), body...))
	out, err := Instrument(wasm)
	if err != nil {
		t.Fatal(err)
	}
	// 256 KiB of inline fills at most, and the fuel checks' 15 bytes per
	// StraightLine instructions (a literal bound, so that a budget grown
	// by mistake fails here: without one, 10 MB came out of 268 KB).
	if grown, most := len(out)-len(wasm), 320<<10; grown > most {
		t.Fatalf("instrumenting %d bytes of fills added %d bytes, more than %d", len(wasm), grown, most)
	}
	plain, instrumented := instantiate(t, ctx, wasm), instantiate(t, ctx, out)
	for _, m := range []api.Module{plain, instrumented} {
		if _, err := m.ExportedFunction("fill").Call(ctx); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := plain.Memory().Read(0, 1<<16)
	b, _ := instrumented.Memory().Read(0, 1<<16)
	if !bytes.Equal(a, b) {
		t.Fatal("memories differ after the fills")
	}
}
