// Package wasmbin reads and writes the WebAssembly binary format for the
// host's own passes over untrusted modules: the bounds check that runs
// before wazero decodes a module (host/bounds.go) and the instrumentation
// rewriter (host/internal/fuel). It is the one reader both use.
//
// A module is hostile until proven otherwise, so the reader never sizes an
// allocation or a loop from a length it reads without checking that length
// against the bytes that are left, and every error names the byte offset.
package wasmbin

import (
	"errors"
	"fmt"
)

// ErrTruncated is returned (wrapped with the offset) when a length or an
// immediate runs past the end of what holds it.
var ErrTruncated = errors.New("unexpected end")

// Reader reads B[Pos:End]. A sub-reader (Sized, or a function body) shares
// B and narrows End, so nothing is copied.
type Reader struct {
	B        []byte
	Pos, End int
}

// NewReader reads all of b.
func NewReader(b []byte) *Reader { return &Reader{B: b, End: len(b)} }

// Left is how many bytes are left to read.
func (r *Reader) Left() int { return r.End - r.Pos }

// Errorf is an error at the reader's offset.
func (r *Reader) Errorf(format string, args ...any) error {
	return fmt.Errorf("at byte %d: "+format, append([]any{r.Pos}, args...)...)
}

func (r *Reader) truncated() error { return fmt.Errorf("at byte %d: %w", r.Pos, ErrTruncated) }

// Byte reads one byte.
func (r *Reader) Byte() (byte, error) {
	if r.Pos >= r.End {
		return 0, r.truncated()
	}
	r.Pos++
	return r.B[r.Pos-1], nil
}

// Bytes reads n bytes, without copying them.
func (r *Reader) Bytes(n uint64) ([]byte, error) {
	if n > uint64(r.Left()) {
		return nil, r.truncated()
	}
	s := r.B[r.Pos : r.Pos+int(n)]
	r.Pos += int(n)
	return s, nil
}

// Skip skips n bytes.
func (r *Reader) Skip(n int) error {
	if n < 0 || n > r.Left() {
		return r.truncated()
	}
	r.Pos += n
	return nil
}

// ULEB reads an unsigned LEB128 of at most bits bits.
func (r *Reader) ULEB(bits uint) (uint64, error) {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		c, err := r.Byte()
		if err != nil {
			return 0, err
		}
		if shift >= bits {
			return 0, fmt.Errorf("integer representation too long at offset %d", r.Pos-1)
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			if bits < 64 && v>>bits != 0 {
				return 0, fmt.Errorf("integer too large at offset %d", r.Pos-1)
			}
			return v, nil
		}
	}
}

// U32 reads an unsigned 32-bit LEB128 (an index or a length).
func (r *Reader) U32() (uint32, error) {
	v, err := r.ULEB(32)
	return uint32(v), err
}

// SLEB reads a signed LEB128 of at most bits bits (64 or fewer).
func (r *Reader) SLEB(bits uint) (int64, error) {
	var v int64
	for shift := uint(0); ; shift += 7 {
		c, err := r.Byte()
		if err != nil {
			return 0, err
		}
		if shift >= bits {
			return 0, fmt.Errorf("integer representation too long at offset %d", r.Pos-1)
		}
		v |= int64(c&0x7f) << shift
		if c&0x80 == 0 {
			if shift+7 < 64 && c&0x40 != 0 {
				v |= -1 << (shift + 7)
			}
			return v, nil
		}
	}
}

// Count reads a vector length and checks that that many elements of at
// least minSize bytes each can follow, so the count may size a slice or a
// loop safely.
func (r *Reader) Count(what string, minSize int) (uint32, error) {
	n, err := r.U32()
	if err != nil {
		return 0, err
	}
	if uint64(n)*uint64(minSize) > uint64(r.Left()) {
		return 0, r.Errorf("%s declares %d entries, only %d bytes are left", what, n, r.Left())
	}
	return n, nil
}

// Name reads a length-prefixed name.
func (r *Reader) Name() (string, error) {
	n, err := r.U32()
	if err != nil {
		return "", err
	}
	b, err := r.Bytes(uint64(n))
	return string(b), err
}

// BytesVec skips a length-prefixed byte string (a name or data).
func (r *Reader) BytesVec(what string) error {
	n, err := r.Count(what, 1)
	if err != nil {
		return err
	}
	r.Pos += int(n)
	return nil
}

// Sized reads an id byte and a byte size, checks that the size fits, and
// returns a reader of those bytes; r moves past them.
func (r *Reader) Sized(what string) (byte, *Reader, error) {
	id, err := r.Byte()
	if err != nil {
		return 0, nil, err
	}
	size, err := r.U32()
	if err != nil {
		return 0, nil, err
	}
	if int(size) > r.Left() {
		return 0, nil, r.Errorf("%s %d declares %d bytes, %d are left", what, id, size, r.Left())
	}
	s := &Reader{B: r.B, Pos: r.Pos, End: r.Pos + int(size)}
	r.Pos = s.End
	return id, s, nil
}

// Limits skips table or memory limits (any flags wazero may accept:
// shared, 64-bit).
func (r *Reader) Limits() error {
	flags, err := r.Byte()
	if err != nil {
		return err
	}
	if flags > 7 {
		return r.Errorf("invalid limits flags 0x%x", flags)
	}
	if _, err := r.ULEB(64); err != nil {
		return err
	}
	if flags&1 != 0 {
		_, err = r.ULEB(64)
	}
	return err
}

// ValType skips a value type: one byte, or a reference type with a heap
// type (typed function references; wazero decodes these whatever its
// enabled features).
func (r *Reader) ValType() error {
	t, err := r.Byte()
	if err == nil && (t == 0x63 || t == 0x64) {
		_, err = r.SLEB(33)
	}
	return err
}

// ValTypes skips a vector of value types.
func (r *Reader) ValTypes(what string) error {
	n, err := r.Count(what, 1)
	for i := uint32(0); err == nil && i < n; i++ {
		err = r.ValType()
	}
	return err
}

// ConstExpr skips a constant expression up to its end opcode.
func (r *Reader) ConstExpr() error {
	for {
		op, err := r.Byte()
		if err != nil {
			return err
		}
		switch op {
		case 0x0b: // end
			return nil
		case 0x41: // i32.const
			_, err = r.SLEB(32)
		case 0x42: // i64.const
			_, err = r.SLEB(64)
		case 0x23, 0xd2: // global.get, ref.func
			_, err = r.U32()
		case 0x43: // f32.const
			err = r.Skip(4)
		case 0x44: // f64.const
			err = r.Skip(8)
		case 0xd0: // ref.null t
			_, err = r.SLEB(33)
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // extended const: add, sub, mul
		case 0xfd: // v128.const
			var sub uint32
			if sub, err = r.U32(); err == nil && sub != 12 {
				return r.Errorf("unsupported vector opcode %d in a constant expression", sub)
			}
			if err == nil {
				err = r.Skip(16)
			}
		default:
			return r.Errorf("unsupported opcode 0x%x in a constant expression", op)
		}
		if err != nil {
			return err
		}
	}
}

// AppendU32 appends v as an unsigned LEB128.
func AppendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

// AppendName appends a length-prefixed name.
func AppendName(b []byte, s string) []byte {
	return append(AppendU32(b, uint32(len(s))), s...)
}

// AppendSection appends a section with its id and size.
func AppendSection(b []byte, id byte, content []byte) []byte {
	b = append(b, id)
	b = AppendU32(b, uint32(len(content)))
	return append(b, content...)
}

// VecLen is Count for a vector the error need not name.
func (r *Reader) VecLen(minSize int) (uint32, error) { return r.Count("vector", minSize) }
