package hostabi

import (
	"slices"
	"sync"
	"sync/atomic"
)

// PodReads is which of the pod's labels and annotations the guests of one
// policy version have read, by key, over every call they made. A verdict
// remembered across cycles is keyed on the pod (PodState.KeyFor) through
// these keys only: pods that differ in a label no guest of the version
// reads (a StatefulSet's pod-name label, scheduler_perf's per-pod
// "signature" label) share verdicts, as the pods of one ReplicaSet do.
// Everything else a policy can read of the pod is in the key whole.
//
// The set only grows. Each change makes a new PodReadSet with the next
// generation: a verdict is remembered only under the generation its key
// was computed with, so a call that read a key the set did not hold yet
// (its verdicts depend on it) remembers nothing under the old key.
type PodReads struct {
	mu  sync.Mutex
	cur atomic.Pointer[PodReadSet]
}

// PodReadSet is one generation of a PodReads. It is never changed once
// published.
type PodReadSet struct {
	// Gen counts the set's changes.
	Gen uint32
	// Labels and Annotations are the keys read, sorted; AllLabels and
	// AllAnnotations say the whole map was read (pod_list), or more keys
	// than maxPodReadKeys.
	Labels, Annotations       []string
	AllLabels, AllAnnotations bool
}

// maxPodReadKeys bounds the keys a set holds of each map, and
// maxPodReadKeyLen each key's length (a Kubernetes label or annotation key
// is at most a 253-byte prefix, a slash and a 63-byte name): a guest that
// reads more keys, or a longer one, has the whole map in its key. The set
// is kept for as long as its version, so what a guest reads must not make
// it grow (a guest looking up a 63 MiB key in a loop, hostflood).
const (
	maxPodReadKeys   = 32
	maxPodReadKeyLen = 317
)

// emptyPodReadSet is the set of a version whose guests read no label or
// annotation yet.
var emptyPodReadSet = &PodReadSet{}

// Set returns the current generation.
func (r *PodReads) Set() *PodReadSet {
	if s := r.cur.Load(); s != nil {
		return s
	}
	return emptyPodReadSet
}

// label and annotation record a read of one key; all records a read of
// the whole map. The common case, a key the set holds, takes no lock and
// allocates nothing.
func (r *PodReads) label(key []byte)      { r.add(key, false) }
func (r *PodReads) annotation(key []byte) { r.add(key, true) }

func (r *PodReads) add(key []byte, annotations bool) {
	if r == nil {
		return
	}
	if len(key) > maxPodReadKeyLen {
		r.all(annotations)
		return
	}
	if r.Set().has(key, annotations) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.Set()
	if s.has(key, annotations) {
		return
	}
	n := *s
	n.Gen++
	keys := &n.Labels
	all := &n.AllLabels
	if annotations {
		keys, all = &n.Annotations, &n.AllAnnotations
	}
	if len(*keys) >= maxPodReadKeys {
		*all, *keys = true, nil
	} else {
		k := string(key)
		i, _ := slices.BinarySearch(*keys, k)
		*keys = slices.Insert(slices.Clone(*keys), i, k)
	}
	r.cur.Store(&n)
}

func (r *PodReads) all(annotations bool) {
	if r == nil {
		return
	}
	if s := r.Set(); !annotations && s.AllLabels || annotations && s.AllAnnotations {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := *r.Set()
	n.Gen++
	if annotations {
		n.AllAnnotations, n.Annotations = true, nil
	} else {
		n.AllLabels, n.Labels = true, nil
	}
	r.cur.Store(&n)
}

// has reports whether the set covers key.
func (s *PodReadSet) has(key []byte, annotations bool) bool {
	keys, all := s.Labels, s.AllLabels
	if annotations {
		keys, all = s.Annotations, s.AllAnnotations
	}
	if all {
		return true
	}
	for _, k := range keys {
		if k == string(key) {
			return true
		}
	}
	return false
}
