package model

import (
	"sort"
	"strconv"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
)

// String lists (docs/abi.md §5): the wire form of every list row.

// EncodeMap encodes a map as a string list of key, value pairs, sorted by
// key: the same map is always the same bytes.
func EncodeMap(m map[string]string) []byte {
	n := 4
	for k, v := range m {
		n += 8 + len(k) + len(v)
	}
	b := abi.AppendListHeader(make([]byte, 0, n), 2*len(m))
	for _, k := range sortedKeys(m) {
		b = abi.AppendString(abi.AppendString(b, k), m[k])
	}
	return b
}

// EncodeInts encodes quantities as a string list of name, decimal value
// pairs, sorted by name.
func EncodeInts(m map[string]int64) []byte {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	b := abi.AppendListHeader(nil, 2*len(m))
	for _, k := range names {
		b = abi.AppendString(abi.AppendString(b, k), strconv.FormatInt(m[k], 10))
	}
	return b
}

// records builds a string list of records.
type records struct {
	b []byte
	n int
}

func (r *records) add(ss ...string) {
	for _, s := range ss {
		r.b = abi.AppendString(r.b, s)
	}
	r.n += len(ss)
}

func (r *records) bytes() []byte {
	return append(abi.AppendListHeader(make([]byte, 0, 4+len(r.b)), r.n), r.b...)
}

func encodeStrings(ss []string) []byte {
	var r records
	r.add(ss...)
	return r.bytes()
}

// EncodeCyclePolicies is cycle_policies' answer: (name, sha256, mode)
// records.
func EncodeCyclePolicies(policies [][3]string) []byte {
	var r records
	for _, p := range policies {
		r.add(p[0], p[1], p[2])
	}
	return r.bytes()
}

// EncodeWaiting encodes permit_waiting's answer: UID, namespace, name and
// node of each waiting pod (abi.WaitingColumns), in the given order.
func EncodeWaiting(pods [][4]string) []byte {
	var r records
	for _, p := range pods {
		r.add(p[0], p[1], p[2], p[3])
	}
	return r.bytes()
}

// sortedKeys sorts by insertion, not with package sort: guests that send
// a CountTerm link it, and the maps are small.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

// EncodeObject encodes object_get's answer: the declared fields' values,
// in their order, in one allocation (object_get runs per node); nil when
// it would be longer than limit bytes.
func EncodeObject(values []string, limit int) []byte {
	n := 4
	for _, v := range values {
		n += 4 + len(v)
	}
	if n > limit {
		return nil
	}
	b := abi.AppendListHeader(make([]byte, 0, n), len(values))
	for _, v := range values {
		b = abi.AppendString(b, v)
	}
	return b
}

// Object is one object of a granted kind as object_list reads it: its
// namespace ("" for a cluster-scoped kind), name and declared fields.
type Object struct {
	Namespace, Name string
	Values          []string
}

// EncodeObjects encodes object_list's answer: the number of declared
// fields (decimal), then a record of namespace, name and the fields per
// object, in the given order; nil when it would be longer than limit
// bytes. Every object has fields values.
func EncodeObjects(fields int, objs []Object, limit int) []byte {
	count := strconv.Itoa(fields)
	n := 4 + 4 + len(count)
	for _, o := range objs {
		n += 8 + len(o.Namespace) + len(o.Name)
		for _, v := range o.Values {
			n += 4 + len(v)
		}
		if n > limit {
			return nil
		}
	}
	b := abi.AppendListHeader(make([]byte, 0, n), 1+len(objs)*(2+fields))
	b = abi.AppendString(b, count)
	for _, o := range objs {
		b = abi.AppendString(abi.AppendString(b, o.Namespace), o.Name)
		for _, v := range o.Values {
			b = abi.AppendString(b, v)
		}
	}
	return b
}
