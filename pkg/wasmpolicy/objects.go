package wasmpolicy

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	policyv1alpha1 "github.com/wasmsched/wasmsched/pkg/apis/policy/v1alpha1"
	"github.com/wasmsched/wasmsched/pkg/source"
)

// objectPolicies runs the policies of ClusterSchedulingPolicy and
// SchedulingPolicy objects next to the args' policies: it watches both
// kinds, builds a policy for each object (validated as args are), swaps it
// into the plugin's policy set once its module loads, removes it when the
// object goes, and reports each object's state in its status.
//
// A change to an object's spec builds a new policy (the candidate) beside
// the one serving; the candidate replaces it only once it has a module, so
// a bad update (a module that does not load, a wrong pin) leaves the last
// good version serving, as a bad module in a ConfigMap does. Cycles in
// flight keep the set, and so the policies, they started with; a replaced
// or deleted policy is closed after the retired grace.
type objectPolicies struct {
	w      *WasmPolicy
	dyn    dynamic.Interface
	ref    config.LeaseRef
	lease  *statusLease
	queue  workqueue.TypedRateLimitingInterface[objKey]
	ctx    context.Context
	logger klog.Logger

	factory   dynamicinformer.DynamicSharedInformerFactory
	informers map[bool]cache.SharedIndexInformer // by namespaced

	mu      sync.Mutex
	entries map[objKey]*objEntry
	// retiring are the replaced and deleted policies waiting for their
	// grace to end, with their timers.
	retiring map[*policy]*time.Timer
	// pending counts the objects listed at start whose first load has not
	// ended; synced is closed when it reaches 0.
	pending int
	synced  chan struct{}
	started bool
	// lastInformerErr is the last listing error logged (under mu).
	lastInformerErr string
}

// objKey names a policy object; namespace is "" for a cluster policy.
type objKey struct{ namespace, name string }

func (k objKey) String() string {
	if k.namespace == "" {
		return "clusterschedulingpolicy/" + k.name
	}
	return "schedulingpolicy/" + k.namespace + "/" + k.name
}

// policyName is the object's policy name in reasons, logs, events and
// metrics: the name of a cluster policy, namespace/name of a namespaced one.
func (k objKey) policyName() string {
	if k.namespace == "" {
		return k.name
	}
	return k.namespace + "/" + k.name
}

func (k objKey) resource() schema.GroupVersionResource {
	if k.namespace == "" {
		return policyv1alpha1.ClusterSchedulingPoliciesResource
	}
	return policyv1alpha1.SchedulingPoliciesResource
}

// objEntry is what the plugin runs for one object.
type objEntry struct {
	key        objKey
	uid        types.UID
	generation int64
	// invalid is why the current spec is refused ("" when it is valid).
	invalid string
	// spec is the policy config the newest policy (candidate, else
	// serving) was built from.
	spec *config.Policy
	// serving is in the plugin's policy set; candidate loads a newer spec
	// and replaces serving when it has a module.
	serving, candidate *policy
	// initial marks an object listed at start whose first load has not ended.
	initial bool
}

func newObjectPolicies(w *WasmPolicy, po config.PolicyObjects) (*objectPolicies, error) {
	h := w.handle
	if h == nil || h.KubeConfig() == nil || h.ClientSet() == nil {
		return nil, errors.New("policyObjects.enabled needs a Kubernetes client: it is for the scheduler, not for tools that host the plugin without one (set it to false there)")
	}
	dyn, err := dynamic.NewForConfig(h.KubeConfig())
	if err != nil {
		return nil, fmt.Errorf("policyObjects: %w", err)
	}
	o := &objectPolicies{
		w: w, dyn: dyn, ref: po.StatusLease,
		queue:    workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[objKey](), workqueue.TypedRateLimitingQueueConfig[objKey]{Name: "wasmsched_policy_objects"}),
		entries:  map[objKey]*objEntry{},
		retiring: map[*policy]*time.Timer{},
		synced:   make(chan struct{}),
	}
	if w.opts.readOnlyObjects {
		return o, nil
	}
	if o.lease, err = joinStatusLease(h.ClientSet(), po.StatusLease, o); err != nil {
		return nil, err
	}
	return o, nil
}

// start watches the objects and returns a channel closed once the objects
// that existed at start have each ended their first load (or the context
// ends).
func (o *objectPolicies) start(ctx context.Context) <-chan struct{} {
	o.ctx, o.logger = ctx, klog.FromContext(ctx)
	o.factory = dynamicinformer.NewDynamicSharedInformerFactory(o.dyn, 0)
	o.informers = map[bool]cache.SharedIndexInformer{
		false: o.factory.ForResource(policyv1alpha1.ClusterSchedulingPoliciesResource).Informer(),
		true:  o.factory.ForResource(policyv1alpha1.SchedulingPoliciesResource).Informer(),
	}
	for namespaced, inf := range o.informers {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    o.enqueueObj,
			UpdateFunc: func(_, obj interface{}) { o.enqueueObj(obj) },
			DeleteFunc: o.enqueueObj,
		})
		res := policyv1alpha1.ClusterSchedulingPoliciesResource
		if namespaced {
			res = policyv1alpha1.SchedulingPoliciesResource
		}
		_ = inf.SetWatchErrorHandlerWithContext(func(hctx context.Context, r *cache.Reflector, err error) {
			o.informerFailed(res, err)
			cache.DefaultWatchErrorHandler(hctx, r, err)
		})
	}
	o.factory.Start(ctx.Done())
	o.w.wg.Add(1)
	go func() {
		defer o.w.wg.Done()
		if !cache.WaitForCacheSync(ctx.Done(), o.informers[false].HasSynced, o.informers[true].HasSynced) {
			return
		}
		o.mu.Lock()
		for _, inf := range o.informers {
			for _, obj := range inf.GetStore().List() {
				if u, ok := obj.(*unstructured.Unstructured); ok {
					k := objKey{u.GetNamespace(), u.GetName()}
					if o.entries[k] == nil {
						o.entries[k] = &objEntry{key: k, initial: true}
						o.pending++
					}
				}
			}
		}
		o.started = true
		o.settleLocked()
		o.mu.Unlock()
		for {
			k, quit := o.queue.Get()
			if quit {
				return
			}
			if err := o.reconcile(k); err != nil {
				o.logger.Error(err, "Policy object not reconciled; retrying", "object", k.String())
				o.queue.AddRateLimited(k)
			} else {
				o.queue.Forget(k)
			}
			o.queue.Done(k)
		}
	}()
	o.w.wg.Add(1)
	go func() {
		defer o.w.wg.Done()
		<-ctx.Done()
		o.queue.ShutDown()
	}()
	return o.synced
}

// informerFailed reports, once per distinct error, that the objects of res
// cannot be listed (CRDs not installed, RBAC missing), and stops the start
// from waiting for them: the args' policies schedule meanwhile, and the
// objects load when the informer recovers.
func (o *objectPolicies) informerFailed(res schema.GroupVersionResource, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if msg := res.Resource + ": " + err.Error(); msg != o.lastInformerErr {
		o.lastInformerErr = msg
		o.logger.Error(err, "Cannot list policy objects; policies from them apply once they can be listed", "resource", res.Resource,
			"fix", "install the CRDs (kubectl apply --server-side -k manifests/crds) and let the scheduler list and watch them (manifests/base/rbac-policy-objects.yaml)")
	}
	select {
	case <-o.synced:
	default:
		close(o.synced)
	}
}

// settleLocked closes synced once no initial object is still loading.
func (o *objectPolicies) settleLocked() {
	if o.started && o.pending == 0 {
		select {
		case <-o.synced:
		default:
			close(o.synced)
		}
	}
}

// firstDone records that an initial object's first load (or refusal) ended.
func (o *objectPolicies) firstDone(e *objEntry) {
	if e.initial {
		e.initial = false
		o.pending--
		o.settleLocked()
	}
}

func (o *objectPolicies) enqueueObj(obj interface{}) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if m, err := meta.Accessor(obj); err == nil {
		o.queue.Add(objKey{m.GetNamespace(), m.GetName()})
	}
}

// enqueueAll reconciles every object again: this process just started
// writing status.
func (o *objectPolicies) enqueueAll() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k := range o.entries {
		o.queue.Add(k)
	}
}

// reconcile brings the plugin's policy for key in line with its object.
func (o *objectPolicies) reconcile(k objKey) error {
	obj, exists, err := o.informers[k.namespace != ""].GetStore().GetByKey(cacheKey(k))
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	e := o.entries[k]
	if !exists {
		if e != nil {
			o.logger.Info("Policy object deleted; its policy no longer applies", "object", k.String(), "policy", k.policyName())
			o.drop(e, true)
		}
		return nil
	}
	u := obj.(*unstructured.Unstructured)
	if e != nil && e.uid != "" && e.uid != u.GetUID() {
		// Deleted and created again under the same name.
		o.drop(e, false)
		e = nil
	}
	if e == nil {
		e = &objEntry{key: k}
		o.entries[k] = e
	}
	e.uid = u.GetUID()
	e.generation = u.GetGeneration()
	spec, sc, invalid := o.policyOf(k, u)
	if invalid == "" && !sc.takesProfile(o.w.profile) {
		// Another profile runs it; this plugin neither runs it nor reports
		// (and leaves the series, which share the policy's name, to it).
		o.drop(e, false)
		return nil
	}
	e.invalid = invalid
	if o.lease != nil {
		o.lease.claim(k, o.w.profile)
	}
	if invalid == "" && (e.spec == nil || !reflect.DeepEqual(*e.spec, spec)) {
		if err := o.build(e, spec); err != nil {
			e.invalid = err.Error()
		}
	}
	if e.candidate != nil && e.candidate.runtime.Current() != nil {
		o.promote(e)
	}
	if e.invalid != "" || (e.candidate == nil && e.serving != nil && e.serving.settled.Load()) ||
		(e.candidate != nil && e.candidate.settled.Load()) {
		o.firstDone(e)
	}
	return o.writeStatus(u, e)
}

// build starts a candidate policy for spec, replacing a candidate still
// loading an older spec.
func (o *objectPolicies) build(e *objEntry, spec config.Policy) error {
	if e.candidate != nil {
		o.retire(e.candidate, false)
		e.candidate = nil
	}
	p, err := o.w.buildPolicy(o.ctx, spec)
	if err != nil {
		return err
	}
	sp := spec
	e.spec = &sp
	ctx, cancel := context.WithCancel(o.ctx)
	p.stop = cancel
	k := e.key
	p.loaded = func(*policy) { o.queue.Add(k) }
	e.candidate = p
	o.logger.Info("Loading policy object", "object", k.String(), "policy", spec.Name, "generation", e.generation, "source", p.source.String())
	o.w.wg.Add(1)
	go func() {
		defer o.w.wg.Done()
		p.source.Run(ctx, func(u source.Update) { o.w.apply(ctx, p, u) })
	}()
	return nil
}

// promote makes e's candidate the serving policy and publishes the set.
func (o *objectPolicies) promote(e *objEntry) {
	old := e.serving
	e.serving, e.candidate = e.candidate, nil
	o.publishLocked()
	if old != nil {
		if m := old.runtime.Current(); m != nil && m.SHA256() != e.serving.runtime.Current().SHA256() {
			moduleInfo.DeleteLabelValues(old.cfg.Name, m.SHA256())
		}
		o.retire(old, false)
	}
	o.logger.Info("Policy object active", "object", e.key.String(), "policy", e.serving.cfg.Name, "generation", e.generation, "sha256", e.serving.runtime.Current().SHA256())
}

// drop removes e's policies from the set and retires them; forget also
// deletes the policy's metric series (the object is gone).
func (o *objectPolicies) drop(e *objEntry, forget bool) {
	o.firstDone(e)
	delete(o.entries, e.key)
	if o.lease != nil {
		o.lease.release(e.key, o.w.profile)
	}
	// Published first: retiring requeues the pods the policy rejected or
	// gated, and PreEnqueue runs for them at once, with the set then
	// published.
	o.publishLocked()
	if e.serving != nil {
		o.retire(e.serving, forget)
	}
	if e.candidate != nil {
		o.retire(e.candidate, forget && e.serving == nil)
	}
}

// publishLocked publishes the args' policies and the serving object
// policies, ordered by name. Caller holds o.mu.
func (o *objectPolicies) publishLocked() {
	var objs []*policy
	for _, e := range o.entries {
		if e.serving != nil {
			objs = append(objs, e.serving)
		}
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].cfg.Name < objs[j].cfg.Name })
	o.w.setMu.Lock()
	o.w.publish(objs)
	o.w.setMu.Unlock()
}

// retire stops p's source and closes it once cycles that pinned it have
// ended (the retired grace). Pods it rejected are sent back to the queue:
// the policy that replaces it, or none, may admit them. forget deletes the
// policy's metric series too, unless a policy of the same name runs again
// by then (the object was created anew). Caller holds o.mu.
func (o *objectPolicies) retire(p *policy, forget bool) {
	if p.stop != nil {
		p.stop()
	}
	// p.loaded stays: a load still running may call it, and a late
	// reconcile of the key does nothing new.
	p.breaker.stop()
	o.w.requeueRejected(o.logger, p)
	grace := o.w.opts.retiredGrace
	if grace <= 0 {
		grace = host.DefaultRetiredGrace
	}
	t := time.AfterFunc(grace, func() {
		o.mu.Lock()
		if _, ok := o.retiring[p]; !ok { // closed by close()
			o.mu.Unlock()
			return
		}
		delete(o.retiring, p)
		forget = forget && !o.runsLocked(p.cfg.Name)
		o.mu.Unlock()
		o.closeRetired(p, forget)
	})
	o.retiring[p] = t
}

// closeRetired frees a retired policy's instances and compiled code.
func (o *objectPolicies) closeRetired(p *policy, forget bool) {
	active := ""
	if m := p.runtime.Current(); m != nil {
		active = m.SHA256()
	}
	_ = p.runtime.Close(context.Background())
	if forget {
		p.m.forget(active)
	}
	klog.V(2).InfoS("Retired policy closed: its instances and compiled code are freed", "policy", p.cfg.Name)
	releaseMemory.trigger()
}

// runsLocked reports whether some entry runs a policy named name.
func (o *objectPolicies) runsLocked(name string) bool {
	for _, e := range o.entries {
		for _, p := range []*policy{e.serving, e.candidate} {
			if p != nil && p.cfg.Name == name {
				return true
			}
		}
	}
	return false
}

// close stops the objects' policies with the plugin.
func (o *objectPolicies) close() {
	if o.lease != nil {
		o.lease.leave(o.ref, o)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range o.entries {
		for _, p := range []*policy{e.serving, e.candidate} {
			if p != nil {
				if p.stop != nil {
					p.stop()
				}
				p.breaker.stop()
				_ = p.runtime.Close(context.Background())
			}
		}
	}
	for p, t := range o.retiring {
		t.Stop()
		_ = p.runtime.Close(context.Background())
		delete(o.retiring, p)
	}
}

func cacheKey(k objKey) string {
	if k.namespace == "" {
		return k.name
	}
	return k.namespace + "/" + k.name
}

// maxStatusMessage bounds the messages written to status.
const maxStatusMessage = 4096
