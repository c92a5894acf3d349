package hostabi

import (
	"fmt"
	"strings"
	"testing"
)

// The keys a version's guests read are kept sorted, each once; a new key
// makes a new generation and a key already held does not. Past
// maxPodReadKeys keys, or with a key longer than any Kubernetes key, the
// set holds the whole map instead: what a guest reads never makes it grow
// without bound.
func TestPodReadsAreBounded(t *testing.T) {
	var r PodReads
	r.label([]byte("team"))
	r.label([]byte("app"))
	r.label([]byte("team"))
	r.annotation([]byte("note"))
	s := r.Set()
	if fmt.Sprint(s.Labels, s.Annotations, s.Gen, s.AllLabels, s.AllAnnotations) != "[app team] [note] 3 false false" {
		t.Fatalf("set %+v, want labels [app team], annotations [note], generation 3", s)
	}
	r.label([]byte(strings.Repeat("k", maxPodReadKeyLen+1)))
	if s := r.Set(); !s.AllLabels || s.Labels != nil || s.AllAnnotations || len(s.Annotations) != 1 {
		t.Fatalf("after an over-long label key: %+v, want every label and the one annotation", s)
	}
	gen := r.Set().Gen
	r.label([]byte("another"))
	if r.Set().Gen != gen {
		t.Error("a label read after every label is held made a new generation")
	}
	for i := range maxPodReadKeys + 1 {
		r.annotation([]byte(fmt.Sprint("a", i)))
	}
	if s := r.Set(); !s.AllAnnotations || s.Annotations != nil {
		t.Fatalf("after %d annotation keys: %+v, want every annotation", maxPodReadKeys+1, s)
	}
	var none *PodReads // an instance whose version records nothing
	none.label([]byte("team"))
	none.all(false)
}

// Whatever keys a guest reads, in whatever order, the set stays within its
// bounds (at most maxPodReadKeys keys of each map, none longer than
// maxPodReadKeyLen, sorted and each once), covers every key read, and
// changes generation exactly when it changes.
func FuzzPodReadsBounds(f *testing.F) {
	f.Add([]byte("team\x00app\x01note\x00team"))
	f.Add([]byte(strings.Repeat("k", 400) + "\x00x"))
	f.Fuzz(func(t *testing.T, reads []byte) {
		var r PodReads
		for i, k := range bytesSplitAny(reads) {
			annotations := i%3 == 2
			before := r.Set()
			if len(k) == 1 && k[0] == '*' {
				r.all(annotations)
			} else {
				r.add(k, annotations)
			}
			after := r.Set()
			if !after.has(k, annotations) && !(len(k) == 1 && k[0] == '*') {
				t.Fatalf("key %q read but not covered: %+v", k, after)
			}
			state := func(s *PodReadSet) string {
				return fmt.Sprintf("%q %q %v %v", s.Labels, s.Annotations, s.AllLabels, s.AllAnnotations)
			}
			changed := state(before) != state(after)
			if changed != (after.Gen != before.Gen) {
				t.Fatalf("set changed %v, generation %d -> %d", changed, before.Gen, after.Gen)
			}
			for _, keys := range [][]string{after.Labels, after.Annotations} {
				if len(keys) > maxPodReadKeys {
					t.Fatalf("%d keys held", len(keys))
				}
				for j, key := range keys {
					if len(key) > maxPodReadKeyLen || j > 0 && keys[j-1] >= key {
						t.Fatalf("keys %q: too long, unsorted or repeated", keys)
					}
				}
			}
		}
	})
}

// bytesSplitAny splits b at 0 and 1 bytes: the fuzzer's sequence of keys.
func bytesSplitAny(b []byte) [][]byte {
	var out [][]byte
	start := 0
	for i, c := range b {
		if c == 0 || c == 1 {
			out = append(out, b[start:i])
			start = i + 1
		}
	}
	return append(out, b[start:])
}
