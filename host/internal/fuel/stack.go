package fuel

import (
	"github.com/wasmsched/wasmsched/host/internal/wasmbin"
)

// The stack check.
//
// wazero runs a guest's calls on a stack of its own that it allocates on
// the Go heap and doubles as the guest's calls go deeper, up to about
// 100 MB (wazevo's callStackCeiling), outside the guest's linear memory and
// its memory limit: a module recursing 600,000 deep held hundreds of MiB.
// The rewrite gives every function that calls other functions a weight,
// an estimate of its frame in StackUnit bytes, and keeps a room counter in
// a global: the function's entry takes its weight from the room and its
// exits (the end of its body and return) give it back, up to a cap. A
// room below zero calls the host's stack import with the room, and the
// import returns the next room, which becomes the cap as well: the host
// measures the stack the call really uses there, ends a call past its
// limit, and sizes the next room from what is left. Since the room goes
// back up as calls return, a call reaches the host only when it goes
// deeper than it went before, a few times per call at most. The cap keeps
// frames that weighed more than they held from handing their weight,
// once they return, to deeper frames that hold more than they weigh.
//
// A tail call gives nothing back: wazero makes one an ordinary call when
// its arguments do not fit in registers, so a tail loop meets the check
// as the room runs out, where the host finds its stack small.
//
// Functions that call nothing are counted only when their own frame may
// be large (leafWeight): they make the stack one frame deeper at most.

// StackUnit is the size in bytes of one unit of the stack room and of the
// functions' weights.
const StackUnit = 16

// StackStart is the room, in bytes, a call starts with before it first
// reaches the host's stack import. The example policies' calls use 10-20
// KiB of stack (wazero's stack starts at 10 KiB) and weigh less than this,
// so most calls never reach the host.
const StackStart = 64 << 10

// maxWeight bounds a function's weight so that the room's arithmetic
// stays far from overflowing an i32.
const maxWeight = 1 << 24

// leafWeight is the estimate, in bytes, from which a function that calls
// nothing is counted too: its one frame may then be larger than the
// room's slack.
const leafWeight = 16 << 10

// FrameEstimate is the weight, in bytes, of a function with params
// parameters, locals declared locals, instrs instructions and calls
// that pass and return at most slots values: what wazero's compiler may
// keep in its frame (every local and value spilled, the call's
// arguments and results beyond the registers, return address and frame
// pointer). It is an estimate, not a bound: the host measures the real
// stack when the room runs out and shrinks the next room when the frames
// turned out larger than their weights.
func FrameEstimate(params, locals, instrs, slots uint64) uint64 {
	return 64 + 16*(params+locals) + 4*instrs + 8*slots
}

func weight(params, locals, instrs, slots uint64) int32 {
	w := (FrameEstimate(params, locals, instrs, slots) + StackUnit - 1) / StackUnit
	return int32(min(w, maxWeight))
}

// stackPrologue takes w from the room and calls the stack import with the
// room when it went below zero, storing what the import returns as the
// room and the cap:
//
//	global.get $room; i32.const w; i32.sub; global.set $room
//	global.get $room; i32.const 0; i32.lt_s
//	if; global.get $room; call $stack; global.set $room
//	    global.get $room; global.set $cap; end
func stackPrologue(b []byte, global, capGlobal, check uint32, w int32) []byte {
	b = wasmbin.AppendU32(append(b, opGlobalGet), global)
	b = append(AppendI32Const(b, w), opI32Sub, opGlobalSet)
	b = wasmbin.AppendU32(b, global)
	b = wasmbin.AppendU32(append(b, opGlobalGet), global)
	b = append(b, opI32Const, 0, opI32LtS, opIf, blockTypeEmpty, opGlobalGet)
	b = wasmbin.AppendU32(b, global)
	b = wasmbin.AppendU32(append(b, opCall), check)
	b = wasmbin.AppendU32(append(b, opGlobalSet), global)
	b = wasmbin.AppendU32(append(b, opGlobalGet), global)
	b = wasmbin.AppendU32(append(b, opGlobalSet), capGlobal)
	return append(b, opEnd)
}

// stackEpilogue gives w back to the room, up to the cap:
//
//	global.get $room; i32.const w; i32.add
//	global.get $cap
//	global.get $room; i32.const w; i32.add; global.get $cap; i32.lt_s
//	select; global.set $room
func stackEpilogue(global, capGlobal uint32, w int32) []byte {
	back := func(b []byte) []byte {
		b = wasmbin.AppendU32(append(b, opGlobalGet), global)
		return append(AppendI32Const(b, w), opI32Add)
	}
	b := back(nil)
	b = wasmbin.AppendU32(append(b, opGlobalGet), capGlobal)
	b = back(b)
	b = wasmbin.AppendU32(append(b, opGlobalGet), capGlobal)
	b = append(b, opI32LtS, opSelect, opGlobalSet)
	return wasmbin.AppendU32(b, global)
}

// bodyStats is what the weight of a function body is made of.
type bodyStats struct {
	calls         bool
	instrs, slots uint64
}

// scanBody counts a body's instructions and finds its calls and the most
// values one of them passes and returns. It reads a copy of r with a copy
// of x, so the rewrite proper starts where it would have and counts the
// shape once.
func (m *module) scanBody(r wasmbin.Reader, x exprRewriter) bodyStats {
	var st bodyStats
	slotsOf := func(t uint32) uint64 {
		if int(t) < len(m.typeParams) {
			return uint64(m.typeParams[t]) + uint64(len(m.typeResults[t]))
		}
		return 0
	}
	for r.Pos < r.End {
		op, err := r.Byte()
		if err != nil {
			break
		}
		st.instrs++
		switch op {
		case opCall, opReturnCall:
			f, err := r.U32()
			if err != nil {
				return st
			}
			st.calls = true
			switch {
			case f < m.importedFuncs && int(f) < len(m.importTypes):
				st.slots = max(st.slots, slotsOf(m.importTypes[f]))
			case f >= m.importedFuncs && int(f-m.importedFuncs) < len(m.funcTypes):
				st.slots = max(st.slots, slotsOf(m.funcTypes[f-m.importedFuncs]))
			}
			continue
		case opRefFunc:
			if _, err := r.U32(); err != nil {
				return st
			}
			continue
		case opCallIndirect, opReturnCallIndirect:
			save := r.Pos
			if t, err := r.U32(); err == nil {
				st.slots = max(st.slots, slotsOf(t))
			}
			r.Pos = save
			st.calls = true
		}
		if x.skipImmediates(&r, op) != nil {
			break
		}
	}
	return st
}

// wrapperBlockType is the block type of a block whose results are a
// function's of type t: empty, one value type, or a type index (t
// itself when it has no parameters).
func (m *module) wrapperBlockType(t uint32, x *exprRewriter) []byte {
	res := m.typeResults[t]
	switch {
	case len(res) == 0:
		return []byte{blockTypeEmpty}
	case len(res) == 1:
		return []byte{res[0]}
	case m.typeParams[t] == 0:
		return appendSLEB(nil, int64(t))
	}
	return appendSLEB(nil, int64(x.newBlockType(res)))
}
