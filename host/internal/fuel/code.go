package fuel

import (
	"fmt"

	"github.com/wasmsched/wasmsched/host/internal/wasmbin"
)

// Opcodes the rewriter acts on; every other opcode is copied with its
// immediates unchanged.
const (
	opBlock         = 0x02
	opLoop          = 0x03
	opIf            = 0x04
	opElse          = 0x05
	opBr            = 0x0c
	opBrIf          = 0x0d
	opReturn        = 0x0f
	opDrop          = 0x1a
	opLocalSet      = 0x21
	opMemorySize    = 0x3f
	opI64Const      = 0x42
	opI32LeU        = 0x4d
	opI64LeU        = 0x58
	opI32Add        = 0x6a
	opI32And        = 0x71
	opI64Add        = 0x7c
	opI64Shl        = 0x86
	opI64ExtendI32U = 0xad
	opEnd           = 0x0b
	opLocalGet      = 0x20
	opCall          = 0x10
	opReturnCall    = 0x12
	opGlobalGet     = 0x23
	opGlobalSet     = 0x24
	opI32Const      = 0x41
	opI32Eqz        = 0x45
	opI32LtU        = 0x49
	opI32Sub        = 0x6b
	opI32ShrU       = 0x76
	opRefFunc       = 0xd2
	prefixMisc      = 0xfc
	prefixSIMD      = 0xfd
	prefixAtomic    = 0xfe
	blockTypeEmpty  = 0x40
)

// exprRewriter copies instructions, shifting function indices and adding a
// fuel check after every loop header.
type exprRewriter struct {
	// shift maps an old function index to the new one.
	shift func(uint32) uint32
	// check is the fuel check to insert after each loop's block type
	// (nil: none, as in constant expressions).
	check []byte
	// types and globals are how many the input module has. A reference
	// past them is refused: the rewrite adds a type and a global at those
	// indices and would otherwise turn an invalid module into a valid one.
	types, globals uint32
	// charge, when set, is inserted before every bulk instruction (the
	// call of $charge); memory.fill and memory.copy are replaced by the
	// calls fill and copy (of $fill and $copy), which charge as they go.
	charge, fill, copy []byte
	// usedMemBulk is set once fill or copy was inserted, usedTableGrow
	// once a table.grow was seen.
	usedMemBulk, usedTableGrow bool
	// The shape of the code rewritten so far (Shape).
	maxDepth, maxBrTable         uint32
	depthSquares, brTableSquares uint64
}

// isBulk reports whether a 0xfc sub-opcode is a bulk instruction whose
// length operand is on top of the stack: memory.init, memory.copy,
// memory.fill, table.init, table.copy, table.grow, table.fill.
func isBulk(sub uint32) bool {
	switch sub {
	case 8, 10, 11, 12, 14, 15, 17:
		return true
	}
	return false
}

// StraightLine is the most instructions a function body runs between two
// fuel checks without a loop header in between: the rewriter adds a check
// after each StraightLine of them. Without it a loop whose body is long
// straight-line code (or calls such a function) was charged one unit per
// iteration however much it ran, so it reached its deadline check after
// refuel-many iterations of the whole body: about a second with a
// 100,000-instruction body. With it, a unit is at most StraightLine
// instructions, so both the time between checks and the number of checks
// a call makes measure the work it did (host.ErrStarved). One check
// (about 15 bytes, 3 instructions run) per thousand adds well under 1%.
const StraightLine = 1000

// rewrite copies instructions from r to out until r reaches end (a function
// body), or, when end < 0, through the first end opcode at nesting depth 0
// (a constant expression). Unchanged instructions are copied byte for byte,
// non-canonical LEB128s included.
func (x *exprRewriter) rewrite(r *wasmbin.Reader, out []byte, end int) ([]byte, error) {
	depth, deepest := 0, 0
	defer func() {
		if end >= 0 {
			x.maxDepth = max(x.maxDepth, uint32(min(deepest, 1<<31)))
			x.depthSquares += uint64(deepest) * uint64(deepest)
		}
	}()
	// Unchanged instructions are copied in runs: copied is where the
	// bytes not yet appended to out begin.
	copied := r.Pos
	// since counts the instructions since the last check: a function body
	// gets one more every StraightLine instructions without a loop header.
	since := 0
	for {
		if end >= 0 && r.Pos >= end {
			if r.Pos > end {
				return nil, fmt.Errorf("instruction runs past the end of its function body")
			}
			return append(out, r.B[copied:r.Pos]...), nil
		}
		start := r.Pos
		if since++; end >= 0 && since > StraightLine {
			out = append(out, r.B[copied:start]...)
			out = append(out, x.check...)
			copied, since = start, 1
		}
		op, err := r.Byte()
		if err != nil {
			return nil, err
		}
		switch op {
		case opCall, opReturnCall, opRefFunc:
			f, err := r.U32()
			if err != nil {
				return nil, err
			}
			out = append(out, r.B[copied:start]...)
			out = wasmbin.AppendU32(append(out, op), x.shift(f))
			copied = r.Pos
			continue
		case opLoop:
			if err := x.blockType(r); err != nil {
				return nil, err
			}
			depth++
			deepest = max(deepest, depth)
			out = append(out, r.B[copied:r.Pos]...)
			out = append(out, x.check...)
			copied, since = r.Pos, 0
			continue
		case opBlock, opIf:
			depth++
			deepest = max(deepest, depth)
		case prefixMisc:
			if x.charge != nil {
				save := r.Pos
				sub, err := r.U32()
				if err != nil {
					return nil, err
				}
				r.Pos = save
				x.usedTableGrow = x.usedTableGrow || sub == 15
				if (sub == 10 || sub == 11) && x.fill != nil { // memory.copy, memory.fill
					if err := x.skipImmediates(r, op); err != nil {
						return nil, fmt.Errorf("opcode 0x%02x at offset %d: %w", op, start, err)
					}
					out = append(out, r.B[copied:start]...)
					x.usedMemBulk = true
					if sub == 10 {
						out = append(out, x.copy...)
					} else {
						out = append(out, x.fill...)
					}
					copied = r.Pos
					continue
				}
				if isBulk(sub) {
					out = append(out, r.B[copied:start]...)
					out = append(out, x.charge...)
					copied = start
				}
			}
		case opEnd:
			if depth == 0 && end < 0 {
				return append(out, r.B[copied:r.Pos]...), nil
			}
			depth--
		}
		if err := x.skipImmediates(r, op); err != nil {
			return nil, fmt.Errorf("opcode 0x%02x at offset %d: %w", op, start, err)
		}
	}
}

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
