package wasmpolicy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
	"github.com/wasmsched/wasmsched/pkg/apis/config/validation"
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

// policyOf turns the object into the policy config the plugin runs, or
// says why it cannot: the checks the apiserver cannot make (the module's
// namespace, a name the args already use, the args' validation).
func (o *objectPolicies) policyOf(k objKey, u *unstructured.Unstructured) (config.Policy, *scope, string) {
	var src policyv1alpha1.Source
	var settings configv1.PolicySettings
	var sc policyv1alpha1.PolicyScope
	var nsSel *policyv1alpha1.LabelSelector
	if k.namespace == "" {
		var p policyv1alpha1.ClusterSchedulingPolicy
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
			return config.Policy{}, nil, "spec: " + err.Error()
		}
		src, settings, sc, nsSel = p.Spec.Source, p.Spec.PolicySettings, p.Spec.PolicyScope, p.Spec.NamespaceSelector
	} else {
		var p policyv1alpha1.SchedulingPolicy
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
			return config.Policy{}, nil, "spec: " + err.Error()
		}
		src, settings, sc = p.Spec.Source, p.Spec.PolicySettings, p.Spec.PolicyScope
		if src.File != "" {
			return config.Policy{}, nil, "spec.source.file: a SchedulingPolicy takes its module from a ConfigMap in its own namespace; use source.configMap"
		}
		if cm := src.ConfigMap; cm != nil {
			if cm.Namespace != "" && cm.Namespace != k.namespace {
				return config.Policy{}, nil, fmt.Sprintf("spec.source.configMap.namespace: Forbidden: %q is not the policy's namespace; a SchedulingPolicy may take its module only from a ConfigMap in %s (copy the ConfigMap there, or ask the cluster's operators for a ClusterSchedulingPolicy)", cm.Namespace, k.namespace)
			}
		}
		if o := src.OCI; o != nil && o.Insecure {
			return config.Policy{}, nil, "spec.source.oci.insecure: Forbidden: a SchedulingPolicy may not turn TLS off; a cluster's operators may, in a ClusterSchedulingPolicy"
		}
		if o := src.OCI; o != nil && o.PullSecret != nil && o.PullSecret.Namespace != "" && o.PullSecret.Namespace != k.namespace {
			return config.Policy{}, nil, fmt.Sprintf("spec.source.oci.pullSecret.namespace: Forbidden: %q is not the policy's namespace; a SchedulingPolicy may use only a pull secret in %s", o.PullSecret.Namespace, k.namespace)
		}
	}
	// The object's settings are the args' type: defaulted, converted and
	// validated by the same code as a policy of the args.
	in := configv1.Policy{
		Name: k.policyName(), PolicySettings: *settings.DeepCopy(),
		Scope: configv1.Scope{NamespaceSelector: nsSel.AsMeta(), PodSelector: sc.PodSelector.AsMeta(), Profiles: sc.Profiles},
	}
	in.Source.File = src.File
	if cm := src.ConfigMap; cm != nil {
		ns := cm.Namespace
		if ns == "" {
			ns = k.namespace
		}
		in.Source.ConfigMap = &configv1.ConfigMapSource{Namespace: ns, Name: cm.Name, Key: cm.Key}
	}
	if o := src.OCI; o != nil {
		in.Source.OCI = &configv1.OCISource{
			Ref: o.Ref, FollowTag: o.FollowTag, PollInterval: o.PollInterval, CABundle: o.CABundle,
			Insecure: o.Insecure, MaxSize: o.MaxSize, Timeout: o.Timeout,
		}
		if ps := o.PullSecret; ps != nil {
			ns := ps.Namespace
			if ns == "" {
				ns = k.namespace
			}
			in.Source.OCI.PullSecret = &configv1.SecretReference{Namespace: ns, Name: ps.Name}
		}
		if o.Verify != nil {
			in.Source.OCI.Verify = &configv1.Verification{PublicKey: o.Verify.PublicKey}
		}
		configv1.SetDefaults_OCISource(in.Source.OCI)
	}
	configv1.SetDefaults_PolicySettings(&in.PolicySettings)
	var out config.Policy
	if err := configv1.Convert_v1_Policy_To_config_Policy(&in, &out, nil); err != nil {
		return config.Policy{}, nil, "spec: " + err.Error()
	}
	out.Scope.Namespace = k.namespace
	if errs := validation.ValidatePolicy(field.NewPath("spec"), &out); len(errs) > 0 {
		return config.Policy{}, nil, objectPaths(errs).ToAggregate().Error()
	}
	if k.namespace == "" {
		for _, p := range o.w.static {
			if p.cfg.Name == k.name {
				return config.Policy{}, nil, fmt.Sprintf("metadata.name: Duplicate value: %q is the name of a policy in the scheduler's WasmPolicy args; rename the object", k.name)
			}
		}
	}
	s, err := compileScope(out.Scope)
	if err != nil {
		return config.Policy{}, nil, "spec." + err.Error()
	}
	return out, s, ""
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

// releaseMemory returns the memory of closed policies to the operating
// system soon after they close, at most once per releaseEvery: the Go
// runtime otherwise keeps the freed heap (module bytes, the compiler's
// buffers) mapped for as long as it stays under its own goal, and a
// scheduler whose teams delete policies would keep the memory of the
// deleted ones (docs/architecture.md, RATIONALE: policy objects).
var releaseMemory = &memoryReleaser{every: 10 * time.Second, delay: time.Second}

type memoryReleaser struct {
	every, delay time.Duration
	mu           sync.Mutex
	pending      bool
	last         time.Time
}

// trigger schedules one release: delay from now, or releaseEvery after the
// last one, whichever is later; triggers until then share it.
func (r *memoryReleaser) trigger() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending {
		return
	}
	r.pending = true
	wait := max(r.delay, time.Until(r.last.Add(r.every)))
	time.AfterFunc(wait, func() {
		start := time.Now()
		debug.FreeOSMemory()
		r.mu.Lock()
		r.pending, r.last = false, time.Now()
		r.mu.Unlock()
		klog.V(2).InfoS("Returned the memory of closed policies to the operating system", "duration", time.Since(start))
	})
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

// objectPaths renames the args' field paths of errs to the object's: the
// name is metadata.name, and the scope's fields sit in the spec itself.
func objectPaths(errs field.ErrorList) field.ErrorList {
	out := make(field.ErrorList, len(errs))
	for i, e := range errs {
		c := *e
		switch {
		case c.Field == "spec.name":
			c.Field = "metadata.name"
		case strings.HasPrefix(c.Field, "spec.scope."):
			c.Field = "spec." + strings.TrimPrefix(c.Field, "spec.scope.")
		}
		out[i] = &c
	}
	return out
}

func cacheKey(k objKey) string {
	if k.namespace == "" {
		return k.name
	}
	return k.namespace + "/" + k.name
}

// statusOf is what e's object status should say.
func statusOf(e *objEntry) policyv1alpha1.SchedulingPolicyStatus {
	st := policyv1alpha1.SchedulingPolicyStatus{ObservedGeneration: e.generation}
	if e.serving != nil {
		if m := e.serving.runtime.Current(); m != nil {
			st.ActiveSHA256 = m.SHA256()
		}
	}
	cond := metav1.Condition{Type: policyv1alpha1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: e.generation}
	// The newest policy decides: the candidate while there is one.
	newest := e.candidate
	if newest == nil {
		newest = e.serving
	}
	keeping := ""
	if st.ActiveSHA256 != "" {
		keeping = "; the previous module " + short(st.ActiveSHA256) + " keeps serving"
	}
	switch {
	case e.invalid != "":
		cond.Reason, cond.Message = policyv1alpha1.ReasonInvalidSpec, e.invalid+keeping
	case newest == nil:
		cond.Reason, cond.Message = policyv1alpha1.ReasonLoading, "waiting for the module"
	case newest.lastFailure.Load() != nil:
		f := newest.lastFailure.Load()
		cond.Reason, cond.Message = readyReason(f.reason), fmt.Sprintf("%s: %s%s", f.reason, f.message, keeping)
	case newest.runtime.Current() == nil:
		cond.Reason, cond.Message = policyv1alpha1.ReasonLoading, "loading the module from "+newest.source.String()
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, policyv1alpha1.ReasonLoaded
		m := newest.runtime.Current()
		cond.Message = fmt.Sprintf("module %s serving from %s (exports %s)", short(m.SHA256()), newest.source.String(), m.Exports().String())
	}
	// Condition messages are at most 32768 bytes; a compile error can be
	// longer, and the start of it is what helps.
	if len(cond.Message) > maxStatusMessage {
		cond.Message = strings.ToValidUTF8(cond.Message[:maxStatusMessage-3], "") + "..."
	}
	if cond.Status == metav1.ConditionFalse {
		st.LastError = cond.Message
	}
	st.Conditions = []metav1.Condition{cond}
	return st
}

// maxStatusMessage bounds the messages written to status.
const maxStatusMessage = 4096

// readyReason maps a load failure to the Ready condition's reason.
func readyReason(loadReason string) string {
	switch loadReason {
	case "SourceError":
		return policyv1alpha1.ReasonSourceMissing
	case "SHA256Mismatch":
		return policyv1alpha1.ReasonSHA256Mismatch
	case "MemoryBudget":
		return "MemoryBudget"
	case source.ReasonNotFound, source.ReasonUnauthorized, source.ReasonTooLarge, source.ReasonSignatureInvalid, source.ReasonDigestMismatch:
		return loadReason
	}
	return policyv1alpha1.ReasonCompileError
}

// writeStatus writes e's status to its object when this process holds the
// status lease and the status changed. A condition keeps its
// lastTransitionTime while its status stays the same.
func (o *objectPolicies) writeStatus(u *unstructured.Unstructured, e *objEntry) error {
	if o.lease == nil || !o.lease.leading() || !o.lease.writes(e.key, o.w.profile) {
		return nil
	}
	want := statusOf(e)
	var cur policyv1alpha1.SchedulingPolicyStatus
	if m, ok := u.Object["status"].(map[string]interface{}); ok {
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(m, &cur)
	}
	now := metav1.Now()
	for i := range want.Conditions {
		c := &want.Conditions[i]
		c.LastTransitionTime = now
		if old := meta.FindStatusCondition(cur.Conditions, c.Type); old != nil && old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
	}
	if reflect.DeepEqual(normalizeStatus(cur), normalizeStatus(want)) {
		return nil
	}
	// A JSON merge patch leaves out what the struct omits when empty, so
	// fields to clear are sent as null.
	status := map[string]interface{}{"observedGeneration": want.ObservedGeneration, "conditions": want.Conditions, "activeSHA256": nil, "lastError": nil}
	if want.ActiveSHA256 != "" {
		status["activeSHA256"] = want.ActiveSHA256
	}
	if want.LastError != "" {
		status["lastError"] = want.LastError
	}
	body, err := json.Marshal(map[string]interface{}{"status": status})
	if err != nil {
		return err
	}
	ri := o.dyn.Resource(e.key.resource())
	var client dynamic.ResourceInterface = ri
	if e.key.namespace != "" {
		client = ri.Namespace(e.key.namespace)
	}
	_, err = client.Patch(o.ctx, e.key.name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: fieldManager(o.lease.identity)}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// normalizeStatus drops what the apiserver's round trip changes (time precision).
func normalizeStatus(s policyv1alpha1.SchedulingPolicyStatus) policyv1alpha1.SchedulingPolicyStatus {
	s = *s.DeepCopy()
	for i := range s.Conditions {
		s.Conditions[i].LastTransitionTime = metav1.NewTime(s.Conditions[i].LastTransitionTime.Rfc3339Copy().Time)
	}
	return s
}

// fieldManager is the status writer's field manager: the replica's lease
// identity, so managedFields show which replica wrote a status.
func fieldManager(identity string) string {
	// Field managers are at most 128 characters.
	m := "wasmsched/" + strings.ReplaceAll(identity, "/", "-")
	if len(m) > 128 {
		m = m[:128]
	}
	return m
}

// ObjectPolicies lists the policies the plugin runs from policy objects,
// for tools and tests: name -> serving sha256 ("" while loading).
func (w *WasmPolicy) ObjectPolicies() map[string]string {
	out := map[string]string{}
	if w.objects == nil {
		return out
	}
	w.objects.mu.Lock()
	defer w.objects.mu.Unlock()
	for _, e := range w.objects.entries {
		if e.serving != nil {
			sha := ""
			if m := e.serving.runtime.Current(); m != nil {
				sha = m.SHA256()
			}
			out[e.serving.cfg.Name] = sha
		}
	}
	return out
}
