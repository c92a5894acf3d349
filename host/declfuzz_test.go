package host

import (
	"context"
	"encoding/binary"
	"runtime"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/host/internal/fuel"
)

// declModule builds a module that declares what the fuzzer chooses and
// grows it when filter runs: tables of min/max entries, globals, a memory
// of min/max pages, a data segment, an element segment, and in filter a
// table.grow, table.fill and memory.grow of the chosen deltas, repeated.
func declModule(tables, tableMin, tableMax, globals, memMin, memMax, dataLen, elemLen, growBy, grows, memGrow uint32) []byte {
	u := func(b []byte, v uint32) []byte { return binary.AppendUvarint(b, uint64(v)) }
	section := func(out []byte, id byte, content []byte) []byte {
		return append(u(append(out, id), uint32(len(content))), content...)
	}
	name := func(b []byte, s string) []byte { return append(u(b, uint32(len(s))), s...) }
	out := []byte("\x00asm\x01\x00\x00\x00")
	out = section(out, 1, []byte{2, 0x60, 0, 1, 0x7f, 0x60, 1, 0x7e, 0}) // () -> i32, (i64) -> ()
	out = section(out, 3, []byte{2, 0, 1})
	if tables > 0 {
		t := u(nil, tables)
		for i := uint32(0); i < tables; i++ {
			t = append(t, 0x70)
			if tableMax != 0 {
				t = u(u(append(t, 1), tableMin), tableMax)
			} else {
				t = u(append(t, 0), tableMin)
			}
		}
		out = section(out, 4, t)
	}
	m := []byte{1}
	if memMax != 0 {
		m = u(u(append(m, 1), memMin), memMax)
	} else {
		m = u(append(m, 0), memMin)
	}
	out = section(out, 5, m)
	if globals > 0 {
		g := u(nil, globals)
		for i := uint32(0); i < globals; i++ {
			g = append(g, 0x7f, 1, 0x41, 0, 0x0b)
		}
		out = section(out, 6, g)
	}
	e := name(u(nil, 3), "memory")
	e = append(e, 2, 0)
	e = append(name(e, "abi_version"), 0, 0)
	e = append(name(e, "filter"), 0, 1)
	out = section(out, 7, e)
	if tables > 0 && elemLen > 0 {
		el := []byte{1, 0, 0x41, 0, 0x0b} // active, table 0, offset 0
		el = u(el, elemLen)
		for i := uint32(0); i < elemLen; i++ {
			el = append(el, 0) // function 0
		}
		out = section(out, 9, el)
	}
	// filter: repeat grows times { table.grow 0 by growBy; table.fill the
	// table; memory.grow by memGrow }.
	body := []byte{1, 1, 0x7f}      // one i32 local: the counter
	body = append(body, 0x03, 0x40) // loop
	if tables > 0 {
		body = fuel.AppendI32Const(append(body, 0xd0, 0x70), int32(growBy)) // ref.null func; i32.const
		body = append(body, 0xfc, 15, 0, 0x1a)                              // table.grow 0; drop
		body = append(body, 0x41, 0, 0xd0, 0x70, 0xfc, 16, 0, 0xfc, 17, 0)  // table.fill 0 from 0, null, table.size
	}
	body = fuel.AppendI32Const(body, int32(memGrow))
	body = append(body, 0x40, 0, 0x1a)                   // memory.grow; drop
	body = append(body, 0x20, 1, 0x41, 1, 0x6a, 0x22, 1) // local.tee counter+1
	body = fuel.AppendI32Const(body, int32(grows))
	body = append(body, 0x49, 0x0d, 0, 0x0b, 0x0b) // i32.lt_u; br_if loop; end; end
	code := u(nil, 2)
	code = append(u(code, 4), 0, 0x41, 1, 0x0b)
	code = append(u(code, uint32(len(body))), body...)
	out = section(out, 10, code)
	if dataLen > 0 {
		d := []byte{1, 0, 0x41, 0, 0x0b}
		d = u(d, dataLen)
		d = append(d, make([]byte, dataLen)...)
		out = section(out, 11, d)
	}
	return out
}

// FuzzDeclarations loads modules that declare and grow tables, memories,
// globals, data and element segments of sizes the fuzzer picks, and runs
// them: a load is refused or succeeds, a call ends or fails, and the
// process keeps running with its live heap bounded (under 1 GiB more than
// before the fuzzer started) (a huge table once killed it
// with "fatal error: out of memory"). Counts are bounded to what a module
// of MaxModuleSize could declare.
func FuzzDeclarations(f *testing.F) {
	f.Add(uint32(1), uint32(1), uint32(0), uint32(1), uint32(1), uint32(0), uint32(16), uint32(1), uint32(1<<30), uint32(1), uint32(0))
	f.Add(uint32(1), uint32(1<<30), uint32(0), uint32(0), uint32(1), uint32(2), uint32(0), uint32(0), uint32(0), uint32(0), uint32(1))
	f.Add(uint32(3), uint32(100), uint32(1<<31), uint32(1000), uint32(16), uint32(0), uint32(0), uint32(100), uint32(4096), uint32(1000), uint32(100))
	f.Add(uint32(2), uint32(1<<20), uint32(1<<20), uint32(0), uint32(1024), uint32(1024), uint32(1<<16), uint32(1<<10), uint32(0xffffffff), uint32(3), uint32(0xffff))
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	e := newEngine(f)
	p := newPolicy(f, e, PolicySpec{Timeout: 100 * time.Millisecond, InitTimeout: 500 * time.Millisecond, MemoryLimitBytes: 64 << 20, MaxInstances: 1})
	f.Fuzz(func(t *testing.T, tables, tableMin, tableMax, globals, memMin, memMax, dataLen, elemLen, growBy, grows, memGrow uint32) {
		// What fits in a module of MaxModuleSize (each table, global and
		// byte takes at least one byte of the module).
		tables %= 200
		globals %= 200_000
		dataLen %= 1 << 20
		elemLen %= 1 << 20
		memMin %= 2048
		if memMax != 0 {
			memMax %= 65537
		}
		wasm := declModule(tables, tableMin, tableMax, globals, memMin, memMax, dataLen, elemLen, growBy, grows%10_000, memGrow)
		v, err := p.Load(context.Background(), wasm, "")
		if err != nil {
			t.Logf("refused: %v", err)
			return
		}
		_, cerr := filter(v, nodeInfo("n", nil, false))
		t.Logf("loaded; filter: %v", cerr)
		// What the module left live (the collection first: garbage of
		// other tests in the same process does not count).
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if grew := int64(ms.HeapAlloc) - int64(base.HeapAlloc); grew > 1<<30 {
			t.Fatalf("heap grew by %d MiB (to %d MiB) after a module of %d tables (min %d, max %d) grown by %d ×%d", grew>>20, ms.HeapAlloc>>20, tables, tableMin, tableMax, growBy, grows)
		}
	})
}
