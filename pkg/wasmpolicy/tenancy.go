package wasmpolicy

import (
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"

	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	"github.com/wasmsched/wasmsched/pkg/policyobjects"
)

// A namespaced policy (a team's SchedulingPolicy) that is slow but valid
// never fails, so neither the quarantine nor the breaker stops it: with a
// handful of pending pods it could take the whole scheduler, since
// kube-scheduler runs one cycle at a time and PreEnqueue with its queue
// locked. Each namespace therefore gets a share of the scheduler's time,
// which the operator sets (policyObjects.tenants, schedulingTimePercent
// and preEnqueueTimePercent): the wall time its policies' calls add to
// scheduling cycles and PreBind is charged to one bucket, the time its
// gates take to another, each refilled at its share of real time and
// holding a second's worth. While a bucket is empty the namespace's pods
// wait, held at PreEnqueue and turned away at PreFilter without a call,
// and are retried when it has refilled; other namespaces' pods go on.

// shareWindow is the time a share is measured over: a bucket holds
// shareWindow × share, so a namespace idle for a while may spend that much
// at once, and never more.
const shareWindow = time.Second

// bucket is a token bucket of time.
type bucket struct {
	balance  time.Duration // may go below 0: a call is charged after it ran
	last     time.Time
	capacity time.Duration
	rate     float64 // time refilled per unit of real time
}

func newBucket(percent int32) bucket {
	if percent <= 0 {
		percent = 100 // limits built in Go without defaulting: no share
	}
	rate := float64(percent) / 100
	c := time.Duration(rate * float64(shareWindow))
	return bucket{balance: c, capacity: c, rate: rate}
}

func (b *bucket) refill(now time.Time) {
	if !b.last.IsZero() && now.After(b.last) {
		b.balance = min(b.capacity, b.balance+time.Duration(float64(now.Sub(b.last))*b.rate))
	}
	b.last = now
}

// wait is how long until the bucket holds time again (0: it does now).
func (b *bucket) wait(now time.Time) time.Duration {
	b.refill(now)
	if b.balance > 0 {
		return 0
	}
	return time.Duration(float64(-b.balance)/b.rate) + time.Millisecond
}

// tenantShare is one namespace's accounts.
type tenantShare struct {
	ns string
	// setting names the args' entry that sets the share, for messages.
	setting            string
	percent, gatePcent int32
	mu                 sync.Mutex
	cycle, gate        bucket
	spent              time.Duration // cycle time charged, in all

	// Admission at PreEnqueue (admit): what a cycle and a gate of the
	// namespace's pods cost on average (decaying sums), and when each
	// held pod's turn comes.
	cycleCost, gateCost avgCost
	slots               map[types.UID]time.Time
	// admitted are the times pods were let through PreEnqueue whose
	// cycles have not started: they are in line before any pod held
	// after them. A cycle that starts takes the oldest; entries older
	// than admittedFor are dropped (pods deleted in the queue).
	admitted []time.Time
	// expired is when the line last dropped turns not taken (expire).
	expired time.Time

	// cycleSeconds and gateSeconds are its series of
	// wasmsched_tenant_policy_seconds_total, resolved once: a cycle
	// charges several busy intervals.
	cycleSeconds, gateSeconds metrics.CounterMetric
}

// avgCost is a decaying average of the time charged per cycle or gate.
type avgCost struct {
	sum time.Duration
	n   float64
}

func (a *avgCost) add(d time.Duration, count float64) {
	if a.n > 64 {
		a.sum, a.n = a.sum/2, a.n/2
	}
	a.sum += d
	a.n += count
}

func (a *avgCost) mean() time.Duration {
	if a.n < 1 {
		return 0
	}
	return time.Duration(float64(a.sum) / a.n)
}

// maxSlots bounds the held pods a namespace's line remembers; past it,
// held pods wait for the bucket alone.
const maxSlots = 10000

// tenantShares are every namespace's accounts.
type tenantShares struct {
	tenants *config.Tenants
	mu      sync.Mutex
	m       map[string]*tenantShare
}

func newTenantShares(t *config.Tenants) *tenantShares {
	return &tenantShares{tenants: t, m: map[string]*tenantShare{}}
}

// of returns namespace ns's accounts.
func (s *tenantShares) of(ns string) *tenantShare {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.m[ns]; ok {
		return t
	}
	l, path := policyobjects.TenantLimitsFor(s.tenants, ns)
	t := &tenantShare{ns: ns, setting: path, percent: l.SchedulingTimePercent, gatePcent: l.PreEnqueueTimePercent,
		cycle: newBucket(l.SchedulingTimePercent), gate: newBucket(l.PreEnqueueTimePercent)}
	t.cycleSeconds, t.gateSeconds = tenantSeconds.WithLabelValues(ns, pointCycle), tenantSeconds.WithLabelValues(ns, pointPreEnqueue)
	s.m[ns] = t
	tenantShareRatio.WithLabelValues(ns, pointCycle).Set(float64(t.percent) / 100)
	tenantShareRatio.WithLabelValues(ns, pointPreEnqueue).Set(float64(t.gatePcent) / 100)
	return t
}

// forget takes a deleted pod out of its namespace's line, if it has one.
func (s *tenantShares) forget(pod *v1.Pod) {
	s.mu.Lock()
	t := s.m[pod.Namespace]
	s.mu.Unlock()
	if t != nil {
		t.forget(pod.UID)
	}
}

// chargeCycle charges d of a cycle's (or PreBind's) policy time.
func (t *tenantShare) chargeCycle(d time.Duration) {
	t.mu.Lock()
	t.cycle.refill(time.Now())
	t.cycle.balance -= d
	t.spent += d
	t.cycleCost.add(d, 0)
	t.mu.Unlock()
	t.cycleSeconds.Add(d.Seconds())
}

// chargeGate charges d of PreEnqueue time.
func (t *tenantShare) chargeGate(d time.Duration) {
	t.mu.Lock()
	t.gate.refill(time.Now())
	t.gate.balance -= d
	t.gateCost.add(d, 1)
	t.mu.Unlock()
	t.gateSeconds.Add(d.Seconds())
}

// started counts a scheduling cycle of one of the namespace's pods, for
// the average cost of one, and takes it out of the line.
func (t *tenantShare) started() {
	t.mu.Lock()
	t.cycleCost.add(0, 1)
	if len(t.admitted) > 0 {
		t.admitted = t.admitted[1:]
	}
	t.mu.Unlock()
}

// admittedFor is how long a pod let through PreEnqueue counts as in line
// before its cycle: the queue's backoff and a busy scheduler can keep it
// a few seconds.
const admittedFor = 5 * time.Second

// admit says how long pod waits for its turn at PreEnqueue (0: go on).
// A namespace's pods are admitted at the pace its share pays for, each
// costing what a pod of the namespace costs on average (a cycle's time
// over the cycle share, or a gate's over the gate share, whichever is
// more): a new pod waits behind the pods held before it, less the credit
// the bucket holds, so that held pods come back one at a time, not all at
// once when the bucket refills (each would then pass PreEnqueue before
// the first one's cycle charged anything). A held pod that comes back at
// its time goes on; one deleted meanwhile leaves the line (forget).
func (t *tenantShare) admit(pod *v1.Pod, now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if at, ok := t.slots[pod.UID]; ok {
		if !now.Before(at) {
			delete(t.slots, pod.UID)
			t.admitted = append(t.admitted, now)
			return 0
		}
		return at.Sub(now)
	}
	cost := time.Duration(float64(t.cycleCost.mean()) / t.cycle.rate)
	if g := time.Duration(float64(t.gateCost.mean()) / t.gate.rate); g > cost {
		cost = g
	}
	if now.Sub(t.expired) > time.Second {
		t.expire(now)
	}
	t.cycle.refill(now)
	credit := time.Duration(float64(t.cycle.balance) / t.cycle.rate)
	for len(t.admitted) > 0 && now.Sub(t.admitted[0]) > admittedFor {
		t.admitted = t.admitted[1:]
	}
	wait := time.Duration(len(t.slots)+len(t.admitted))*cost + cost - credit
	if wait <= 0 || cost == 0 {
		if len(t.admitted) < maxSlots {
			t.admitted = append(t.admitted, now)
		}
		return 0
	}
	if t.slots == nil {
		t.slots = map[types.UID]time.Time{}
	}
	if len(t.slots) < maxSlots {
		t.slots[pod.UID] = now.Add(wait)
	}
	return wait
}

// expire drops the turns of pods that did not come back within
// admittedFor of them (t.mu held): their policy was deleted or no longer
// applies to them, so they no longer ask. Once a second at most.
func (t *tenantShare) expire(now time.Time) {
	t.expired = now
	for uid, at := range t.slots {
		if now.Sub(at) > admittedFor {
			delete(t.slots, uid)
		}
	}
}

// forget takes a deleted pod out of the line.
func (t *tenantShare) forget(uid types.UID) {
	t.mu.Lock()
	delete(t.slots, uid)
	t.mu.Unlock()
}

// spentCycle is what the namespace's policies were charged so far.
func (t *tenantShare) spentCycle() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.spent
}

// Points of the tenant metrics.
const (
	pointCycle      = "Cycle"
	pointPreEnqueue = "PreEnqueue"
)

// held says whether the namespace's pods wait now, how long, and why; gate
// also asks about the gates' share.
func (t *tenantShare) held(gate bool) (time.Duration, string) {
	now := time.Now()
	t.mu.Lock()
	w := t.cycle.wait(now)
	what, pct, setting := "scheduling time", t.percent, "schedulingTimePercent"
	if gw := t.gate.wait(now); gate && gw > w {
		w, what, pct, setting = gw, "PreEnqueue time", t.gatePcent, "preEnqueueTimePercent"
	}
	t.mu.Unlock()
	if w == 0 {
		return 0, ""
	}
	return w, fmt.Sprintf("namespace %s's policies used their share of %s (%d%%); its pods wait %s and are retried, while other namespaces' pods go on; make the policies faster, or ask the scheduler's operators to raise %s.%s in the WasmPolicy args",
		t.ns, what, pct, w.Round(time.Millisecond), t.setting, setting)
}

// tenantLimits are namespace ns's limits (the args', or the built-in
// ones for args built in Go); nil for the operator's policies (ns "").
func (w *WasmPolicy) tenantLimits(ns string) *config.TenantLimits {
	if ns == "" {
		return &config.TenantLimits{}
	}
	l, _ := policyobjects.TenantLimitsFor(&w.args.PolicyObjects.Tenants, ns)
	return l
}

// tenantOf returns the namespace whose share pays for policies, "" when
// none of them is namespaced.
func tenantOf(policies []*policy) string {
	for _, p := range policies {
		if ns := p.cfg.Scope.Namespace; ns != "" {
			return ns
		}
	}
	return ""
}

// shareHeld returns, for a pod whose namespace's policies apply to it,
// how long it must wait for its namespace's share, and why (0, "": it may
// go on).
func (w *WasmPolicy) shareHeld(pod *v1.Pod, policies []*policy, gate bool) (time.Duration, string) {
	ns := tenantOf(policies)
	if ns == "" || w.shares == nil {
		return 0, ""
	}
	share := w.shares.of(ns)
	d, why := share.held(gate)
	if d == 0 && gate {
		if d = share.admit(pod, time.Now()); d > 0 {
			why = fmt.Sprintf("namespace %s's pods are admitted at the pace its share of scheduling time (%d%%) pays for; this one waits %s and is retried, while other namespaces' pods go on; make the policies faster, or ask the scheduler's operators to raise %s.schedulingTimePercent in the WasmPolicy args",
				ns, share.percent, d.Round(time.Millisecond), share.setting)
		}
	}
	if d > 0 {
		point := pointCycle
		if gate {
			point = pointPreEnqueue
		}
		tenantWaits.WithLabelValues(ns, point).Inc()
		klog.V(4).InfoS("Pod waits for its namespace's share of scheduling time", "pod", klog.KObj(pod), "namespace", ns, "wait", d)
	}
	return d, why
}

// shareEvent tells the pod why it waits.
func (w *WasmPolicy) shareEvent(pod *v1.Pod, point, msg string) {
	if w.handle == nil || w.handle.EventRecorder() == nil {
		return
	}
	w.handle.EventRecorder().Eventf(pod, nil, v1.EventTypeNormal, "WasmPolicyShareUsed", point, "%s", msg)
}

// chargeTo makes pc's budget charge the namespace's share as it spends.
func (w *WasmPolicy) chargeTo(p *policy, pc *host.PolicyCycle) {
	if ns := p.cfg.Scope.Namespace; ns != "" && pc.Budget != nil && w.shares != nil {
		pc.Budget.OnSpent(w.shares.of(ns).chargeCycle)
	}
}

// instanceCharge is what a namespace's policy calls with the time each
// of its instances took to make: charged to its share (nil for the
// operator's policies).
func (w *WasmPolicy) instanceCharge(ns string) func(time.Duration) {
	if ns == "" || w.shares == nil {
		return nil
	}
	return w.shares.of(ns).chargeCycle
}

// cycleStarted counts a cycle of a pod that policies of its namespace
// apply to (their average cost per cycle paces admission).
func (w *WasmPolicy) cycleStarted(policies []*policy) {
	if ns := tenantOf(policies); ns != "" && w.shares != nil {
		w.shares.of(ns).started()
	}
}
