package sdk

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

// randomDomain draws names that share prefixes and differ in length, so
// the binary search meets every order of two strings.
func randomDomain(r *rand.Rand) string {
	parts := []string{"", "a", "node", "node-1", "node-10", "zone-b", "\xff", "é"}
	s := parts[r.IntN(len(parts))]
	for range r.IntN(3) {
		s += parts[r.IntN(len(parts))]
	}
	return s
}

// DomainCounts and ExistingSums, read by binary search over the encoding,
// answer what the map and the slice of the same answer hold, for every
// listed key and for keys not listed (absent ones are 0).
func TestSortedAnswersMatchDecoded(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 11))
	for round := range 300 {
		counts := map[string]int64{}
		for range r.IntN(40) {
			counts[randomDomain(r)] = r.Int64N(2000) - 1000
		}
		d := DomainCounts{indexList(model.EncodeCounts(counts), 2)}
		if d.Len() != len(counts) {
			t.Fatalf("round %d: %d domains, want %d", round, d.Len(), len(counts))
		}
		for i := range d.Len() {
			k, v := d.At(i)
			if counts[k] != v || (i > 0 && func() bool { p, _ := d.At(i - 1); return p >= k }()) {
				t.Fatalf("round %d: At(%d) = %q %d, map %d", round, i, k, v, counts[k])
			}
		}
		for range 50 {
			k := randomDomain(r)
			if got := d.Get(k); got != counts[k] {
				t.Fatalf("round %d: Get(%q) = %d, map %d", round, k, got, counts[k])
			}
		}

		var sums []model.TopologySum
		seen := map[[2]string]bool{}
		for range r.IntN(40) {
			k, v := []string{"zone", "kubernetes.io/hostname", "rack", "z"}[r.IntN(4)], randomDomain(r)
			if !seen[[2]string{k, v}] {
				seen[[2]string{k, v}] = true
				sums = append(sums, model.TopologySum{Key: k, Value: v, Sum: r.Int64N(100) + 1})
			}
		}
		s := newExistingSums(model.EncodeTopologySums(sums))
		var keys []string
		want := map[[2]string]int64{}
		for _, x := range sums {
			want[[2]string{x.Key, x.Value}] = x.Sum
			if !slices.Contains(keys, x.Key) {
				keys = append(keys, x.Key)
			}
		}
		slices.Sort(keys)
		if fmt.Sprint(s.Keys()) != fmt.Sprint(keys) || s.Len() != len(sums) {
			t.Fatalf("round %d: keys %q (%d pairs), want %q (%d)", round, s.Keys(), s.Len(), keys, len(sums))
		}
		for range 80 {
			k, v := []string{"zone", "kubernetes.io/hostname", "rack", "z", "zz", ""}[r.IntN(6)], randomDomain(r)
			if got := s.Get(k, v); got != want[[2]string{k, v}] {
				t.Fatalf("round %d: Get(%q, %q) = %d, want %d", round, k, v, got, want[[2]string{k, v}])
			}
		}
		for _, x := range sums {
			if got := s.Get(x.Key, x.Value); got != x.Sum {
				t.Fatalf("round %d: Get(%q, %q) = %d, want %d", round, x.Key, x.Value, got, x.Sum)
			}
		}
	}
}

// A list cut short keeps the whole records before the cut, never reads
// past it.
func TestSortedListCutShort(t *testing.T) {
	b := model.EncodeCounts(map[string]int64{"a": 1, "b": 2, "c": 3})
	for n := 0; n <= len(b); n++ {
		d := DomainCounts{indexList(b[:n], 2)}
		for _, k := range []string{"a", "b", "c", "d"} {
			_ = d.Get(k)
		}
		if n == len(b) && (d.Len() != 3 || d.Get("c") != 3) {
			t.Fatalf("whole list: %d domains, c = %d", d.Len(), d.Get("c"))
		}
		if n < len(b) && d.Len() > 2 {
			t.Fatalf("list cut at %d of %d bytes: %d domains", n, len(b), d.Len())
		}
	}
}

// compareBytes orders as strings.Compare for strings that share prefixes
// of every length, differ in any byte of a word (high bytes included) or
// only in length.
func TestCompareBytesMatchesStringsCompare(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 9))
	alphabet := []byte{0, 1, 'a', 'b', 0x7f, 0x80, 0xfe, 0xff}
	draw := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return b
	}
	for range 20000 {
		prefix := draw(r.IntN(30))
		a := append(slices.Clone(prefix), draw(r.IntN(12))...)
		b := append(slices.Clone(prefix), draw(r.IntN(12))...)
		if got, want := compareBytes(a, string(b)), strings.Compare(string(a), string(b)); got != want {
			t.Fatalf("compareBytes(%q, %q) = %d, strings.Compare %d", a, b, got, want)
		}
	}
}
