package wasmpolicy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework"
	"github.com/wasmsched/wasmsched/pkg/source"
)

// apply loads new source content, keeping the last good version on failure.
func (w *WasmPolicy) apply(ctx context.Context, p *policy, u source.Update) {
	logger := klog.FromContext(ctx)
	defer func() {
		// The first load has ended: pods that waited for it are retried,
		// now with a module or with the failurePolicy.
		if !p.settled.Swap(true) {
			w.requeueRejected(logger, p)
		}
		if p.loaded != nil {
			p.loaded()
		}
	}()
	serving := "none"
	if v := p.runtime.Current(); v != nil {
		serving = v.SHA256()
	}
	if u.Err != nil {
		reason := cmp.Or(u.Reason, source.ReasonSourceError)
		logger.Error(u.Err, "Policy source unavailable; keeping the last good module", "policy", p.cfg.Name, "source", p.source.String(), "reason", reason, "serving", serving)
		p.m.load(reason, 0)
		p.lastFailure.Store(&loadFailure{reason: reason, message: u.Err.Error()})
		w.event(u.Object, v1.EventTypeWarning, "PolicySourceUnavailable", fmt.Sprintf("WasmPolicy/%s: %s: %v; keeping module %s", p.cfg.Name, reason, u.Err, source.ShortDigest(serving)))
		return
	}
	if u.Digest != "" {
		logger.Info("Policy artifact pulled", "policy", p.cfg.Name, "source", p.source.String(), "digest", u.Digest, "fromCache", u.FromCache)
	}
	if u.Object != nil {
		p.mu.Lock()
		p.sourceObject = u.Object
		p.mu.Unlock()
	}
	if err := w.acquireObjects(ctx, p); err != nil {
		p.m.load(ReasonObjectsNotWatched, 0)
		why := fmt.Sprintf("%s: %v", ReasonObjectsNotWatched, err)
		p.loadError.Store(&why)
		p.lastFailure.Store(&loadFailure{reason: ReasonObjectsNotWatched, message: err.Error()})
		logger.Error(err, "Policy reads objects the scheduler cannot watch; not loading it", "policy", p.cfg.Name, "source", p.source.String(), "reason", ReasonObjectsNotWatched, "serving", serving)
		w.event(u.Object, v1.EventTypeWarning, "PolicyLoadFailed", fmt.Sprintf("WasmPolicy/%s: %s: %v", p.cfg.Name, ReasonObjectsNotWatched, err))
		return
	}
	start := time.Now()
	v, err := p.runtime.Load(ctx, u.Data, p.cfg.SHA256)
	if err != nil {
		reason := "Error"
		var le *host.LoadError
		if errors.As(err, &le) {
			reason = le.Reason
		}
		p.m.load(reason, time.Since(start))
		why := fmt.Sprintf("%s: %v", reason, unwrapLoad(err))
		p.loadError.Store(&why)
		p.lastFailure.Store(&loadFailure{reason: reason, message: unwrapLoad(err).Error()})
		logger.Error(err, "Policy module rejected; keeping the last good module", "policy", p.cfg.Name, "source", p.source.String(), "reason", reason, "serving", serving)
		w.event(u.Object, v1.EventTypeWarning, "PolicyLoadFailed", fmt.Sprintf("WasmPolicy/%s: %s: %v; keeping module %s", p.cfg.Name, reason, unwrapLoad(err), source.ShortDigest(serving)))
		return
	}
	p.loadError.Store(nil)
	p.lastFailure.Store(nil)
	if u.Loaded != nil {
		u.Loaded()
	}
	if u.Digest != "" {
		p.m.setSourceDigest(p.source.String(), u.Digest)
	}
	if v.SHA256() == serving {
		return
	}
	p.m.load("Success", time.Since(start))
	p.m.setActive(v.SHA256(), serving)
	p.breaker.reset("module " + source.ShortDigest(v.SHA256()) + " loaded")
	p.quarantine.reset()
	p.m.setQuarantined(0)
	w.requeueRejected(logger, p)
	logger.Info("Policy module active", "policy", p.cfg.Name, "source", p.source.String(), "sha256", v.SHA256(), "previous", serving, "exports", v.Exports().String())
	w.event(u.Object, v1.EventTypeNormal, "PolicyLoaded", fmt.Sprintf("WasmPolicy/%s: module %s active (exports %s)", p.cfg.Name, source.ShortDigest(v.SHA256()), v.Exports().String()))
	for _, why := range w.unservedOf(p) {
		logger.Info("Policy implements an extension point this program never calls; that part of the policy does not run", "policy", p.cfg.Name, "detail", why)
		w.event(u.Object, v1.EventTypeWarning, "PolicyPointNotServed", "WasmPolicy/"+why)
	}
}

// maxRemembered bounds each policy's set of rejected pods.
const maxRemembered = 10000

// remember records a pod the policy rejected, for requeueRejected.
func (p *policy) remember(pod *v1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rejected == nil {
		p.rejected = map[types.UID]*v1.Pod{}
	}
	if len(p.rejected) < maxRemembered {
		p.rejected[pod.UID] = pod
	}
}

// staleRetry is how long after a pod's rejection by a module version that
// no longer serves the pod is sent back to the queue: long enough for its
// scheduling cycle to have ended.
const staleRetry = 500 * time.Millisecond

// rememberRejected records a pod that policy p rejected with module m (the
// version its cycle pinned). If m no longer serves, the reload's requeue
// ran while the pod was still in its cycle and missed it: the pod is sent
// back to the queue shortly, rather than waiting for an unrelated event or
// the unschedulable-pod timeout.
func (w *WasmPolicy) rememberRejected(p *policy, pod *v1.Pod, m module) {
	p.remember(pod)
	if m != p.runtime.Current() {
		time.AfterFunc(staleRetry, func() { w.requeueRejected(klog.Background(), p) })
	}
}

func (p *policy) takeRejected() map[string]*v1.Pod {
	out := make(map[string]*v1.Pod)
	p.addRejected(out, true)
	return out
}

// addRejected adds the pods p rejected to pods, by namespace/name (as
// activate takes them), and forgets them when take is set.
func (p *policy) addRejected(pods map[string]*v1.Pod, take bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pod := range p.rejected {
		pods[klog.KObj(pod).String()] = pod
	}
	if take {
		p.rejected = nil
	}
}

// requeueRejected sends the pods the policy rejected back to the scheduling
// queue: the new module may admit them.
func (w *WasmPolicy) requeueRejected(logger klog.Logger, p *policy) {
	w.activate(logger, p.takeRejected(), "Requeued pods rejected by the previous module", "policy", p.cfg.Name)
}

// EventsToRegister implements framework.EnqueueExtensions: a pod a policy
// rejected may fit after a node is added or its labels, taints,
// annotations, allocatable or conditions change, after a pod leaves a
// node, or after the pod's own labels or annotations change; and, when
// some policy may declare the Volumes read, after a claim it names, a
// volume or a StorageClass changes (requeue.go). A pod a gate holds
// (PreEnqueue) is checked again only for the events its gate asked for
// (recheck_on), and for another pod being bound when it asked for
// PodsChange (gates.go).
func (w *WasmPolicy) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	events := []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint | fwk.UpdateNodeAnnotation | fwk.UpdateNodeAllocatable | fwk.UpdateNodeCondition}, QueueingHintFn: w.gateHint(abi.RecheckNodesChange)},
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete | fwk.UpdatePodLabel | fwk.UpdatePodScaleDown}, QueueingHintFn: w.gateHint(abi.RecheckPodsChange)},
		{Event: fwk.ClusterEvent{Resource: framework.PodSelf, ActionType: fwk.Update}, QueueingHintFn: w.selfUpdateHint},
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Add}, QueueingHintFn: w.boundPodHint},
	}
	// Only with the listers New asked for: the events make kube-scheduler
	// watch the kinds, which the scheduler's RBAC must then allow.
	if w.volumes != nil {
		events = append(events, w.volumeEvents()...)
	}
	if w.dra != nil {
		events = append(events, w.deviceEvents()...)
	}
	return events, nil
}

// podDeleted forgets a deleted pod's gate and retry.
func (w *WasmPolicy) podDeleted(obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if pod, ok := obj.(*v1.Pod); ok {
		w.gates.forget(pod.UID)
		w.forgetRejected(pod)
		w.releaseCounts(string(pod.UID))
		w.waiting.forget(pod.UID)
		if w.shares != nil {
			w.shares.forget(pod)
		}
	}
}

// activate sends pods back to the scheduling queue, where PreEnqueue runs
// again (a framework built without a queue has no activator). It returns
// at once and activates from its own goroutine: kube-scheduler calls
// PreEnqueue with its queue locked, and Activate takes that lock, so an
// activation caused from within PreEnqueue (a circuit breaker changing
// state) must not run on the caller's goroutine.
func (w *WasmPolicy) activate(logger klog.Logger, pods map[string]*v1.Pod, msg string, kv ...any) {
	if len(pods) == 0 || w.handle == nil {
		return
	}
	go func() {
		defer func() {
			if r := recover(); r != nil {
				logger.V(2).Info("No pod activator; pods wait for their next retry", kv...)
			}
		}()
		w.handle.Activate(logger, pods)
		logger.Info(msg, append(kv, "pods", len(pods))...)
	}()
}

func unwrapLoad(err error) error {
	var le *host.LoadError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// breakerChanged reports a transition of p's circuit breaker where operators
// look: a log line, the state gauge, and an Event on the policy's ConfigMap
// (or, for a file source, on the pod whose cycle changed it). When a probe
// is due, the pods the open breaker rejected are woken so one of them
// probes; when it closes, they are retried.
func (w *WasmPolicy) breakerChanged(p *policy, from, to breakerState, why string, pod *v1.Pod) {
	logger := klog.Background()
	p.m.setBreaker(to)
	typ, reason := v1.EventTypeNormal, "PolicyCircuitBreakerClosed"
	switch to {
	case breakerOpen:
		typ, reason = v1.EventTypeWarning, "PolicyCircuitBreakerOpen"
		logger.Error(nil, "Policy circuit breaker open", "policy", p.cfg.Name, "from", from.String(), "failurePolicy", p.cfg.FailurePolicy, "reason", why)
	case breakerHalfOpen:
		reason = "PolicyCircuitBreakerHalfOpen"
		logger.Info("Policy circuit breaker half-open", "policy", p.cfg.Name, "reason", why)
	default:
		logger.Info("Policy circuit breaker closed", "policy", p.cfg.Name, "from", from.String(), "reason", why)
	}
	p.mu.Lock()
	obj := p.sourceObject
	p.mu.Unlock()
	if obj == nil && pod != nil {
		obj = pod
	}
	if obj != nil && w.handle != nil && w.handle.EventRecorder() != nil {
		w.handle.EventRecorder().Eventf(obj, nil, typ, reason, "CallPolicy", "WasmPolicy/%s: circuit breaker %s: %s", p.cfg.Name, to, why)
	}
	if to != breakerOpen {
		w.requeueRejected(logger, p)
	}
}

func (w *WasmPolicy) event(obj runtime.Object, typ, reason, note string) {
	if obj == nil || w.handle == nil || w.handle.EventRecorder() == nil {
		return
	}
	w.handle.EventRecorder().Eventf(obj, nil, typ, reason, "LoadPolicy", note)
}
