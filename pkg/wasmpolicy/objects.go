package wasmpolicy

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
	"github.com/wasmsched/wasmsched/pkg/policyobjects"
	"github.com/wasmsched/wasmsched/pkg/source"
)

// newObjectController returns the controller of the policy objects this
// plugin runs (args policyObjects.enabled).
func (w *WasmPolicy) newObjectController(po config.PolicyObjects, grants []config.ObjectGrant) (*policyobjects.Controller, error) {
	h := w.handle
	if h == nil || h.KubeConfig() == nil || h.ClientSet() == nil {
		return nil, errors.New("policyObjects.enabled needs a Kubernetes client: it is for the scheduler, not for tools that host the plugin without one (set it to false there)")
	}
	dyn, err := dynamic.NewForConfig(h.KubeConfig())
	if err != nil {
		return nil, fmt.Errorf("policyObjects: %w", err)
	}
	return policyobjects.New(objectsPlugin{w}, policyobjects.Config{
		Dynamic: dyn, Client: h.ClientSet(), StatusLease: po.StatusLease,
		ReadOnly: w.opts.readOnlyObjects, RetiredGrace: w.opts.retiredGrace,
		Events: h.EventRecorder(), Tenants: &po.Tenants, Objects: grants,
	})
}

// objectsPlugin is the plugin as the policy-object controller uses it.
type objectsPlugin struct{ w *WasmPolicy }

func (o objectsPlugin) Profile() string { return o.w.profile }

func (o objectsPlugin) Build(ctx context.Context, spec config.Policy, canaryOf string) (policyobjects.Policy, error) {
	if o.w.opts.edit != nil {
		spec = *spec.DeepCopy()
		o.w.opts.edit(&spec)
	}
	p, err := o.w.buildPolicy(ctx, spec)
	if err != nil {
		return nil, err
	}
	if canaryOf != "" {
		p.canary = &canaryJudge{of: canaryOf}
	}
	return objectPolicy{o.w, p}, nil
}

func (o objectsPlugin) CanaryTransition(policy, phase string) {
	canaryTransitions.WithLabelValues(policy, phase).Inc()
}

func (o objectsPlugin) HasArgsPolicy(name string) bool {
	for _, p := range o.w.static {
		if p.cfg.Name == name {
			return true
		}
	}
	return false
}

func (o objectsPlugin) Publish(serving []policyobjects.Policy) {
	objs := make([]*policy, len(serving))
	for i, s := range serving {
		objs[i] = s.(objectPolicy).p
	}
	o.w.setMu.Lock()
	o.w.publish(objs)
	o.w.setMu.Unlock()
}

// objectPolicy is a policy of a policy object, as its controller uses it.
type objectPolicy struct {
	w *WasmPolicy
	p *policy
}

func (o objectPolicy) Name() string { return o.p.cfg.Name }

func (o objectPolicy) Run(ctx context.Context, loaded func()) {
	o.p.loaded = loaded
	o.p.source.Run(ctx, func(u source.Update) { o.w.apply(ctx, o.p, u) })
}

func (o objectPolicy) Load() policyobjects.Load {
	l := policyobjects.Load{Source: o.p.source.String()}
	if m := o.p.runtime.Current(); m != nil {
		l.SHA256, l.Exports = m.SHA256(), m.Exports().String()
	}
	if f := o.p.lastFailure.Load(); f != nil {
		l.FailureReason, l.FailureMessage = f.reason, f.message
	}
	return l
}

func (o objectPolicy) Settled() bool { return o.p.settled.Load() }

func (o objectPolicy) Retire() {
	o.p.breaker.stop()
	o.w.requeueRejected(klog.Background(), o.p)
}

func (o objectPolicy) Superseded(by policyobjects.Policy) {
	if m := o.p.runtime.Current(); m != nil && m.SHA256() != by.Load().SHA256 {
		moduleInfo.DeleteLabelValues(o.p.cfg.Name, m.SHA256())
	}
}

func (o objectPolicy) Canary() policyobjects.CanaryCounts {
	if o.p.canary == nil {
		return policyobjects.CanaryCounts{}
	}
	return o.p.canary.counts()
}

func (o objectPolicy) Close(forget bool) {
	active := ""
	if m := o.p.runtime.Current(); m != nil {
		active = m.SHA256()
	}
	o.p.close()
	if forget {
		o.p.m.forget(active)
	}
}

// ObjectPolicies lists the policies the plugin runs from policy objects,
// for tools and tests: name -> serving sha256 ("" while loading).
func (w *WasmPolicy) ObjectPolicies() map[string]string {
	if w.objects == nil {
		return map[string]string{}
	}
	return w.objects.Serving()
}
