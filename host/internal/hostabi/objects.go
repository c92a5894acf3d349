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

// objectRead is the start of both object reads: the declared read's
// reader, and the namespace and the second argument (a name or a
// selector) from guest memory; ok false when it answered instead.
func objectRead(ctx context.Context, m api.Module, s []uint64) (r ObjectReader, ns, arg []byte, ok bool) {
	in := CallOf(ctx)
	if in.Pod == nil {
		s[0] = retNotAvailable
		return nil, nil, nil, false
	}
	if r = objectReader(in, int32(s[0])); r == nil {
		s[0] = retNotDeclared
		return nil, nil, nil, false
	}
	ns, ok1 := m.Memory().Read(uint32(s[1]), uint32(s[2]))
	arg, ok2 := m.Memory().Read(uint32(s[3]), uint32(s[4]))
	if !ok1 || !ok2 || !objectName(ns, true) {
		s[0] = retBadArgs
		return nil, nil, nil, false
	}
	// What an object read answers can change between cycles: the verdict
	// is remembered only while the kind is unchanged.
	in.ReadsObjects = true
	return r, ns, arg, true
}

// writeObjects writes an encoded answer, nil past abi.MaxObjectAnswer.
func writeObjects(m api.Module, s []uint64, b []byte) {
	if b == nil {
		s[0] = retBadArgs
		return
	}
	s[0] = writeOut(m, s[5], s[6], b)
}

// objectFuncs are the granted object reads (abi.SectionObjects).
var objectFuncs = map[string]api.GoModuleFunc{
	abi.FnObjectGet: func(ctx context.Context, m api.Module, s []uint64) {
		r, ns, name, ok := objectRead(ctx, m, s)
		if !ok {
			return
		}
		if !objectName(name, false) {
			s[0] = retBadArgs
			return
		}
		values, found := r.Get(string(ns), string(name))
		if !found {
			s[0] = retNotFound
			return
		}
		writeObjects(m, s, model.EncodeObject(values, abi.MaxObjectAnswer))
	},
	abi.FnObjectList: func(ctx context.Context, m api.Module, s []uint64) {
		r, ns, sel, ok := objectRead(ctx, m, s)
		if !ok {
			return
		}
		selector, err := labels.Parse(string(sel))
		if len(sel) > abi.MaxObjectSelector || err != nil {
			s[0] = retBadArgs
			return
		}
		objs, err := r.List(string(ns), selector)
		if err != nil {
			s[0] = retBadArgs
			return
		}
		fields := 0
		if len(objs) > 0 {
			fields = len(objs[0].Values)
		}
		writeObjects(m, s, model.EncodeObjects(fields, objs, abi.MaxObjectAnswer))
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
