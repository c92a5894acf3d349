package fuel

import (
	"errors"
	"fmt"
)

// errTruncated is returned when a length or an immediate runs past the end
// of what holds it.
var errTruncated = errors.New("unexpected end")

// reader reads the WebAssembly binary format from b. It never sizes an
// allocation from a length it reads: every length is checked against what
// is left of b first, so a hostile module cannot make it allocate.
type reader struct {
	b   []byte
	pos int
}

func (r *reader) left() int { return len(r.b) - r.pos }

func (r *reader) byte() (byte, error) {
	if r.pos >= len(r.b) {
		return 0, errTruncated
	}
	c := r.b[r.pos]
	r.pos++
	return c, nil
}

func (r *reader) bytes(n uint64) ([]byte, error) {
	if n > uint64(r.left()) {
		return nil, errTruncated
	}
	s := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return s, nil
}

// uleb reads an unsigned LEB128 of at most bits bits.
func (r *reader) uleb(bits uint) (uint64, error) {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		if shift >= bits {
			return 0, fmt.Errorf("integer representation too long at offset %d", r.pos-1)
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			if bits < 64 && v>>bits != 0 {
				return 0, fmt.Errorf("integer too large at offset %d", r.pos-1)
			}
			return v, nil
		}
	}
}

func (r *reader) u32() (uint32, error) {
	v, err := r.uleb(32)
	return uint32(v), err
}

// sleb reads a signed LEB128 of at most bits bits (64 or fewer).
func (r *reader) sleb(bits uint) (int64, error) {
	var v int64
	for shift := uint(0); ; shift += 7 {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		if shift >= bits {
			return 0, fmt.Errorf("integer representation too long at offset %d", r.pos-1)
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

// vecLen reads a vector length and checks that at least min bytes per
// element are left, so a count can size a slice safely.
func (r *reader) vecLen(min int) (uint32, error) {
	n, err := r.u32()
	if err != nil {
		return 0, err
	}
	if uint64(n)*uint64(min) > uint64(r.left()) {
		return 0, errTruncated
	}
	return n, nil
}

func (r *reader) name() (string, error) {
	n, err := r.u32()
	if err != nil {
		return "", err
	}
	b, err := r.bytes(uint64(n))
	return string(b), err
}

// limits skips table or memory limits (any flags wazero may accept:
// shared, 64-bit).
func (r *reader) limits() error {
	flags, err := r.byte()
	if err != nil {
		return err
	}
	if flags > 7 {
		return fmt.Errorf("invalid limits flags 0x%x", flags)
	}
	if _, err := r.uleb(64); err != nil {
		return err
	}
	if flags&1 != 0 {
		_, err = r.uleb(64)
	}
	return err
}

// appendU32 appends v as an unsigned LEB128.
func appendU32(b []byte, v uint32) []byte {
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

func appendName(b []byte, s string) []byte {
	return append(appendU32(b, uint32(len(s))), s...)
}

// appendSection appends a section with its id and size.
func appendSection(b []byte, id byte, content []byte) []byte {
	b = append(b, id)
	b = appendU32(b, uint32(len(content)))
	return append(b, content...)
}
