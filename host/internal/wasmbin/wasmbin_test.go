package wasmbin

import (
	"errors"
	"strings"
	"testing"
)

// The reader's integers follow the binary format: signed immediates
// decode sign-extended, an unsigned one past its width is refused, and a
// length never outruns the bytes left.
func TestReader(t *testing.T) {
	// i32.const -2147483648 is five bytes whose last has high bits set:
	// a signed read, not an unsigned one.
	r := NewReader([]byte{0x80, 0x80, 0x80, 0x80, 0x78})
	if v, err := r.SLEB(32); err != nil || v != -1<<31 {
		t.Errorf("SLEB(32) = %d, %v", v, err)
	}
	if _, err := NewReader([]byte{0x80, 0x80, 0x80, 0x80, 0x78}).U32(); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Errorf("U32 of a 33-bit value: %v", err)
	}
	if _, err := NewReader([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x01}).U32(); err == nil || !strings.Contains(err.Error(), "too long") {
		t.Errorf("U32 of six bytes: %v", err)
	}
	// A vector of 2^31 entries in 3 bytes is refused before anything is sized.
	r = NewReader([]byte{0x80, 0x80, 0x80, 0x80, 0x08, 1, 2})
	if _, err := r.Count("imports", 1); err == nil || !strings.Contains(err.Error(), "imports declares 2147483648 entries, only 2 bytes are left") {
		t.Errorf("Count: %v", err)
	}
	// Sub-readers share the bytes and stop at their own end.
	r = NewReader([]byte{7, 2, 0xaa, 0xbb, 0xcc})
	id, sub, err := r.Sized("section")
	if err != nil || id != 7 || sub.Left() != 2 || r.Left() != 1 {
		t.Fatalf("Sized: %d %+v %v, left %d", id, sub, err, r.Left())
	}
	if _, err := sub.Bytes(3); !errors.Is(err, ErrTruncated) {
		t.Errorf("reading past a sub-reader's end: %v", err)
	}
	// Encoding round-trips.
	b := AppendSection(nil, 1, AppendName(AppendU32(nil, 300), "ab"))
	r = NewReader(b)
	if id, sub, err := r.Sized("section"); err != nil || id != 1 {
		t.Fatal(err)
	} else if n, _ := sub.U32(); n != 300 {
		t.Errorf("U32 round trip: %d", n)
	} else if s, _ := sub.Name(); s != "ab" {
		t.Errorf("Name round trip: %q", s)
	}
	// Constant expressions: i32.const with a negative five-byte immediate,
	// then end.
	if err := NewReader([]byte{0x41, 0x80, 0x80, 0x80, 0x80, 0x78, 0x0b}).ConstExpr(); err != nil {
		t.Errorf("ConstExpr: %v", err)
	}
}
