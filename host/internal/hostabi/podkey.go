package hostabi

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/wasmsched/wasmsched/guest-sdk/model"
	"github.com/wasmsched/wasmsched/internal/kubemodel"
)

// A pod's keys: digests of what policies can read of it, which the
// verdict memo and the signature of pods (SignPod) are keyed by.

// podIdentity reports whether pod_string field f tells pods of one template
// apart: their names, UIDs and creation times differ, everything else a
// policy reads of them is the same.
func podIdentity(f int32) bool {
	return f == model.PodName || f == model.PodUID || f == model.PodCreationTimestamp
}

// Key is KeyFor a set with every label and annotation: a digest of
// everything a policy can read of the pod but its identity (podIdentity)
// and what the cluster decides (the default spread selector). Pods of one
// ReplicaSet have the same key. Computed once.
func (p *PodState) Key() [32]byte {
	p.keyOnce.Do(func() {
		p.key = p.KeyFor(allPodReads)
		p.keyDone.Store(true)
	})
	return p.key
}

// TakeKeys gives p, a new cycle's state, the keys that prev, an earlier
// cycle of the same pod object, has computed so far. Both keys are
// functions of the pod object alone (what the cluster decides is left
// out), and the caller vouches that the object did not change between the
// cycles: a pod-group cycle tries each member once per placement, and
// hashing every part of the pod again was a fifth of WasmPolicy's time in
// topology-aware groups (5 placements, docs/performance.md). Call it
// before p is shared.
func (p *PodState) TakeKeys(prev *PodState) {
	if prev == nil || prev == p || prev.Pod != p.Pod {
		return
	}
	if prev.baseDone.Load() {
		b := prev.base
		p.baseOnce.Do(func() {
			p.base = b
			p.baseDone.Store(true)
		})
	}
	if prev.keyDone.Load() {
		k := prev.key
		p.keyOnce.Do(func() {
			p.key = k
			p.keyDone.Store(true)
		})
	}
}

// allPodReads reads every label and annotation.
var allPodReads = &PodReadSet{AllLabels: true, AllAnnotations: true}

// KeyFor is a digest of what a policy whose guests read the pod's labels
// and annotations in set can read of the pod: the base key (everything
// but the pod's identity, its labels and its annotations) and the values
// of set's keys (or the whole maps). Two pods with equal keys for a
// version's set get the same verdicts from it.
func (p *PodState) KeyFor(set *PodReadSet) [32]byte {
	base := p.baseKey()
	h := sha256.New()
	h.Write(base[:])
	var n [8]byte
	put := func(s string) {
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	kv := func(tag string, all bool, keys []string, list int32, m map[string]string) {
		put(tag)
		if all {
			b, _ := p.list(list)
			put(string(b))
			return
		}
		for _, k := range keys {
			put(k)
			if v, ok := m[k]; ok {
				put("=" + v)
			} else {
				put("")
			}
		}
	}
	kv("labels", set.AllLabels, set.Labels, model.PodLabels, p.model(kubemodel.PodLabels).Labels)
	kv("annotations", set.AllAnnotations, set.Annotations, model.PodAnnotations, p.model(kubemodel.PodAnnotations).Annotations)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// baseKey is the digest of what a policy can read of the pod but its
// identity, what the cluster decides, its labels and its annotations.
// Computed once.
func (p *PodState) baseKey() [32]byte {
	p.baseOnce.Do(func() {
		h := sha256.New()
		var n [8]byte
		put := func(b []byte) {
			binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
			h.Write(n[:])
			h.Write(b)
		}
		for f := int32(0); f < model.NumPodStrings; f++ {
			if v, _ := p.str(f); !podIdentity(f) {
				put([]byte(v))
			}
		}
		for k := int32(0); k < model.NumPodLists; k++ {
			if k != model.PodDefaultSpreadSelector && k != model.PodLabels && k != model.PodAnnotations {
				b, _ := p.list(k)
				put(b)
			}
		}
		binary.LittleEndian.PutUint64(n[:], uint64(p.priority()))
		h.Write(n[:])
		h.Sum(p.base[:0])
		p.baseDone.Store(true)
	})
	return p.base
}
