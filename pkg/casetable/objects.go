package casetable

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
	"github.com/wasmsched/wasmsched/guest-sdk/casetest"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	"github.com/wasmsched/wasmsched/pkg/objectpath"
)

// caseObjects are the objects of the case being run (Case.Objects), which
// the module's readers and the scheduler's read, as the scheduler's watch
// of each declared kind would hold them.
type caseObjects struct {
	mu  sync.Mutex
	cur [][]sdk.ObjectData
	// gen counts the cases set: each case's objects are new.
	gen uint64
}

func (o *caseObjects) set(c *casetest.Case) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.cur = c.Objects
	o.gen++
}

// readers are the readers of the n declared reads.
func (o *caseObjects) readers(n int) []host.ObjectReader {
	out := make([]host.ObjectReader, n)
	for i := range out {
		out[i] = caseReader{o, i}
	}
	return out
}

// caseReader is one declared read of the case's objects.
type caseReader struct {
	o *caseObjects
	i int
}

func (r caseReader) objects() []sdk.ObjectData {
	r.o.mu.Lock()
	defer r.o.mu.Unlock()
	if r.i < len(r.o.cur) {
		return r.o.cur[r.i]
	}
	return nil
}

func (r caseReader) Gen() uint64 {
	r.o.mu.Lock()
	defer r.o.mu.Unlock()
	return r.o.gen
}

func (r caseReader) Get(ns, name string) ([]string, bool) {
	for _, obj := range r.objects() {
		if obj.Namespace == ns && obj.Name == name {
			return obj.Fields, true
		}
	}
	return nil, false
}

func (r caseReader) List(ns string, sel labels.Selector) ([]model.Object, error) {
	var out []model.Object
	for _, obj := range r.objects() {
		if (ns == "" || obj.Namespace == ns) && sel.Matches(labels.Set(obj.Labels)) {
			out = append(out, model.Object{Namespace: obj.Namespace, Name: obj.Name, Values: obj.Fields})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// objectReads are a table's declared reads as policies[].objects, and the
// grants they need.
func objectReads(f *casetest.File) ([]config.ObjectRead, []config.ObjectGrant) {
	var reads []config.ObjectRead
	var grants []config.ObjectGrant
	for _, r := range f.Objects {
		reads = append(reads, config.ObjectRead{APIVersion: r.APIVersion, Kind: r.Kind, Fields: r.Fields})
		grants = append(grants, config.ObjectGrant{APIVersion: r.APIVersion, Kind: r.Kind, Resource: "casetable"})
	}
	return reads, grants
}

// ObjectReader is a declared read holding objs, for a policy run outside
// a scheduler on objects read from a file (wasmsched test --nodes).
func ObjectReader(objs []sdk.ObjectData) host.ObjectReader {
	return caseReader{&caseObjects{cur: [][]sdk.ObjectData{objs}, gen: 1}, 0}
}

// ObjectData reads the objects of read's kind among objs as the
// scheduler's watch of the kind reads them: namespace, name, labels, and
// the declared fields by path (objectpath), in the declared order.
// Objects of other kinds are left out.
func ObjectData(read config.ObjectRead, objs []*unstructured.Unstructured) ([]sdk.ObjectData, error) {
	paths := make([]objectpath.Path, len(read.Fields))
	for j, f := range read.Fields {
		var err error
		if paths[j], err = objectpath.Parse(f); err != nil {
			return nil, fmt.Errorf("fields[%d] %q: %w", j, f, err)
		}
	}
	var out []sdk.ObjectData
	for _, u := range objs {
		if u.GetAPIVersion() != read.APIVersion || u.GetKind() != read.Kind {
			continue
		}
		d := sdk.ObjectData{Namespace: u.GetNamespace(), Name: u.GetName(), Labels: u.GetLabels(), Fields: make([]string, len(paths))}
		for j, path := range paths {
			d.Fields[j], _ = path.Read(u.Object)
		}
		out = append(out, d)
	}
	return out, nil
}

// LocalGrant is the grant a tool gives itself for a read whose objects it
// holds (a file's, a test's): the resource named after the kind, only to
// pass the validation the scheduler's args do (credential kinds refused).
func LocalGrant(r config.ObjectRead) config.ObjectGrant {
	return config.ObjectGrant{APIVersion: r.APIVersion, Kind: r.Kind, Resource: strings.ToLower(r.Kind) + "s"}
}
