package policyobjects

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	policyv1alpha1 "github.com/wasmsched/wasmsched/pkg/apis/policy/v1alpha1"
)

// Controller runs the policies of ClusterSchedulingPolicy and
// SchedulingPolicy objects next to the args' policies of one plugin.
//
// A change to an object's spec builds a new policy (the candidate) beside
// the one serving; the candidate replaces it only once it has a module, so
// a bad update (a module that does not load, a wrong pin) leaves the last
// good version serving, as a bad module in a ConfigMap does. Cycles in
// flight keep the set, and so the policies, they started with; a replaced
// or deleted policy is closed after the retired grace.
type Controller struct {
	plugin Plugin
	cfg    Config
	lease  *statusLease
	queue  workqueue.TypedRateLimitingInterface[key]
	ctx    context.Context
	logger klog.Logger
	wg     sync.WaitGroup

	factory   dynamicinformer.DynamicSharedInformerFactory
	informers map[bool]cache.SharedIndexInformer // by namespaced

	mu      sync.Mutex
	entries map[key]*entry
	// retiring are the replaced and deleted policies waiting for their
	// grace to end, with their timers.
	retiring map[*run]*time.Timer
	// pending counts the objects listed at start whose first load has not
	// ended; synced is closed when it reaches 0.
	pending int
	synced  chan struct{}
	started bool
	// lastInformerErr is the last listing error logged (under mu).
	lastInformerErr string
}

// Config is how a Controller reaches the cluster.
type Config struct {
	// Dynamic lists and watches the objects and writes their status.
	Dynamic dynamic.Interface
	// Client holds the status lease; unused when ReadOnly.
	Client kubernetes.Interface
	// StatusLease is the Lease that elects the replica writing status.
	StatusLease config.LeaseRef
	// ReadOnly runs the objects' policies without ever writing status
	// (tools that host the plugin beside a running scheduler).
	ReadOnly bool
	// Events records the canaries' transitions on the objects; nil: none.
	Events EventRecorder
	// CanaryCheck is how often canary rules are checked; 0: every second.
	CanaryCheck time.Duration
	// RetiredGrace is how long a replaced or deleted policy stays open for
	// the cycles that pinned it; 0: host.DefaultRetiredGrace.
	RetiredGrace time.Duration
	// Tenants are what the namespaced objects may set, read and spend (the
	// args' policyObjects.tenants); nil: the built-in limits.
	Tenants *config.Tenants
	// Objects are the kinds of objects the args grant policies.
	Objects []config.ObjectGrant
}

// EventRecorder records Events (the scheduler framework's recorder, of
// any line, has this method).
type EventRecorder interface {
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...interface{})
}

// key names a policy object; namespace is "" for a cluster policy.
type key struct{ namespace, name string }

func (k key) String() string {
	if k.namespace == "" {
		return "clusterschedulingpolicy/" + k.name
	}
	return "schedulingpolicy/" + k.namespace + "/" + k.name
}

// policyName is the object's policy name in reasons, logs, events and
// metrics: the name of a cluster policy, namespace/name of a namespaced one.
func (k key) policyName() string {
	if k.namespace == "" {
		return k.name
	}
	return k.namespace + "/" + k.name
}

func (k key) resource() schema.GroupVersionResource {
	if k.namespace == "" {
		return policyv1alpha1.ClusterSchedulingPoliciesResource
	}
	return policyv1alpha1.SchedulingPoliciesResource
}

// storeKey is the informer store's key of the object.
func (k key) storeKey() string {
	if k.namespace == "" {
		return k.name
	}
	return k.namespace + "/" + k.name
}

// run is a policy the controller started, with the cancel of its source.
type run struct {
	Policy
	cancel context.CancelFunc
}

// entry is what the controller runs for one object.
type entry struct {
	key        key
	uid        types.UID
	generation int64
	// invalid is why the current spec is refused ("" when it is valid).
	invalid string
	// spec is the policy config the newest policy (candidate, else
	// serving) was built from.
	spec *config.Policy
	// serving is in the plugin's policy set; candidate loads a newer spec
	// and replaces serving when it has a module.
	serving, candidate *run
	// initial marks an object listed at start whose first load has not ended.
	initial bool

	// canary runs spec.canary's candidate (canary.go); canaryPublished
	// once it is in the set, from canaryStarted. canaryKey identifies the
	// canary spec (canarySpec) the fields describe, also after it ended.
	canary          *run
	canaryPublished bool
	canaryKey       string
	canarySpec      *policyv1alpha1.Canary
	canaryRule      canaryRule
	canaryStarted   time.Time
	// canaryPhase and canaryReason are status.canary's; canaryShown the
	// counts status shows (refreshed every canaryStatusEvery, at
	// canaryShownAt); canarySHA the candidate's module once it ended.
	canaryPhase, canaryReason string
	canaryShown               CanaryCounts
	canaryShownAt             time.Time
	canarySHA                 string
	// previous is status.previous: the version the last promotion replaced.
	previous *policyv1alpha1.PolicyVersion
}

// New returns the controller of plugin's policy objects, not started.
func New(plugin Plugin, cfg Config) (*Controller, error) {
	if cfg.RetiredGrace <= 0 {
		cfg.RetiredGrace = host.DefaultRetiredGrace
	}
	c := &Controller{
		plugin:   plugin,
		cfg:      cfg,
		queue:    workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[key](), workqueue.TypedRateLimitingQueueConfig[key]{Name: "wasmsched_policy_objects"}),
		entries:  map[key]*entry{},
		retiring: map[*run]*time.Timer{},
		synced:   make(chan struct{}),
	}
	if cfg.ReadOnly {
		return c, nil
	}
	var err error
	if c.lease, err = joinStatusLease(cfg.Client, cfg.StatusLease, c); err != nil {
		return nil, err
	}
	return c, nil
}

// Start watches the objects and returns a channel closed once the objects
// that existed at start have each ended their first load (or listing them
// failed, or ctx ends). The controller stops when ctx ends.
func (c *Controller) Start(ctx context.Context) <-chan struct{} {
	c.ctx, c.logger = ctx, klog.FromContext(ctx)
	c.factory = dynamicinformer.NewDynamicSharedInformerFactory(c.cfg.Dynamic, 0)
	c.informers = map[bool]cache.SharedIndexInformer{
		false: c.factory.ForResource(policyv1alpha1.ClusterSchedulingPoliciesResource).Informer(),
		true:  c.factory.ForResource(policyv1alpha1.SchedulingPoliciesResource).Informer(),
	}
	for namespaced, inf := range c.informers {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueueObj,
			UpdateFunc: func(_, obj interface{}) { c.enqueueObj(obj) },
			DeleteFunc: c.enqueueObj,
		})
		res := policyv1alpha1.ClusterSchedulingPoliciesResource
		if namespaced {
			res = policyv1alpha1.SchedulingPoliciesResource
		}
		_ = inf.SetWatchErrorHandlerWithContext(func(hctx context.Context, r *cache.Reflector, err error) {
			c.informerFailed(res, err)
			cache.DefaultWatchErrorHandler(hctx, r, err)
		})
	}
	c.factory.Start(ctx.Done())
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if !cache.WaitForCacheSync(ctx.Done(), c.informers[false].HasSynced, c.informers[true].HasSynced) {
			return
		}
		c.mu.Lock()
		for _, inf := range c.informers {
			for _, obj := range inf.GetStore().List() {
				if u, ok := obj.(*unstructured.Unstructured); ok {
					k := key{u.GetNamespace(), u.GetName()}
					if c.entries[k] == nil {
						c.entries[k] = &entry{key: k, initial: true}
						c.pending++
					}
				}
			}
		}
		c.started = true
		c.settleLocked()
		c.mu.Unlock()
		for {
			k, quit := c.queue.Get()
			if quit {
				return
			}
			if err := c.reconcile(k); err != nil {
				c.logger.Error(err, "Policy object not reconciled; retrying", "object", k.String())
				c.queue.AddRateLimited(k)
			} else {
				c.queue.Forget(k)
			}
			c.queue.Done(k)
		}
	}()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	if !c.cfg.ReadOnly {
		every := c.cfg.CanaryCheck
		if every <= 0 {
			every = time.Second
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					c.checkCanaries()
				}
			}
		}()
	}
	return c.synced
}

// informerFailed reports, once per distinct error, that the objects of res
// cannot be listed (CRDs not installed, RBAC missing), and stops the start
// from waiting for them: the args' policies schedule meanwhile, and the
// objects load when the informer recovers.
func (c *Controller) informerFailed(res schema.GroupVersionResource, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if msg := res.Resource + ": " + err.Error(); msg != c.lastInformerErr {
		c.lastInformerErr = msg
		c.logger.Error(err, "Cannot list policy objects; policies from them apply once they can be listed", "resource", res.Resource,
			"fix", "install the CRDs (kubectl apply --server-side -k manifests/crds) and let the scheduler list and watch them (manifests/base/rbac-policy-objects.yaml)")
	}
	select {
	case <-c.synced:
	default:
		close(c.synced)
	}
}

// settleLocked closes synced once no initial object is still loading.
func (c *Controller) settleLocked() {
	if c.started && c.pending == 0 {
		select {
		case <-c.synced:
		default:
			close(c.synced)
		}
	}
}

// firstDone records that an initial object's first load (or refusal) ended.
func (c *Controller) firstDone(e *entry) {
	if e.initial {
		e.initial = false
		c.pending--
		c.settleLocked()
	}
}

func (c *Controller) enqueueObj(obj interface{}) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if m, err := meta.Accessor(obj); err == nil {
		c.queue.Add(key{m.GetNamespace(), m.GetName()})
	}
}

// enqueueAll reconciles every object again: this process just started
// writing status.
func (c *Controller) enqueueAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.entries {
		c.queue.Add(k)
	}
}

// Serving lists the policies that serve from objects, for tools and tests:
// name -> module sha256 ("" while loading).
func (c *Controller) Serving() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]string{}
	for _, e := range c.entries {
		if e.serving != nil {
			out[e.serving.Name()] = e.serving.Load().SHA256
		}
	}
	return out
}

// Close stops the controller with its plugin: it waits for the goroutines
// Start began (they end with Start's context) and closes every policy.
func (c *Controller) Close() {
	if c.lease != nil {
		c.lease.leave(c.cfg.StatusLease, c)
	}
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		for _, r := range []*run{e.serving, e.candidate, e.canary} {
			if r != nil {
				r.cancel()
				r.Close(false)
			}
		}
	}
	for r, t := range c.retiring {
		t.Stop()
		r.Close(false)
		delete(c.retiring, r)
	}
}

// maxStatusMessage bounds the messages written to status.
const maxStatusMessage = 4096
