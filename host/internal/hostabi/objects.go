package hostabi

import (
	"bytes"
	"context"

	"github.com/tetratelabs/wazero/api"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

// ObjectReader reads one declared kind of a policy's objects (docs/abi.md
// §4.10): the scheduler's watch of a kind the operator granted, limited to
// the namespaces the policy may read and to the fields it declared.
type ObjectReader interface {
	// Get returns the declared fields of object namespace/name; found is
	// false when there is none, or the policy may not read namespace.
	Get(namespace, name string) (values []string, found bool)
	// List returns the objects of namespace ("" every namespace the policy
	// may read) whose labels sel matches, ordered by namespace and name;
	// it fails past its bound.
	List(namespace string, sel labels.Selector) ([]model.Object, error)
	// Gen counts the changes of the kind's objects: what Get and List
	// answer is the same while it is (the memo keys on it).
	Gen() uint64
}

// objectReader is the reader of the policy's declared read i, or nil.
func objectReader(in *Call, i int32) ObjectReader {
	readers := in.Policy.Objects()
	if i < 0 || int(i) >= len(readers) {
		return nil
	}
	return readers[i]
}

// objectFuncs are the granted object reads (abi.SectionObjects).
var objectFuncs = map[string]api.GoModuleFunc{
	abi.FnObjectGet: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Pod == nil {
			s[0] = retNotAvailable
			return
		}
		r := objectReader(in, int32(s[0]))
		if r == nil {
			s[0] = retNotDeclared
			return
		}
		ns, ok1 := m.Memory().Read(uint32(s[1]), uint32(s[2]))
		name, ok2 := m.Memory().Read(uint32(s[3]), uint32(s[4]))
		if !ok1 || !ok2 || !objectName(ns, true) || !objectName(name, false) {
			s[0] = retBadArgs
			return
		}
		// What an object read answers can change between cycles: the
		// verdict is remembered only while the kind is unchanged.
		in.ReadsObjects = true
		values, found := r.Get(string(ns), string(name))
		if !found {
			s[0] = retNotFound
			return
		}
		b := model.EncodeObject(values, abi.MaxObjectAnswer)
		if b == nil {
			s[0] = retBadArgs
			return
		}
		s[0] = writeOut(m, s[5], s[6], b)
	},
	abi.FnObjectList: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Pod == nil {
			s[0] = retNotAvailable
			return
		}
		r := objectReader(in, int32(s[0]))
		if r == nil {
			s[0] = retNotDeclared
			return
		}
		ns, ok1 := m.Memory().Read(uint32(s[1]), uint32(s[2]))
		sel, ok2 := m.Memory().Read(uint32(s[3]), uint32(s[4]))
		if !ok1 || !ok2 || !objectName(ns, true) || len(sel) > abi.MaxObjectSelector {
			s[0] = retBadArgs
			return
		}
		selector, err := labels.Parse(string(sel))
		if err != nil {
			s[0] = retBadArgs
			return
		}
		in.ReadsObjects = true
		objs, err := r.List(string(ns), selector)
		if err != nil {
			s[0] = retBadArgs
			return
		}
		fields := 0
		if len(objs) > 0 {
			fields = len(objs[0].Values)
		}
		b := model.EncodeObjects(fields, objs, abi.MaxObjectAnswer)
		if b == nil {
			s[0] = retBadArgs
			return
		}
		s[0] = writeOut(m, s[5], s[6], b)
	},
}

// objectName reports whether b can name a namespace (empty allowed when
// empty is) or an object: at most 253 bytes, without '/', so that a name
// cannot reach into another namespace's key of a watch's store.
func objectName(b []byte, empty bool) bool {
	if len(b) == 0 {
		return empty
	}
	return len(b) <= abi.MaxObjectName && bytes.IndexByte(b, '/') < 0
}
