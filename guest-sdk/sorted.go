package sdk

import (
	"encoding/binary"
	"math/bits"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
)

// DomainCounts is count_pods' answer kept as the host encodes it: every
// domain (a value of the term's topology key) in byte order, with its
// count. Get finds one domain by binary search over that encoding.
//
// Why not a map: a Filter asks one or two domains per node, but every
// instance that serves a call of the cycle would build the map of every
// domain first. With a hostname topology that is a map of all the
// cluster's nodes, per instance per cycle: InterPodAffinity's port spent
// more time building them than filtering (SchedulingPodAntiAffinity at 500
// nodes). Indexing the encoding costs one pass and no string copies.
type DomainCounts struct{ sortedList }

// DomainCounts is CountPods without the map: the same counts, for the
// same term, read by domain (Get) or in order (At). The SDK keeps the
// encoding for the rest of the cycle.
func (Cluster) DomainCounts(term CountTerm) DomainCounts {
	return DomainCounts{indexList(countList(&term), 2)}
}

// Len is how many domains there are.
func (d DomainCounts) Len() int { return len(d.offs) }

// At returns the i-th domain in byte order and its count.
func (d DomainCounts) At(i int) (string, int64) {
	k, next := d.str(d.offs[i])
	v, _ := d.str(next)
	return string(k), parseInt(v)
}

// Get returns the count of domain, 0 when it is not listed.
func (d DomainCounts) Get(domain string) int64 {
	lo, hi := 0, len(d.offs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		k, next := d.str(d.offs[m])
		switch c := compareBytes(k, domain); {
		case c == 0:
			v, _ := d.str(next)
			return parseInt(v)
		case c < 0:
			lo = m + 1
		default:
			hi = m
		}
	}
	return 0
}

// ExistingSums is existing_terms' answer kept as the host encodes it:
// (topology key, value, sum) records sorted by key, then value. Get finds
// one pair by binary search, for the reason DomainCounts gives.
type ExistingSums struct {
	sortedList
	keys []string
	// ends[i] is one past the last record of keys[i]: a key's records are
	// one run of the sorted list, so Get compares values only, within it.
	ends []int
}

// ExistingSums is ExistingTerms without the slice: the same sums, read by
// topology pair (Get), with the distinct keys (Keys) a Filter looks up on
// each node.
func (Cluster) ExistingSums(kind int32) ExistingSums {
	return newExistingSums(append([]byte(nil), existingTerms(kind)...))
}

// newExistingSums indexes existing_terms' encoding b.
func newExistingSums(b []byte) ExistingSums {
	l := indexList(b, 3)
	s := ExistingSums{sortedList: l}
	for i, off := range l.offs {
		k, _ := l.str(off)
		if n := len(s.keys); n == 0 || compareBytes(k, s.keys[n-1]) != 0 {
			s.keys = append(s.keys, string(k))
			s.ends = append(s.ends, i)
		}
		s.ends[len(s.ends)-1] = i + 1
	}
	return s
}

// Len is how many (key, value) pairs there are.
func (s ExistingSums) Len() int { return len(s.offs) }

// Keys returns the distinct topology keys in order; do not change it.
func (s ExistingSums) Keys() []string { return s.keys }

// Get returns the sum of the pair (key, value), 0 when it is not listed.
// It finds the key among Keys (a few, usually) and then the value by
// binary search within that key's records.
func (s ExistingSums) Get(key, value string) int64 {
	lo := 0
	for i, k := range s.keys {
		if k == key {
			return s.sumIn(lo, s.ends[i], value)
		}
		lo = s.ends[i]
	}
	return 0
}

// sumIn finds value among the records [lo, hi), all of one key.
func (s ExistingSums) sumIn(lo, hi int, value string) int64 {
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		_, next := s.str(s.offs[m])
		v, sum := s.str(next)
		switch c := compareBytes(v, value); {
		case c == 0:
			n, _ := s.str(sum)
			return parseInt(n)
		case c < 0:
			lo = m + 1
		default:
			hi = m
		}
	}
	return 0
}

// sortedList is an encoded string list (docs/abi.md §5) with the offset of
// each record's first string.
type sortedList struct {
	b    []byte
	offs []uint32
}

// indexList indexes a string list of records of per strings each. A
// malformed list (or a partial last record) keeps the records before it.
func indexList(b []byte, per int) sortedList {
	r := abi.NewListReader(b)
	n := r.Len() / per
	l := sortedList{b: b, offs: make([]uint32, 0, n)}
	off := uint32(4)
	for range n {
		start := off
		for range per {
			if uint64(off)+4 > uint64(len(b)) {
				return l
			}
			size := binary.LittleEndian.Uint32(b[off:])
			if uint64(off)+4+uint64(size) > uint64(len(b)) {
				return l
			}
			off += 4 + size
		}
		l.offs = append(l.offs, start)
	}
	return l
}

// str returns the string at off (indexList checked it) and the offset of
// the next one.
func (l sortedList) str(off uint32) ([]byte, uint32) {
	size := binary.LittleEndian.Uint32(l.b[off:])
	return l.b[off+4 : off+4+size], off + 4 + size
}

// compareBytes compares b with s in byte order, as strings.Compare would
// (without converting either). It skips equal bytes eight at a time: the
// domains a binary search meets share long prefixes (node names).
func compareBytes(b []byte, s string) int {
	n := min(len(b), len(s))
	i := 0
	for ; i+8 <= n; i += 8 {
		x, y := binary.LittleEndian.Uint64(b[i:]), le64(s[i:])
		if x != y {
			// The lowest differing byte is the first in the string.
			d := bits.TrailingZeros64(x^y) &^ 7
			if byte(x>>d) < byte(y>>d) {
				return -1
			}
			return 1
		}
	}
	for ; i < n; i++ {
		if b[i] != s[i] {
			if b[i] < s[i] {
				return -1
			}
			return 1
		}
	}
	switch {
	case len(b) < len(s):
		return -1
	case len(b) > len(s):
		return 1
	}
	return 0
}

// le64 is binary.LittleEndian.Uint64 of a string's first eight bytes.
func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}
