package fuel

import (
	"fmt"

	"github.com/wasmsched/wasmsched/host/internal/wasmbin"
)

// skipImmediates reads past the immediates of op, whose opcode byte has been
// read. It knows every instruction of WebAssembly 2.0 and of the proposals
// wazero implements (tail calls, threads, extended constants); it refuses
// anything else rather than guess its length.
func (x *exprRewriter) skipImmediates(r *wasmbin.Reader, op byte) error {
	switch {
	case op == 0x00 || op == 0x01 || op == 0x05 || op == opEnd || op == 0x0f ||
		op == 0x1a || op == 0x1b || (op >= 0x45 && op <= 0xc4) || op == 0xd1:
		// unreachable, nop, else, end, return, drop, select, numeric,
		// ref.is_null: no immediates.
		return nil
	case op == opBlock || op == opLoop || op == opIf:
		return x.blockType(r)
	case op == 0x0c || op == 0x0d: // br, br_if
		_, err := r.U32()
		return err
	case op == 0x0e: // br_table
		n, err := r.VecLen(1)
		if err != nil {
			return err
		}
		x.brTableSquares += (uint64(n) + 1) * (uint64(n) + 1)
		x.maxBrTable = max(x.maxBrTable, n+1)
		for i := uint32(0); i <= n; i++ { // n labels and the default
			if _, err := r.U32(); err != nil {
				return err
			}
		}
		return nil
	case op == 0x11 || op == 0x13: // call_indirect, return_call_indirect: type, table
		typ, err := r.U32()
		if err != nil {
			return err
		}
		if typ >= x.types {
			return fmt.Errorf("unknown type %d", typ)
		}
		_, err = r.U32()
		return err
	case op == 0x1c: // select t*
		n, err := r.VecLen(1)
		if err != nil {
			return err
		}
		_, err = r.Bytes(uint64(n))
		return err
	case op == opGlobalGet || op == opGlobalSet:
		g, err := r.U32()
		if err == nil && g >= x.globals {
			err = fmt.Errorf("unknown global %d", g)
		}
		return err
	case op >= 0x20 && op <= 0x26: // local.*, table.get/set
		_, err := r.U32()
		return err
	case op >= 0x28 && op <= 0x3e: // loads and stores
		return memarg(r)
	case op == 0x3f || op == 0x40: // memory.size, memory.grow
		_, err := r.U32()
		return err
	case op == opI32Const:
		_, err := r.SLEB(32)
		return err
	case op == 0x42:
		_, err := r.SLEB(64)
		return err
	case op == 0x43:
		_, err := r.Bytes(4)
		return err
	case op == 0x44:
		_, err := r.Bytes(8)
		return err
	case op == 0xd0: // ref.null t
		_, err := r.Byte()
		return err
	case op == prefixMisc:
		return skipMisc(r)
	case op == prefixSIMD:
		return skipSIMD(r)
	case op == prefixAtomic:
		return skipAtomic(r)
	}
	return fmt.Errorf("unknown or unsupported opcode")
}

// blockType reads a block type: empty, a value type (negative), or a type
// index, which must exist.
func (x *exprRewriter) blockType(r *wasmbin.Reader) error {
	bt, err := r.SLEB(33)
	if err == nil && bt >= 0 && uint64(bt) >= uint64(x.types) {
		err = fmt.Errorf("unknown type %d", bt)
	}
	return err
}

// memarg reads a memory argument: alignment (with the multi-memory bit, a
// memory index) and offset.
func memarg(r *wasmbin.Reader) error {
	align, err := r.U32()
	if err != nil {
		return err
	}
	if align&0x40 != 0 {
		if _, err := r.U32(); err != nil {
			return err
		}
	}
	_, err = r.ULEB(64)
	return err
}

func skipMisc(r *wasmbin.Reader) error {
	sub, err := r.U32()
	if err != nil {
		return err
	}
	n := 0
	switch {
	case sub <= 7: // saturating truncations
	case sub == 9 || sub == 11 || sub == 13 || (sub >= 15 && sub <= 17):
		n = 1 // data.drop, memory.fill, elem.drop, table.grow/size/fill
	case sub == 8 || sub == 10 || sub == 12 || sub == 14:
		n = 2 // memory.init, memory.copy, table.init, table.copy
	default:
		return fmt.Errorf("unknown 0xfc sub-opcode %d", sub)
	}
	for ; n > 0; n-- {
		if _, err := r.U32(); err != nil {
			return err
		}
	}
	return nil
}

func skipSIMD(r *wasmbin.Reader) error {
	sub, err := r.U32()
	if err != nil {
		return err
	}
	switch {
	case sub <= 11 || sub == 92 || sub == 93: // v128 loads and stores
		return memarg(r)
	case sub == 12 || sub == 13: // v128.const, i8x16.shuffle
		_, err := r.Bytes(16)
		return err
	case sub >= 21 && sub <= 34: // extract_lane, replace_lane
		_, err := r.Byte()
		return err
	case sub >= 84 && sub <= 91: // load/store lane
		if err := memarg(r); err != nil {
			return err
		}
		_, err := r.Byte()
		return err
	case sub <= 0x113: // every other SIMD and relaxed SIMD instruction
		return nil
	}
	return fmt.Errorf("unknown 0xfd sub-opcode %d", sub)
}

func skipAtomic(r *wasmbin.Reader) error {
	sub, err := r.U32()
	if err != nil {
		return err
	}
	switch {
	case sub == 3: // atomic.fence
		_, err := r.Byte()
		return err
	case sub <= 2 || (sub >= 0x10 && sub <= 0x4e):
		return memarg(r)
	}
	return fmt.Errorf("unknown 0xfe sub-opcode %d", sub)
}
