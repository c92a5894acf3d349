package fuel

import (
	"github.com/wasmsched/wasmsched/host/internal/wasmbin"
)

// smallFillMax is the longest memory.fill of constant length and value
// that smallFill writes inline.
const smallFillMax = 256

// smallFillBudget bounds the code smallFill adds to one module, and
// smallFillBytes is the most one fill adds (smallFillMax/8 + 3 stores of at
// most 20 bytes, and the local.set). A fill of 256 bytes is 10 bytes of
// code and about 260 inline: without a bound, a module of nothing but
// fills would grow 26-fold past the compile limits it was checked against
// (docs/security.md). TinyGo's frame clears in a policy add a few KiB;
// past the budget a fill goes through $fill as before.
const (
	smallFillBudget = 256 << 10
	smallFillBytes  = (smallFillMax/8+3)*20 + 6
)

// maxLocalsForScratch is how many locals a function may have for
// smallFill to add one more.
const maxLocalsForScratch = 10000

// smallFill replaces "i32.const v; i32.const n; memory.fill" (the address
// below them on the stack) by stores of n bytes of v, n in 1..smallFillMax:
// the address goes into the scratch local, and the stores run from the
// highest bytes down, so a fill that does not fit in memory traps at the
// first store, before it has written anything, as memory.fill does.
//
// Why: TinyGo clears the stack frame of every function that keeps
// pointers across a call with such a fill (84 bytes in the bin-packing
// example's Score). wazero runs memory.fill as a byte store and a doubling
// series of memmove calls into the Go runtime, and the rewrite routes it
// through $fill besides: 30-40 ns per call, a fifth of a node's Score.
// Inline stores of a constant are a few ns and need no charge (at most
// smallFillMax/8 + 3 of them, counted as straight-line code).
func (x *exprRewriter) smallFill(out []byte, v byte, n uint32) []byte {
	out = wasmbin.AppendU32(append(out, opLocalSet), x.tmp)
	store := func(op byte, off uint32, value []byte) {
		out = wasmbin.AppendU32(append(out, opLocalGet), x.tmp)
		out = append(out, value...)
		out = wasmbin.AppendU32(append(out, op, 0), off) // alignment 1: any address
	}
	v32 := int32(uint32(v) * 0x01010101)
	word := uint64(v) * 0x0101010101010101
	off := n
	if n&1 != 0 {
		off--
		store(opI32Store8, off, AppendI32Const(nil, v32))
	}
	if n&2 != 0 {
		off -= 2
		store(opI32Store16, off, AppendI32Const(nil, v32))
	}
	if n&4 != 0 {
		off -= 4
		store(opI32Store, off, AppendI32Const(nil, v32))
	}
	for off >= 8 {
		off -= 8
		store(opI64Store, off, appendI64Const(nil, int64(word)))
	}
	return out
}

// appendI64Const appends i64.const v.
func appendI64Const(b []byte, v int64) []byte { return appendSLEB(append(b, opI64Const), v) }
