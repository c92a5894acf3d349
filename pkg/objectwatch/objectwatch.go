// Package objectwatch watches the kinds of objects the operator grants
// policies (objects in WasmPolicy's args) and serves their reads. Each
// kind is watched once, through informers on the apiserver, from the first
// policy that declares it to the last: a grant no policy uses costs
// nothing, and a kind the scheduler's RBAC does not allow is refused when
// the first policy declares it, with the rule the scheduler needs.
package objectwatch

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
	"github.com/wasmsched/wasmsched/pkg/objectpath"
)

// MaxList bounds the objects one list read returns; a policy that needs
// more should select fewer (by namespace or labels).
const MaxList = 4096

// syncTimeout bounds how long Acquire waits for a new kind's first list.
var syncTimeout = 30 * time.Second

// Watcher holds the informers of the granted kinds in use.
type Watcher struct {
	client  dynamic.Interface
	auth    kubernetes.Interface
	changed func(k Kind, old, new *unstructured.Unstructured)

	mu    sync.Mutex
	kinds map[Kind]*watched
}

// Kind is a granted kind: its resource, and the namespaces the grant
// limits it to ("" joined: all).
type Kind struct {
	GVR        schema.GroupVersionResource
	Namespaces string // sorted, comma-separated; "": all namespaces
}

// KindOf is the Kind a grant names.
func KindOf(g *config.ObjectGrant) (Kind, error) {
	gv, err := schema.ParseGroupVersion(g.APIVersion)
	if err != nil {
		return Kind{}, err
	}
	ns := slices.Clone(g.Namespaces)
	sort.Strings(ns)
	return Kind{GVR: gv.WithResource(g.Resource), Namespaces: strings.Join(ns, ",")}, nil
}

func (k Kind) namespaces() []string {
	if k.Namespaces == "" {
		return []string{metav1.NamespaceAll}
	}
	return strings.Split(k.Namespaces, ",")
}

// String names the kind as RBAC does: resource.group.
func (k Kind) String() string {
	if k.GVR.Group == "" {
		return k.GVR.Resource
	}
	return k.GVR.Resource + "." + k.GVR.Group
}

// watched is one kind's informers, one per namespace of the grant (or one
// for all namespaces).
type watched struct {
	refs      int
	informers map[string]cache.SharedIndexInformer // by namespace ("": all)
	stop      chan struct{}
	// gen counts the kind's changes: a list read's answer is the same
	// while it is.
	gen atomic.Uint64
}

// New returns a Watcher that watches through client and checks the
// scheduler's access through auth. changed, if set, is called after every
// change of a watched kind's objects, with the object before (nil when
// added) and after (nil when deleted), from the informers' goroutines.
func New(client dynamic.Interface, auth kubernetes.Interface, changed func(k Kind, old, new *unstructured.Unstructured)) *Watcher {
	return &Watcher{client: client, auth: auth, changed: changed, kinds: map[Kind]*watched{}}
}

// Acquire starts watching k, unless a reader already watches it, and
// returns once its objects are listed. It fails when the scheduler may not
// list and watch the kind (the error names the rule it needs) or the first
// list does not finish in time. Every Acquire that succeeds needs a
// Release.
func (w *Watcher) Acquire(ctx context.Context, k Kind) error {
	w.mu.Lock()
	_, watching := w.kinds[k]
	w.mu.Unlock()
	if !watching {
		if err := w.allowed(ctx, k); err != nil {
			return err
		}
	}
	w.mu.Lock()
	kw, ok := w.kinds[k]
	if !ok {
		kw = w.start(k)
		w.kinds[k] = kw
	}
	kw.refs++
	w.mu.Unlock()
	if err := kw.waitSynced(ctx); err != nil {
		w.Release(k)
		return err
	}
	return nil
}

// Release ends one Acquire of k; the last stops its informers.
func (w *Watcher) Release(k Kind) {
	w.mu.Lock()
	defer w.mu.Unlock()
	kw, ok := w.kinds[k]
	if !ok {
		return
	}
	if kw.refs--; kw.refs == 0 {
		close(kw.stop)
		delete(w.kinds, k)
	}
}

// Watching lists the kinds watched now, for tests and status.
func (w *Watcher) Watching() []Kind {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Kind, 0, len(w.kinds))
	for k := range w.kinds {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String()+out[i].Namespaces < out[j].String()+out[j].Namespaces })
	return out
}

func (w *Watcher) start(k Kind) *watched {
	kw := &watched{informers: map[string]cache.SharedIndexInformer{}, stop: make(chan struct{})}
	for _, ns := range k.namespaces() {
		inf := dynamicinformer.NewFilteredDynamicInformer(w.client, k.GVR, ns, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, nil).Informer()
		bump := func(old, new interface{}) {
			kw.gen.Add(1)
			if w.changed != nil {
				w.changed(k, asObject(old), asObject(new))
			}
		}
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj interface{}) { bump(nil, obj) },
			UpdateFunc: bump,
			DeleteFunc: func(obj interface{}) { bump(obj, nil) },
		})
		kw.informers[ns] = inf
		go inf.Run(kw.stop)
	}
	return kw
}

func (kw *watched) waitSynced(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	for _, inf := range kw.informers {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return fmt.Errorf("the first list did not finish within %s: check that the grant's resource is the kind's plural and its apiVersion is served (kubectl api-resources), and that its namespaces exist", syncTimeout)
		}
	}
	return nil
}

// allowed asks the apiserver whether the scheduler may list and watch k
// in each namespace of its grant.
func (w *Watcher) allowed(ctx context.Context, k Kind) error {
	if w.auth == nil {
		return nil
	}
	for _, ns := range k.namespaces() {
		for _, verb := range []string{"list", "watch"} {
			r, err := w.auth.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: k.GVR.Group, Version: k.GVR.Version, Resource: k.GVR.Resource},
			}}, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("could not check the scheduler's access to %s: %w", k, err)
			}
			if !r.Status.Allowed {
				return &AccessError{Kind: k, Namespace: ns, Verb: verb}
			}
		}
	}
	return nil
}

// AccessError is a granted kind the scheduler's RBAC does not let it
// watch.
type AccessError struct {
	Kind      Kind
	Namespace string // "": cluster-wide
	Verb      string
}

func (e *AccessError) Error() string {
	where, bind := "in any namespace", "a ClusterRole with the rule, bound by a ClusterRoleBinding"
	if e.Namespace != "" {
		where, bind = "in namespace "+e.Namespace, "a Role in namespace "+e.Namespace+" with the rule, bound by a RoleBinding"
	}
	return fmt.Sprintf("the scheduler may not %s %s %s: give its ServiceAccount %s: {apiGroups: [%q], resources: [%s], verbs: [get, list, watch]}",
		e.Verb, e.Kind, where, bind, e.Kind.GVR.Group, e.Kind.GVR.Resource)
}

// Reader reads one policy's declared fields of one watched kind, within
// the namespaces it may read.
type Reader struct {
	kw     *watched
	fields []objectpath.Path
	// namespaces it may read; nil: any the grant allows.
	namespaces []string
	// clusterScoped lets a reader limited to namespaces read objects of
	// no namespace (a cluster-scoped kind granted to a tenant).
	clusterScoped bool
}

// Reader returns a reader of k's objects, with fields parsed, limited to
// namespaces (nil: any) and, when limited, to namespaced objects unless
// clusterScoped. k must be acquired.
func (w *Watcher) Reader(k Kind, fields []objectpath.Path, namespaces []string, clusterScoped bool) (*Reader, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	kw, ok := w.kinds[k]
	if !ok {
		return nil, fmt.Errorf("%s is not watched", k)
	}
	return &Reader{kw: kw, fields: fields, namespaces: namespaces, clusterScoped: clusterScoped}, nil
}

// Gen is the kind's change count: the same answers while it is the same.
func (r *Reader) Gen() uint64 { return r.kw.gen.Load() }

// Permits reports whether the reader may read namespace ns. A
// cluster-scoped object ("") is no namespace's: a reader limited to
// namespaces reads it only when its kind's grant to the tenant says so
// (the tenant grant of a cluster-scoped kind is that opt-in), which the
// plugin decides when it makes the reader (clusterScoped).
func (r *Reader) Permits(ns string) bool {
	if ns == "" {
		return r.namespaces == nil || r.clusterScoped
	}
	return r.namespaces == nil || slices.Contains(r.namespaces, ns)
}

// informerFor is the informer holding ns's objects, or nil when the grant
// does not cover ns.
func (r *Reader) informerFor(ns string) cache.SharedIndexInformer {
	if inf, ok := r.kw.informers[metav1.NamespaceAll]; ok {
		return inf
	}
	return r.kw.informers[ns]
}

// Get returns the declared fields of object ns/name (ns "" for a
// cluster-scoped kind) and its resourceVersion; found is false when there
// is no such object or the reader may not read ns.
func (r *Reader) Get(ns, name string) (values []string, resourceVersion string, found bool) {
	if !r.Permits(ns) {
		return nil, "", false
	}
	inf := r.informerFor(ns)
	if inf == nil {
		return nil, "", false
	}
	key := name
	if ns != "" {
		key = ns + "/" + name
	}
	obj, ok, err := inf.GetStore().GetByKey(key)
	if err != nil || !ok {
		return nil, "", false
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.GetNamespace() != ns {
		return nil, "", false
	}
	return r.values(u), u.GetResourceVersion(), true
}

// Object is one object of a list read.
type Object struct {
	Namespace, Name string
	Values          []string
}

// List returns the objects of namespace ns ("" for every namespace the
// reader may read) whose labels match sel, ordered by namespace and name.
// It fails past MaxList objects.
func (r *Reader) List(ns string, sel labels.Selector) ([]Object, error) {
	if ns != "" && !r.Permits(ns) {
		return nil, nil
	}
	var out []Object
	add := func(items []interface{}) error {
		for _, it := range items {
			u, ok := it.(*unstructured.Unstructured)
			if !ok || !r.Permits(u.GetNamespace()) || !sel.Matches(labels.Set(u.GetLabels())) {
				continue
			}
			if len(out) == MaxList {
				return fmt.Errorf("more than %d objects match; select fewer by namespace or labels", MaxList)
			}
			out = append(out, Object{Namespace: u.GetNamespace(), Name: u.GetName(), Values: r.values(u)})
		}
		return nil
	}
	for informerNS, inf := range r.kw.informers {
		var items []interface{}
		switch {
		case ns == "":
			items = inf.GetStore().List()
		case informerNS == metav1.NamespaceAll || informerNS == ns:
			var err error
			if items, err = inf.GetIndexer().ByIndex(cache.NamespaceIndex, ns); err != nil {
				return nil, err
			}
		}
		if err := add(items); err != nil {
			return nil, err
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

// asObject is an informer's object as unstructured, nil for none.
func asObject(obj interface{}) *unstructured.Unstructured {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	u, _ := obj.(*unstructured.Unstructured)
	return u
}

// Changed reports whether a change from old to new (either nil) changes
// what the reader reads: an object of a namespace it may read, added,
// deleted, or with another value of a declared field.
func (r *Reader) Changed(old, new *unstructured.Unstructured) bool {
	switch {
	case old == nil && new == nil:
		return false
	case old == nil:
		return r.Permits(new.GetNamespace())
	case new == nil:
		return r.Permits(old.GetNamespace())
	}
	if !r.Permits(new.GetNamespace()) {
		return false
	}
	return !slices.Equal(r.values(old), r.values(new)) || !maps.Equal(old.GetLabels(), new.GetLabels())
}

func (r *Reader) values(u *unstructured.Unstructured) []string {
	out := make([]string, len(r.fields))
	for i, p := range r.fields {
		out[i], _ = p.Read(u.Object)
	}
	return out
}
