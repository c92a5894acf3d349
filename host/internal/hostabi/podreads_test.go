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
