package wasmpolicy

import (
	"maps"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host"
)

// gateTracker remembers the pods a policy's preenqueue gated and what may
// lift each gate (host.Recheck): the queueing hints ask it whether a
// cluster event is worth checking a gated pod again for, and its timer
// rechecks the pods whose gate asked for a delay. Pods leave it when they
// pass PreEnqueue or are deleted. A nil tracker (a plugin not built by
// NewWithArgs) tracks nothing.
type gateTracker struct {
	mu   sync.Mutex
	pods map[types.UID]*gatedPod
	// retries are pods a scheduling cycle could not evaluate (no CPU free
	// for a policy in time), to be sent back to the queue after a delay:
	// no cluster event may come to retry them. They are not gated.
	retries map[types.UID]*gatedPod
	timer   *time.Timer
	// due is when the timer fires (zero: not armed).
	due time.Time
	// activate sends pods back to the scheduling queue (nil: no queue).
	activate func(pods map[string]*v1.Pod)
	closed   bool
	// perNamespace counts each namespace's pods in pods and retries: one
	// namespace may fill only its part of the tracker.
	perNamespace map[string]int
}

// gatedPod is one gated pod and what lifts its gate.
type gatedPod struct {
	pod    *v1.Pod
	policy string
	events int32
	// at is when to check it again (zero: no delay asked).
	at time.Time
}

// maxGated bounds the tracker. A pod gated beyond it is rechecked as a pod
// WasmPolicy rejected in a cycle is (node changes, pods deleted or
// relabelled, its own update), not when another pod is bound, and not
// after a delay.
const maxGated = 10000

// maxGatedPerNamespace is what one namespace may take of the tracker: a
// team whose pods are held by thousands (its share used up, its gate
// closed) leaves room for every other namespace's.
const maxGatedPerNamespace = maxGated / 10

// full reports whether pod, not tracked yet in m, has no room (g.mu held).
func (g *gateTracker) full(m map[types.UID]*gatedPod, pod *v1.Pod) bool {
	if _, ok := m[pod.UID]; ok {
		return false
	}
	return len(m) >= maxGated || g.perNamespace[pod.Namespace] >= maxGatedPerNamespace
}

// put tracks gp in m, counting it for its namespace (g.mu held).
func (g *gateTracker) put(m map[types.UID]*gatedPod, gp *gatedPod) {
	if _, ok := m[gp.pod.UID]; !ok {
		if g.perNamespace == nil {
			g.perNamespace = map[string]int{}
		}
		g.perNamespace[gp.pod.Namespace]++
	}
	m[gp.pod.UID] = gp
}

// drop untracks uid from m (g.mu held).
func (g *gateTracker) drop(m map[types.UID]*gatedPod, uid types.UID) {
	gp, ok := m[uid]
	if !ok {
		return
	}
	delete(m, uid)
	if n := g.perNamespace[gp.pod.Namespace] - 1; n > 0 {
		g.perNamespace[gp.pod.Namespace] = n
	} else {
		delete(g.perNamespace, gp.pod.Namespace)
	}
}

func newGateTracker(activate func(map[string]*v1.Pod)) *gateTracker {
	return &gateTracker{pods: map[types.UID]*gatedPod{}, retries: map[types.UID]*gatedPod{}, activate: activate}
}

// gate records that p gated pod, and when to check it again.
func (g *gateTracker) gate(pod *v1.Pod, p *policy, r host.Recheck) { g.gateBy(pod, p.cfg.Name, r) }

// shareGate is the gate of a pod held for its namespace's share.
const shareGate = "(namespace share)"

// gateBy records that the gate named by gated pod, and when to check it
// again.
func (g *gateTracker) gateBy(pod *v1.Pod, by string, r host.Recheck) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.full(g.pods, pod) {
		return
	}
	gp := &gatedPod{pod: pod, policy: by, events: r.Events}
	if r.After > 0 {
		gp.at = time.Now().Add(r.After)
		g.arm(gp.at)
	}
	g.put(g.pods, gp)
}

// retry sends pod back to the scheduling queue after d, once: a cycle
// left it unschedulable only because a policy could not run in time, and
// a pod rejected in a cycle otherwise waits for a cluster event, which an
// idle cluster never sends (kube-scheduler's own flush comes after 5
// minutes).
func (g *gateTracker) retry(pod *v1.Pod, d time.Duration) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.full(g.retries, pod) {
		return
	}
	rp := &gatedPod{pod: pod, at: time.Now().Add(d)}
	g.put(g.retries, rp)
	g.arm(rp.at)
}

// release forgets a pod that passed PreEnqueue or was deleted.
func (g *gateTracker) release(uid types.UID) {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.drop(g.pods, uid)
	g.mu.Unlock()
}

// forget forgets a deleted pod: its gate and its retry.
func (g *gateTracker) forget(uid types.UID) {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.drop(g.pods, uid)
	g.drop(g.retries, uid)
	g.mu.Unlock()
}

// gatedBy reports whether the gate named by holds the pod now.
func (g *gateTracker) gatedBy(uid types.UID, by string) bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	gp, ok := g.pods[uid]
	return ok && gp.policy == by
}

// lookup returns the events that may lift the pod's gate, and whether the
// tracker knows the pod as gated.
func (g *gateTracker) lookup(uid types.UID) (int32, bool) {
	if g == nil {
		return 0, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if gp, ok := g.pods[uid]; ok {
		return gp.events, true
	}
	return 0, false
}

// arm makes the timer fire at t at the latest (under mu).
func (g *gateTracker) arm(t time.Time) {
	if g.closed || g.activate == nil || !g.due.IsZero() && !t.Before(g.due) {
		return
	}
	g.due = t
	d := time.Until(t)
	if g.timer == nil {
		g.timer = time.AfterFunc(d, g.fire)
	} else {
		g.timer.Reset(d)
	}
}

// fire sends the pods whose recheck is due back to the queue, where
// PreEnqueue runs again, and re-arms for the next.
func (g *gateTracker) fire() {
	g.mu.Lock()
	now := time.Now()
	due := map[string]*v1.Pod{}
	var next time.Time
	for _, gp := range g.pods {
		switch {
		case gp.at.IsZero():
		case !gp.at.After(now):
			due[klog.KObj(gp.pod).String()] = gp.pod
			gp.at = time.Time{}
		case next.IsZero() || gp.at.Before(next):
			next = gp.at
		}
	}
	for uid, rp := range g.retries {
		switch {
		case !rp.at.After(now):
			due[klog.KObj(rp.pod).String()] = rp.pod
			g.drop(g.retries, uid)
		case next.IsZero() || rp.at.Before(next):
			next = rp.at
		}
	}
	g.due = time.Time{}
	if !next.IsZero() {
		g.arm(next)
	}
	activate := g.activate
	g.mu.Unlock()
	if len(due) > 0 && activate != nil {
		activate(due)
	}
}

func (g *gateTracker) close() {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.closed = true
	if g.timer != nil {
		g.timer.Stop()
	}
	g.mu.Unlock()
}

// gateHint is the queueing hint of a cluster event of kind bit
// (abi.Recheck*) that WasmPolicy registers: a pod a policy gated is
// checked again only for the events its gate asked for; a pod WasmPolicy
// rejected in a scheduling cycle (Filter) is retried as before.
func (w *WasmPolicy) gateHint(bit int32) fwk.QueueingHintFn {
	return func(_ klog.Logger, pod *v1.Pod, _, newObj interface{}) (fwk.QueueingHint, error) {
		events, gated := w.gates.lookup(pod.UID)
		want := bit
		if p, ok := newObj.(*v1.Pod); ok && p.UID == pod.UID {
			want = abi.RecheckPodUpdate // the pod's own label change
		}
		if gated && events&want == 0 {
			return fwk.QueueSkip, nil
		}
		return fwk.Queue, nil
	}
}

// selfUpdateHint is the hint of pod updates: only the pod's own update
// counts, and only when its labels or annotations changed, which policies
// read (an approving annotation lifts a gate; a filter may read them too).
// A status update, including the scheduler's own, is not worth a retry.
func (w *WasmPolicy) selfUpdateHint(_ klog.Logger, pod *v1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	oldPod, ok1 := oldObj.(*v1.Pod)
	newPod, ok2 := newObj.(*v1.Pod)
	if !ok1 || !ok2 || newPod.UID != pod.UID || maps.Equal(oldPod.Labels, newPod.Labels) && maps.Equal(oldPod.Annotations, newPod.Annotations) {
		return fwk.QueueSkip, nil
	}
	if events, gated := w.gates.lookup(pod.UID); gated && events&abi.RecheckPodUpdate == 0 {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}

// boundPodHint is the hint of another pod being bound: worth a recheck
// only for a gate that asked for PodsChange (before gates, WasmPolicy did
// not register the event).
func (w *WasmPolicy) boundPodHint(_ klog.Logger, pod *v1.Pod, _, _ interface{}) (fwk.QueueingHint, error) {
	if events, gated := w.gates.lookup(pod.UID); gated && events&abi.RecheckPodsChange != 0 {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}
