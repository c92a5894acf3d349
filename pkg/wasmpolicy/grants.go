package wasmpolicy

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"github.com/wasmsched/wasmsched/guest-sdk/model"
	"github.com/wasmsched/wasmsched/host"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
	"github.com/wasmsched/wasmsched/pkg/apis/config/validation"
	"github.com/wasmsched/wasmsched/pkg/objectpath"
	"github.com/wasmsched/wasmsched/pkg/objectwatch"
)

// A policy that declares objects (policies[].objects) holds each declared
// kind watched while it lives: its first load acquires them, before the
// module loads, and closing it releases them. A kind the scheduler may
// not watch fails the load (reason ObjectsNotWatched), with the RBAC rule
// the scheduler needs, so the policy fails closed: its pods get its
// failurePolicy, and its status and Events say what to grant.

// ReasonObjectsNotWatched is the load reason of a policy whose declared
// kinds cannot be watched.
const ReasonObjectsNotWatched = "ObjectsNotWatched"

// objectsChangedDelay coalesces the changes of granted kinds before the
// pods rejected by the policies that read them are retried, which skips
// their backoff: at most two retries a second, however often the objects
// change (Leases: every few seconds per node), and an edit takes effect
// within a second.
const objectsChangedDelay = 500 * time.Millisecond

// objectAccess is one declared read: the kind's watch and the policy's
// reader of it.
type objectAccess struct {
	kind   objectwatch.Kind
	reader *objectwatch.Reader
}

// objectGrants is the plugin's watcher of the granted kinds and its
// pending retries.
type objectGrants struct {
	watcher *objectwatch.Watcher
	mu      sync.Mutex
	// pending are the policies whose reads changed since the last retry;
	// timer is set while one is scheduled.
	pending map[*policy]bool
	timer   bool
}

// newObjectGrants returns the grants' watcher, or nil when the args grant
// nothing or there is no client (tools hosting the plugin).
func (w *WasmPolicy) newObjectGrants() (*objectGrants, error) {
	if len(w.args.Objects) == 0 || w.handle == nil || w.handle.KubeConfig() == nil || w.handle.ClientSet() == nil {
		return nil, nil
	}
	dyn, err := dynamic.NewForConfig(w.handle.KubeConfig())
	if err != nil {
		return nil, fmt.Errorf("objects: %w", err)
	}
	g := &objectGrants{pending: map[*policy]bool{}}
	g.watcher = objectwatch.New(dyn, w.handle.ClientSet(), w.objectsChanged)
	return g, nil
}

// acquireObjects watches p's declared kinds, once per policy. It fails
// when a kind is not granted (a policy built in Go without validation),
// there is no client, or the scheduler may not watch it. The watches are
// acquired without p's lock (a first list may take seconds) and kept only
// if p was not closed meanwhile.
func (w *WasmPolicy) acquireObjects(ctx context.Context, p *policy) error {
	if len(p.cfg.Objects) == 0 {
		return nil
	}
	p.objectsMu.Lock()
	have, closed := p.objects != nil, p.objectsClosed
	p.objectsMu.Unlock()
	if have {
		return nil
	}
	if closed {
		return fmt.Errorf("objects: the policy was removed while it loaded")
	}
	if w.opts.objectReaders != nil {
		if hr, ok := p.runtime.(hostRuntime); ok {
			hr.p.SetObjects(w.opts.objectReaders(p.cfg.Name))
		}
		p.objectsMu.Lock()
		p.objects = []objectAccess{}
		p.objectsMu.Unlock()
		return nil
	}
	if w.grants == nil {
		return fmt.Errorf("objects: the policy reads objects, but this scheduler grants none or has no Kubernetes client; grant the kinds in WasmPolicy's args (objects)")
	}
	got, err := w.acquireAll(ctx, p)
	if err != nil {
		return err
	}
	p.objectsMu.Lock()
	if p.objectsClosed || p.objects != nil {
		p.objectsMu.Unlock()
		w.releaseAll(got)
		return nil
	}
	p.objects = got
	p.release = func() { w.releaseObjects(p) }
	// Under the lock: a close in between would otherwise release the
	// watches and leave the guests readers of stopped informers.
	if hr, ok := p.runtime.(hostRuntime); ok {
		readers := make([]host.ObjectReader, len(got))
		for i, a := range got {
			readers[i] = objectReader{a.reader}
		}
		hr.p.SetObjects(readers)
	}
	p.objectsMu.Unlock()
	return nil
}

// objectReader is a watch's reader as guests' object reads use it.
type objectReader struct{ r *objectwatch.Reader }

func (o objectReader) Gen() uint64 { return o.r.Gen() }

func (o objectReader) Get(namespace, name string) ([]string, bool) {
	values, _, found := o.r.Get(namespace, name)
	return values, found
}

func (o objectReader) List(namespace string, sel labels.Selector) ([]model.Object, error) {
	objs, err := o.r.List(namespace, sel)
	if err != nil {
		return nil, err
	}
	out := make([]model.Object, len(objs))
	for i, obj := range objs {
		out[i] = model.Object{Namespace: obj.Namespace, Name: obj.Name, Values: obj.Values}
	}
	return out, nil
}

// acquireAll acquires the watch and makes the reader of each of p's
// declared reads, releasing what it acquired when one fails.
func (w *WasmPolicy) acquireAll(ctx context.Context, p *policy) (got []objectAccess, err error) {
	defer func() {
		if err != nil {
			w.releaseAll(got)
			got = nil
		}
	}()
	for i, r := range p.cfg.Objects {
		g := validation.FindGrant(w.args.Objects, r.APIVersion, r.Kind)
		if g == nil {
			return got, fmt.Errorf("objects[%d]: %s %s is not granted; add %s to objects in WasmPolicy's args", i, r.APIVersion, r.Kind, grantOf(r))
		}
		k, err := objectwatch.KindOf(g)
		if err != nil {
			return got, fmt.Errorf("objects[%d]: %w", i, err)
		}
		fields := make([]objectpath.Path, len(r.Fields))
		for j, f := range r.Fields {
			if fields[j], err = objectpath.Parse(f); err != nil {
				return got, fmt.Errorf("objects[%d].fields[%d]: %w", i, j, err)
			}
		}
		if err := w.grants.watcher.Acquire(ctx, k); err != nil {
			return got, fmt.Errorf("objects[%d] (%s %s): %w", i, r.APIVersion, r.Kind, err)
		}
		namespaces, clusterScoped := w.readableNamespaces(p, r)
		reader, err := w.grants.watcher.Reader(k, fields, namespaces, clusterScoped)
		got = append(got, objectAccess{kind: k, reader: reader})
		if err != nil {
			return got, err
		}
	}
	return got, nil
}

// releaseAll ends the watches of got.
func (w *WasmPolicy) releaseAll(got []objectAccess) {
	for _, a := range got {
		w.grants.watcher.Release(a.kind)
	}
}

// grantOf is the grant a read needs, as the args spell it.
func grantOf(r config.ObjectRead) string {
	return fmt.Sprintf("{apiVersion: %s, kind: %s, resource: <plural>}", r.APIVersion, r.Kind)
}

// readableNamespaces are the namespaces p may read objects of r's kind
// in: any the grant allows for the operator's policies (nil); for a
// namespaced policy its own, and those its tenant limits add, and
// whether they let it read objects of no namespace.
func (w *WasmPolicy) readableNamespaces(p *policy, r config.ObjectRead) (namespaces []string, clusterScoped bool) {
	ns := p.cfg.Scope.Namespace
	if ns == "" {
		return nil, true
	}
	out := []string{ns}
	for _, t := range w.tenantLimits(ns).Objects {
		if t.APIVersion == r.APIVersion && t.Kind == r.Kind {
			out = append(out, t.Namespaces...)
			clusterScoped = clusterScoped || t.ClusterScoped
		}
	}
	return out, clusterScoped
}

// releaseObjects ends p's watches (when it is closed).
func (w *WasmPolicy) releaseObjects(p *policy) {
	p.objectsMu.Lock()
	got := p.objects
	p.objects = nil
	if hr, ok := p.runtime.(hostRuntime); ok && got != nil {
		hr.p.SetObjects(nil)
	}
	p.objectsMu.Unlock()
	if w.grants != nil {
		w.releaseAll(got)
	}
}

// objectsChanged notes the policies whose reads a change of kind k's
// objects changes, and retries the pods they rejected, coalesced over
// objectsChangedDelay.
func (w *WasmPolicy) objectsChanged(k objectwatch.Kind, old, new *unstructured.Unstructured) {
	g := w.grants
	set := w.current()
	if g == nil || set == nil {
		return
	}
	var changed []*policy
	for _, p := range set.all {
		if p.readChanged(k, old, new) {
			changed = append(changed, p)
		}
	}
	if len(changed) == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range changed {
		g.pending[p] = true
	}
	if g.timer {
		return
	}
	g.timer = true
	time.AfterFunc(objectsChangedDelay, func() {
		g.mu.Lock()
		policies := g.pending
		g.pending, g.timer = map[*policy]bool{}, false
		g.mu.Unlock()
		pods := map[string]*v1.Pod{}
		for p := range policies {
			p.addRejected(pods, false)
		}
		w.activate(klog.Background(), pods, "Requeued pods rejected by policies whose objects changed", "kind", k.String())
	})
}

// readChanged reports whether p reads kind k and the change from old to
// new changes what it reads.
func (p *policy) readChanged(k objectwatch.Kind, old, new *unstructured.Unstructured) bool {
	p.objectsMu.Lock()
	defer p.objectsMu.Unlock()
	for _, a := range p.objects {
		if a.kind == k && a.reader.Changed(old, new) {
			return true
		}
	}
	return false
}
