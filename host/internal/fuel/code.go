package fuel

import (
	"fmt"

	"github.com/wasmsched/wasmsched/host/internal/wasmbin"
)

// Opcodes the rewriter acts on; every other opcode is copied with its
// immediates unchanged.
const (
	opBlock              = 0x02
	opLoop               = 0x03
	opIf                 = 0x04
	opElse               = 0x05
	opBr                 = 0x0c
	opBrIf               = 0x0d
	opBrTable            = 0x0e
	opReturn             = 0x0f
	opDrop               = 0x1a
	opLocalSet           = 0x21
	opLocalTee           = 0x22
	opNop                = 0x01
	opMemorySize         = 0x3f
	opI64Const           = 0x42
	opI32Store           = 0x36
	opI64Store           = 0x37
	opI32Store8          = 0x3a
	opI32Store16         = 0x3b
	opI32LeU             = 0x4d
	opI64LeU             = 0x58
	opI32Add             = 0x6a
	opI32And             = 0x71
	opI64Add             = 0x7c
	opI64Shl             = 0x86
	opI64ExtendI32U      = 0xad
	opEnd                = 0x0b
	opLocalGet           = 0x20
	opCall               = 0x10
	opReturnCall         = 0x12
	opCallIndirect       = 0x11
	opReturnCallIndirect = 0x13
	opI32LtS             = 0x48
	opSelect             = 0x1b
	opGlobalGet          = 0x23
	opGlobalSet          = 0x24
	opI32Const           = 0x41
	opI32Eqz             = 0x45
	opI32LtU             = 0x49
	opI32Sub             = 0x6b
	opI32ShrU            = 0x76
	opRefFunc            = 0xd2
	prefixMisc           = 0xfc
	prefixSIMD           = 0xfd
	prefixAtomic         = 0xfe
	blockTypeEmpty       = 0x40
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
	// tmp is the index of a scratch i32 local the body being rewritten
	// may add (tmpOK), for smallFill; usedTmp is set once it did.
	tmp            uint32
	tmpOK, usedTmp bool
	// fillBytes is how many more bytes of code smallFill may add to the
	// module (smallFillBudget at the start).
	fillBytes int
	// The shape of the code rewritten so far (Shape).
	maxDepth, maxBrTable         uint32
	depthSquares, brTableSquares uint64
	// stackGlobal is the stack room's global and stackCheck the stack
	// import's function index. epilogue gives back the body's weight
	// before each return and tail call (nil in a body without calls,
	// which gets no stack check). newBlockType returns the index of a
	// type () -> results, added once per distinct list (blockTypes).
	stackGlobal, stackCheck uint32
	epilogue                []byte
	blockTypes              map[string]uint32
	newBlockType            func(results []byte) uint32
}

// constInsn is one instruction as the rewriter saw it: where it starts,
// and its value if it is an i32.const.
type constInsn struct {
	start   int
	isConst bool
	v       int32
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
	// prev2 and prev1 are the two instructions before the current one,
	// cur the current one: smallFill looks for i32.const v, i32.const n,
	// memory.fill.
	var prev2, prev1, cur constInsn
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
		prev2, prev1, cur = prev1, cur, constInsn{start: start}
		if op == opI32Const {
			peek := *r
			if v, err := peek.SLEB(32); err == nil {
				cur.isConst, cur.v = true, int32(v)
			}
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
		case opReturn:
			if x.epilogue != nil {
				out = append(out, r.B[copied:start]...)
				out = append(out, x.epilogue...)
				copied = start
			}
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
					if sub == 11 && x.tmpOK && prev2.isConst && prev1.isConst && prev2.start >= copied &&
						prev1.v >= 1 && prev1.v <= smallFillMax && r.B[r.Pos-1] == 0 && x.fillBytes >= smallFillBytes {
						out = append(out, r.B[copied:prev2.start]...)
						before := len(out)
						out = x.smallFill(out, byte(prev2.v), uint32(prev1.v))
						x.fillBytes -= len(out) - before
						x.usedTmp = true
						since += int(prev1.v)/8 + 4
						copied = r.Pos
						continue
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
			if depth == 0 && r.Pos != end {
				// The function's end, with code after it: invalid, and
				// the stack check's wrapper block would make it valid.
				return nil, fmt.Errorf("instructions after the end of the function body at offset %d", start)
			}
			depth--
		case opLocalGet, opLocalSet, opLocalTee:
			// A local past the body's own is invalid; the scratch local
			// smallFill may add would make the first such one valid.
			if x.tmpOK {
				peek := *r
				if l, err := peek.U32(); err == nil && l >= x.tmp {
					return nil, fmt.Errorf("opcode 0x%02x at offset %d: unknown local %d", op, start, l)
				}
			}
		case opBr, opBrIf, opBrTable:
			// A label past the function's own is invalid; the stack
			// check's wrapper block would make one such label valid.
			if err := checkLabels(*r, op, depth); err != nil {
				return nil, fmt.Errorf("opcode 0x%02x at offset %d: %w", op, start, err)
			}
		}
		if err := x.skipImmediates(r, op); err != nil {
			return nil, fmt.Errorf("opcode 0x%02x at offset %d: %w", op, start, err)
		}
	}
}

// checkLabels refuses a branch (read from a copy of r, after its opcode)
// to a label past the function's own: in a function body depth blocks
// deep, the labels are 0..depth. Constant expressions have no branches.
func checkLabels(r wasmbin.Reader, op byte, depth int) error {
	n := uint32(1)
	if op == opBrTable {
		v, err := r.VecLen(1)
		if err != nil {
			return err
		}
		n = v + 1
	}
	for ; n > 0; n-- {
		l, err := r.U32()
		if err != nil {
			return err
		}
		if int64(l) > int64(depth) {
			return fmt.Errorf("unknown label %d", l)
		}
	}
	return nil
}
