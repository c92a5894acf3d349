package sdk

import (
	"errors"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
)

// Objects reads the objects of a kind the operator granted, as the policy
// declared it at objects[i] of its args (or its policy object's spec):
// the declared fields of each object, in their order (docs/abi.md §4.10).
// The host answers from the scheduler's watch of the kind.
type Objects struct{ read int32 }

// ObjectsOf returns the reader of the policy's declared read i
// (objects[i]).
func ObjectsOf(i int) Objects { return Objects{read: int32(i)} }

// Object is one object of a declared read: its namespace ("" for a
// cluster-scoped kind), its name, and its declared fields in their order
// (a scalar as text, a map or list as compact JSON, "" when absent).
type Object struct {
	Namespace, Name string
	Fields          []string
}

// ObjectData is an object of a declared read as tests and case tables give
// it to the native backend (SetObjects): with its labels, which List's
// selector matches.
type ObjectData struct {
	Namespace string            `json:"namespace,omitempty"`
	Name      string            `json:"name"`
	Labels    map[string]string `json:"labels,omitempty"`
	Fields    []string          `json:"fields"`
}

// Errors of Objects.List.
var (
	// ErrObjectsNotDeclared: the policy declared no objects[i], or its
	// kind is not watched (the policy's load reports why).
	ErrObjectsNotDeclared = errors.New("objects: no such declared read; declare it in policies[].objects")
	// ErrBadObjectQuery: the selector or the namespace does not parse, or
	// more than 4096 objects match, or the answer passes 1 MiB (select
	// fewer by namespace or labels, or declare fewer fields).
	ErrBadObjectQuery = errors.New("objects: bad selector or namespace, or more objects or bytes than a read answers (4096 objects, 1 MiB)")
	// ErrObjectsNotAvailable: called where there is no pod (in init).
	ErrObjectsNotAvailable = errors.New("objects: read only in a call with a pod, not at start")
)

// Get returns the declared fields of object namespace/name, and false
// when there is no such object (or it is in a namespace the policy may
// not read).
func (o Objects) Get(namespace, name string) ([]string, bool) {
	b, code := objectGet(o.read, namespace, name)
	if code != 0 {
		if code == abi.NotDeclared {
			notDeclared(abi.FnObjectGet, o.read)
		}
		return nil, false
	}
	r := abi.NewListReader(b) // next copies the strings out of the scratch bytes
	return next(&r, r.Len()), true
}

// List returns the objects of namespace ("" for every namespace the
// policy may read) whose labels match selector (kubectl's syntax; "" for
// all), ordered by namespace and name. The native backend takes
// equality-based selectors only (=, ==, !=, a key alone, !key).
func (o Objects) List(namespace, selector string) ([]Object, error) {
	b, code := objectList(o.read, namespace, selector)
	switch code {
	case 0:
	case abi.NotDeclared:
		notDeclared(abi.FnObjectList, o.read)
		return nil, ErrObjectsNotDeclared
	case abi.NotAvailable:
		return nil, ErrObjectsNotAvailable
	default:
		return nil, ErrBadObjectQuery
	}
	r := abi.NewListReader(b)
	head, ok := r.Next()
	fields := atoiSmall(head)
	if !ok || fields < 0 || r.Len()%(2+fields) != 0 {
		return nil, ErrBadObjectQuery
	}
	var out []Object
	for r.Len() > 0 {
		f := next(&r, 2+fields)
		out = append(out, Object{Namespace: f[0], Name: f[1], Fields: f[2:]})
	}
	return out, nil
}

// atoiSmall parses a small decimal count (object_list's field count), -1
// for anything else; it spares guests package strconv.
func atoiSmall(b []byte) int {
	if len(b) == 0 || len(b) > 4 {
		return -1
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}
