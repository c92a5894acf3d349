package policyobjects

import (
	"context"
	"reflect"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

// reconcile brings the plugin's policy for k in line with its object.
func (c *Controller) reconcile(k key) error {
	obj, exists, err := c.informers[k.namespace != ""].GetStore().GetByKey(k.storeKey())
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[k]
	if !exists {
		if e != nil {
			c.logger.Info("Policy object deleted; its policy no longer applies", "object", k.String(), "policy", k.policyName())
			c.drop(e, true)
			c.requeueOverPolicies(k.namespace)
		}
		return nil
	}
	u := obj.(*unstructured.Unstructured)
	if e != nil && e.uid != "" && e.uid != u.GetUID() {
		// Deleted and created again under the same name.
		c.drop(e, false)
		e = nil
	}
	if e == nil {
		e = &entry{key: k}
		c.entries[k] = e
	}
	e.uid = u.GetUID()
	e.generation = u.GetGeneration()
	spec, invalid := policyOf(k, u, c.plugin.HasArgsPolicy, c.cfg.Tenants, c.cfg.Objects)
	if invalid == "" && e.spec == nil {
		invalid = c.overPolicies(k)
	}
	if invalid == "" && !takesProfile(spec.Scope, c.plugin.Profile()) {
		// Another profile runs it; this plugin neither runs it nor reports
		// (and leaves the series, which share the policy's name, to it).
		c.drop(e, false)
		return nil
	}
	e.invalid = invalid
	if c.lease != nil {
		c.lease.claim(k, c.plugin.Profile())
	}
	if invalid == "" && (e.spec == nil || !reflect.DeepEqual(*e.spec, spec)) {
		if err := c.build(e, spec); err != nil {
			e.invalid = err.Error()
		}
	}
	if e.candidate != nil && e.candidate.Load().SHA256 != "" {
		c.promote(e)
	}
	if e.invalid != "" || (e.candidate == nil && e.serving != nil && e.serving.Settled()) ||
		(e.candidate != nil && e.candidate.Settled()) {
		c.firstDone(e)
	}
	c.reconcileCanary(u, e)
	return c.writeStatus(u, e)
}

// takesProfile reports whether a policy of scope sc may run in the
// scheduler profile named profile ("" outside a scheduler: every one).
func takesProfile(sc config.Scope, profile string) bool {
	if len(sc.Profiles) == 0 || profile == "" {
		return true
	}
	for _, p := range sc.Profiles {
		if p == profile {
			return true
		}
	}
	return false
}

// build starts a candidate policy for spec, replacing a candidate still
// loading an older spec.
func (c *Controller) build(e *entry, spec config.Policy) error {
	if e.candidate != nil {
		c.retire(e.candidate, false)
		e.candidate = nil
	}
	p, err := c.plugin.Build(c.ctx, spec, "")
	if err != nil {
		return err
	}
	sp := spec
	e.spec = &sp
	ctx, cancel := context.WithCancel(c.ctx)
	r := &run{Policy: p, cancel: cancel}
	e.candidate = r
	k := e.key
	c.logger.Info("Loading policy object", "object", k.String(), "policy", spec.Name, "generation", e.generation, "source", p.Load().Source)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		// loaded may still be called after the policy is retired (a load
		// in flight); a late reconcile of the key does nothing new.
		p.Run(ctx, func() { c.queue.Add(k) })
	}()
	return nil
}

// promote makes e's candidate the serving policy and publishes the set.
func (c *Controller) promote(e *entry) {
	old := e.serving
	e.serving, e.candidate = e.candidate, nil
	c.publishLocked()
	if old != nil {
		old.Superseded(e.serving.Policy)
		c.retire(old, false)
	}
	c.logger.Info("Policy object active", "object", e.key.String(), "policy", e.serving.Name(), "generation", e.generation, "sha256", e.serving.Load().SHA256)
}

// drop removes e's policies from the set and retires them; forget also
// deletes the policy's metric series (the object is gone).
func (c *Controller) drop(e *entry, forget bool) {
	c.firstDone(e)
	delete(c.entries, e.key)
	if c.lease != nil {
		c.lease.release(e.key, c.plugin.Profile())
	}
	// Published first: retiring requeues the pods the policy rejected or
	// gated, and PreEnqueue runs for them at once, with the set then
	// published.
	c.publishLocked()
	if e.serving != nil {
		c.retire(e.serving, forget)
	}
	if e.candidate != nil {
		c.retire(e.candidate, forget && e.serving == nil)
	}
	if e.canary != nil {
		c.retire(e.canary, forget)
	}
}

// publishLocked publishes the serving object policies, ordered by name.
// Caller holds c.mu.
func (c *Controller) publishLocked() {
	var serving []*entry
	for _, e := range c.entries {
		if e.serving != nil {
			serving = append(serving, e)
		}
	}
	sort.Slice(serving, func(i, j int) bool { return serving[i].serving.Name() < serving[j].serving.Name() })
	var objs []Policy
	for _, e := range serving {
		// A canary runs right before its primary: both then see the
		// same nodes (a node an earlier policy rejects neither sees).
		if e.canary != nil && e.canaryPublished {
			objs = append(objs, e.canary.Policy)
		}
		objs = append(objs, e.serving.Policy)
	}
	c.plugin.Publish(objs)
}

// retire stops r's source and closes it once cycles that pinned it have
// ended (the retired grace). forget deletes the policy's metric series
// too, unless a policy of the same name runs again by then (the object was
// created anew). Caller holds c.mu.
func (c *Controller) retire(r *run, forget bool) {
	r.cancel()
	r.Retire()
	t := time.AfterFunc(c.cfg.RetiredGrace, func() {
		c.mu.Lock()
		if _, ok := c.retiring[r]; !ok { // closed by Close
			c.mu.Unlock()
			return
		}
		delete(c.retiring, r)
		forget = forget && !c.runsLocked(r.Name())
		c.mu.Unlock()
		r.Close(forget)
		klog.V(2).InfoS("Retired policy closed: its instances and compiled code are freed", "policy", r.Name())
		releaseMemory.trigger()
	})
	c.retiring[r] = t
}

// runsLocked reports whether some entry runs a policy named name.
func (c *Controller) runsLocked(name string) bool {
	for _, e := range c.entries {
		for _, r := range []*run{e.serving, e.candidate, e.canary} {
			if r != nil && r.Name() == name {
				return true
			}
		}
	}
	return false
}
