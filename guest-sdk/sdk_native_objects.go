//go:build !wasip1

package sdk

import (
	"sort"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

// nativeObjects are the objects of each declared read (SetObjects).
var nativeObjects map[int32][]ObjectData

// SetObjects gives the native backend the objects of declared read i, as
// the host's watch would hold them: nil objects makes the read undeclared.
// Tests and case tables call it.
func SetObjects(i int, objects []ObjectData) {
	if nativeObjects == nil {
		nativeObjects = map[int32][]ObjectData{}
	}
	if objects == nil {
		delete(nativeObjects, int32(i))
		return
	}
	nativeObjects[int32(i)] = objects
}

func objectGet(read int32, ns, name string) ([]byte, int32) {
	objs, ok := nativeObjects[read]
	if !ok {
		return nil, abi.NotDeclared
	}
	for _, o := range objs {
		if o.Namespace == ns && o.Name == name {
			b := model.EncodeObject(o.Fields, abi.MaxObjectAnswer)
			if b == nil {
				return nil, abi.BadArgs
			}
			return b, 0
		}
	}
	return nil, abi.NotFound
}

func objectList(read int32, ns, selector string) ([]byte, int32) {
	objs, ok := nativeObjects[read]
	if !ok {
		return nil, abi.NotDeclared
	}
	match, ok := parseSelector(selector)
	if !ok {
		return nil, abi.BadArgs
	}
	var out []model.Object
	for _, o := range objs {
		if (ns == "" || o.Namespace == ns) && match(o.Labels) {
			out = append(out, model.Object{Namespace: o.Namespace, Name: o.Name, Values: o.Fields})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	fields := 0
	if len(out) > 0 {
		fields = len(out[0].Values)
	}
	b := model.EncodeObjects(fields, out, abi.MaxObjectAnswer)
	if b == nil {
		return nil, abi.BadArgs
	}
	return b, 0
}

// notDeclared records, natively, the Error of a read the policy did not
// declare, as the host's NotDeclared makes the guest report it.
func notDeclared(fn string, num int32) {
	if nativeUndeclared == "" {
		nativeUndeclared = undeclaredReason(fn, num)
	}
}
