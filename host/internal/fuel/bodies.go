package fuel

import (
	"github.com/wasmsched/wasmsched/host/internal/wasmbin"
)

// bulkChunk is the most memory.fill and memory.copy move between two
// charges: each chunk of a longer one is charged (and, since it costs more
// than refuelAmount units, checks the deadline) before it runs. A 64 MiB
// fill of memory never touched took 25-50 ms here in one piece.
const bulkChunk = 1 << 20

// Opcodes of the helpers' code.
var (
	memFill = []byte{prefixMisc, 11, 0}
	memCopy = []byte{prefixMisc, 10, 0, 0}
)

// inBounds pushes whether [local a, local a + local n) lies in memory:
// (u64) a + n <= memory.size << 16.
func inBounds(b []byte, a, n byte) []byte {
	b = append(b, opLocalGet, a, opI64ExtendI32U, opLocalGet, n, opI64ExtendI32U, opI64Add)
	return append(b, opMemorySize, 0, opI64ExtendI32U, opI64Const, 16, opI64Shl, opI64LeU)
}

// fillBody is $fill (d, v, n): memory.fill in chunks of bulkChunk, each
// charged first. A fill that is out of bounds is left to memory.fill
// itself, which traps before it writes anything, as the specification
// says; one in bounds writes the same bytes in pieces.
func fillBody(charge uint32) []byte {
	b := []byte{0}
	b = inBounds(b, 0, 2)
	b = append(b, opI32Eqz, opIf, blockTypeEmpty, opLocalGet, 0, opLocalGet, 1, opLocalGet, 2)
	b = append(append(b, memFill...), opReturn, opEnd)
	b = append(b, opBlock, blockTypeEmpty, opLoop, blockTypeEmpty)
	b = sconst(append(b, opLocalGet, 2), bulkChunk)
	b = append(b, opI32LeU, opBrIf, 1)
	b = wasmbin.AppendU32(append(sconst(b, bulkChunk), opCall), charge)
	b = append(b, opDrop, opLocalGet, 0, opLocalGet, 1)
	b = append(sconst(b, bulkChunk), memFill...)
	b = append(sconst(append(b, opLocalGet, 0), bulkChunk), opI32Add, opLocalSet, 0)
	b = append(sconst(append(b, opLocalGet, 2), bulkChunk), opI32Sub, opLocalSet, 2)
	b = append(b, opBr, 0, opEnd, opEnd)
	b = append(b, opLocalGet, 0, opLocalGet, 1, opLocalGet, 2)
	b = wasmbin.AppendU32(append(b, opCall), charge)
	return append(append(b, memFill...), opEnd)
}

// copyBody is $copy (d, s, n): memory.copy in chunks of bulkChunk, each
// charged first, low chunks first when d <= s and high chunks first
// otherwise, so that overlapping ranges copy as one memory.copy would.
func copyBody(charge uint32) []byte {
	b := []byte{0}
	b = inBounds(b, 0, 2)
	b = inBounds(b, 1, 2)
	b = append(b, opI32And, opI32Eqz, opIf, blockTypeEmpty, opLocalGet, 0, opLocalGet, 1, opLocalGet, 2)
	b = append(append(b, memCopy...), opReturn, opEnd)
	step := func(b []byte, forward bool) []byte {
		b = append(b, opBlock, blockTypeEmpty, opLoop, blockTypeEmpty)
		b = sconst(append(b, opLocalGet, 2), bulkChunk)
		b = append(b, opI32LeU, opBrIf, 1)
		b = append(sconst(append(b, opLocalGet, 2), bulkChunk), opI32Sub, opLocalSet, 2)
		b = wasmbin.AppendU32(append(sconst(b, bulkChunk), opCall), charge)
		b = append(b, opDrop)
		if forward {
			b = append(b, opLocalGet, 0, opLocalGet, 1)
			b = append(sconst(b, bulkChunk), memCopy...)
			b = append(sconst(append(b, opLocalGet, 0), bulkChunk), opI32Add, opLocalSet, 0)
			b = append(sconst(append(b, opLocalGet, 1), bulkChunk), opI32Add, opLocalSet, 1)
		} else {
			b = append(b, opLocalGet, 0, opLocalGet, 2, opI32Add, opLocalGet, 1, opLocalGet, 2, opI32Add)
			b = append(sconst(b, bulkChunk), memCopy...)
		}
		return append(b, opBr, 0, opEnd, opEnd)
	}
	b = append(b, opLocalGet, 0, opLocalGet, 1, opI32LeU, opIf, blockTypeEmpty)
	b = step(b, true)
	b = append(b, opElse)
	b = step(b, false)
	b = append(b, opEnd, opLocalGet, 0, opLocalGet, 1, opLocalGet, 2)
	b = wasmbin.AppendU32(append(b, opCall), charge)
	return append(append(b, memCopy...), opEnd)
}

// sconst appends i32.const v.
func sconst(b []byte, v int32) []byte { return AppendI32Const(b, v) }

// AppendI32Const appends the instruction i32.const v (its immediate a
// signed LEB128), for tests that build modules by hand.
func AppendI32Const(b []byte, v int32) []byte { return appendSLEB(append(b, opI32Const), int64(v)) }

// appendSLEB appends v as a signed LEB128.
func appendSLEB(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// chargeBody is the code of $charge (i32 n) -> i32:
//
//	if (n >> bulkShift) <u fuel { fuel -= n >> bulkShift } else { fuel = refuel() }
//	return n
//
// A bulk instruction the fuel left cannot pay for checks the deadline
// first; the unpaid rest is forgiven, as a loop's units are between two
// checks.
func chargeBody(global, refuel uint32) []byte {
	cost := []byte{opLocalGet, 0, opI32Const, bulkShift, opI32ShrU}
	b := []byte{0} // no locals
	b = append(b, cost...)
	b = wasmbin.AppendU32(append(b, opGlobalGet), global)
	b = append(b, opI32LtU, opIf, blockTypeEmpty)
	b = wasmbin.AppendU32(append(b, opGlobalGet), global)
	b = append(b, cost...)
	b = wasmbin.AppendU32(append(b, opI32Sub, opGlobalSet), global)
	b = wasmbin.AppendU32(append(b, opElse, opCall), refuel)
	b = wasmbin.AppendU32(append(b, opGlobalSet), global)
	return append(b, opEnd, opLocalGet, 0, opEnd)
}
