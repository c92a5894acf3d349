package abi

import "encoding/binary"

// A string list is how the ABI carries maps and structs: a little-endian u32
// count of strings, then each string as a little-endian u32 length followed by
// its bytes. Maps are key, value, key, value...; structs (taints, tolerations)
// use a fixed number of strings per entry, given with each list kind.

// AppendListHeader appends the count of strings that follow.
func AppendListHeader(dst []byte, n int) []byte {
	return binary.LittleEndian.AppendUint32(dst, uint32(n))
}

// AppendString appends one length-prefixed string.
func AppendString(dst []byte, s string) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(s)))
	return append(dst, s...)
}

// ListReader walks a string list without copying it.
type ListReader struct {
	b   []byte
	n   int
	err bool
}

// NewListReader starts reading the list in b. A truncated list is reported by Err.
func NewListReader(b []byte) ListReader {
	if len(b) < 4 {
		return ListReader{err: len(b) != 0}
	}
	return ListReader{b: b[4:], n: int(binary.LittleEndian.Uint32(b))}
}

// Len returns how many strings are left.
func (r *ListReader) Len() int { return r.n }

// Next returns the next string's bytes (a view into the list) and false when
// the list is exhausted or malformed.
func (r *ListReader) Next() ([]byte, bool) {
	if r.n <= 0 || r.err {
		return nil, false
	}
	if len(r.b) < 4 {
		r.err = true
		return nil, false
	}
	l := binary.LittleEndian.Uint32(r.b)
	if uint64(l) > uint64(len(r.b)-4) {
		r.err = true
		return nil, false
	}
	s := r.b[4 : 4+l]
	r.b = r.b[4+l:]
	r.n--
	return s, true
}

// Err reports whether the list was malformed.
func (r *ListReader) Err() bool { return r.err }
