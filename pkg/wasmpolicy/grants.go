package wasmpolicy

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

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

// objectsChangedDelay coalesces a granted kind's changes before the pods
// rejected by the policies that read it are retried: a kind such as
// Leases changes every few seconds per node.
const objectsChangedDelay = 200 * time.Millisecond

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
	pending map[objectwatch.Kind]bool
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
	g := &objectGrants{pending: map[objectwatch.Kind]bool{}}
	g.watcher = objectwatch.New(dyn, w.handle.ClientSet(), w.objectsChanged)
	return g, nil
}

// acquireObjects watches p's declared kinds, once per policy. It fails
// when a kind is not granted (a policy built in Go without validation),
// there is no client, or the scheduler may not watch it.
func (w *WasmPolicy) acquireObjects(ctx context.Context, p *policy) error {
	if len(p.cfg.Objects) == 0 {
		return nil
	}
	p.objectsMu.Lock()
	defer p.objectsMu.Unlock()
	if p.objects != nil {
		return nil
	}
	if w.grants == nil {
		return fmt.Errorf("objects: the policy reads objects, but this scheduler grants none or has no Kubernetes client; grant the kinds in WasmPolicy's args (objects)")
	}
	var got []objectAccess
	release := func() {
		for _, a := range got {
			w.grants.watcher.Release(a.kind)
		}
	}
	for i, r := range p.cfg.Objects {
		g := validation.FindGrant(w.args.Objects, r.APIVersion, r.Kind)
		if g == nil {
			release()
			return fmt.Errorf("objects[%d]: %s %s is not granted; add %s to objects in WasmPolicy's args", i, r.APIVersion, r.Kind, grantOf(r))
		}
		k, err := objectwatch.KindOf(g)
		if err != nil {
			release()
			return fmt.Errorf("objects[%d]: %w", i, err)
		}
		if err := w.grants.watcher.Acquire(ctx, k); err != nil {
			release()
			return fmt.Errorf("objects[%d] (%s %s): %w", i, r.APIVersion, r.Kind, err)
		}
		fields := make([]objectpath.Path, len(r.Fields))
		for j, f := range r.Fields {
			if fields[j], err = objectpath.Parse(f); err != nil {
				got = append(got, objectAccess{kind: k})
				release()
				return fmt.Errorf("objects[%d].fields[%d]: %w", i, j, err)
			}
		}
		reader, err := w.grants.watcher.Reader(k, fields, w.readableNamespaces(p, r))
		if err != nil {
			got = append(got, objectAccess{kind: k})
			release()
			return err
		}
		got = append(got, objectAccess{kind: k, reader: reader})
	}
	p.objects = got
	p.release = func() { w.releaseObjects(p) }
	return nil
}

// grantOf is the grant a read needs, as the args spell it.
func grantOf(r config.ObjectRead) string {
	return fmt.Sprintf("{apiVersion: %s, kind: %s, resource: <plural>}", r.APIVersion, r.Kind)
}

// readableNamespaces are the namespaces p may read objects of r's kind
// in: any the grant allows for the operator's policies (nil); for a
// namespaced policy its own, and those its tenant limits add.
func (w *WasmPolicy) readableNamespaces(p *policy, r config.ObjectRead) []string {
	ns := p.cfg.Scope.Namespace
	if ns == "" {
		return nil
	}
	out := []string{ns}
	for _, t := range w.tenantLimits(ns).Objects {
		if t.APIVersion == r.APIVersion && t.Kind == r.Kind {
			out = append(out, t.Namespaces...)
		}
	}
	return out
}

// releaseObjects ends p's watches (when it is closed).
func (w *WasmPolicy) releaseObjects(p *policy) {
	p.objectsMu.Lock()
	got := p.objects
	p.objects = nil
	p.objectsMu.Unlock()
	if w.grants == nil {
		return
	}
	for _, a := range got {
		w.grants.watcher.Release(a.kind)
	}
}

// objectsChanged retries, shortly after a change of kind k's objects, the
// pods the policies reading k rejected.
func (w *WasmPolicy) objectsChanged(k objectwatch.Kind) {
	g := w.grants
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending[k] {
		return
	}
	g.pending[k] = true
	time.AfterFunc(objectsChangedDelay, func() {
		g.mu.Lock()
		delete(g.pending, k)
		g.mu.Unlock()
		pods := w.rejectedReadingKind(k)
		w.activate(klog.Background(), pods, "Requeued pods rejected by policies that read objects that changed", "kind", k.String())
	})
}

// readsKind reports whether p holds a watch of k.
func (p *policy) readsKind(k objectwatch.Kind) bool {
	p.objectsMu.Lock()
	defer p.objectsMu.Unlock()
	return slices.ContainsFunc(p.objects, func(a objectAccess) bool { return a.kind == k })
}
