package wasmpolicy

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// quarantine contains a policy's failures where they happen: at the pod. A
// pod whose call made the policy fail (timeout, trap, exit, spent cycle
// budget) is quarantined, and so is what it presents to the policy (its
// input: namespace, labels, annotations and spec, not its name), so the
// next replica of a pod that loops the policy is recognised before it
// costs a timeout. While a pod is quarantined, the policy is not called
// for it: the failurePolicy answers at once, with a reason that says the
// policy failed on this pod and how to fix it. The quarantine ends after a
// period that doubles with each failure of the same input, from
// quarantineBase to quarantineMax, or when a new module loads; then the
// pod's next cycle calls the policy again.
//
// The policy-wide circuit breaker is the last resort, for a policy that
// fails on most pods (breaker.go): quarantined pods never reach it, and
// they never take its half-open probe.
//
// Why: with only a breaker, one tenant's 5 looping pods opened it for the
// whole profile within a second, and its half-open probes went to the
// looping pods every time: 0-1% of ordinary pods' throughput
// (docs/security.md, RATIONALE: quarantine before the breaker).
type quarantine struct {
	now func() time.Time
	// held is the number of entries, so that a policy with none (the
	// usual case) pays one atomic load per cycle.
	held atomic.Int32

	// wake sends pods whose quarantine ended back to the scheduling
	// queue, so they are not left waiting for an unrelated event.
	wake func(pods map[string]*v1.Pod)

	mu      sync.Mutex
	byUID   map[types.UID]*quarantined
	byInput map[[32]byte]*quarantined
}

// quarantined is one quarantined input (and the pods seen with it).
type quarantined struct {
	input [32]byte
	// pods are the pods seen with the input (at most maxPodsPerInput).
	pods   map[types.UID]*v1.Pod
	timer  *time.Timer
	until  time.Time
	period time.Duration
	// failures counts the failed cycles of this input; why is the last.
	failures int
	why      string
}

// Quarantine periods: the first failure of an input holds it for
// quarantineBase, each further one doubles the period up to quarantineMax,
// the longest kube-scheduler keeps a pod in its unschedulable pool
// (podMaxInUnschedulablePodsDuration).
const (
	quarantineBase = 30 * time.Second
	quarantineMax  = 5 * time.Minute
	// maxQuarantined bounds the inputs kept per policy; past it the
	// oldest is released (its pod costs one more timeout).
	maxQuarantined  = 10_000
	maxPodsPerInput = 64
)

func newQuarantine(wake func(pods map[string]*v1.Pod)) *quarantine {
	return &quarantine{now: time.Now, wake: wake, byUID: map[types.UID]*quarantined{}, byInput: map[[32]byte]*quarantined{}}
}

// inputOf is what a pod presents to a policy, hashed: its namespace,
// labels, annotations and spec. Replicas of one template share it; the
// name, UID and status do not count.
func inputOf(pod *v1.Pod) [32]byte {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00", pod.Namespace)
	for _, m := range []map[string]string{pod.Labels, pod.Annotations} {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(h, "%s=%s\x00", k, m[k])
		}
		h.Write([]byte{0xff})
	}
	spec := pod.Spec.DeepCopy()
	spec.NodeName = ""
	if b, err := spec.Marshal(); err == nil {
		h.Write(b)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// holds returns why pod is quarantined, and until when, or "" when it is
// not (or its period ended: then its next cycle calls the policy).
func (q *quarantine) holds(pod *v1.Pod) (string, time.Time) {
	if q.held.Load() == 0 {
		return "", time.Time{}
	}
	q.mu.Lock()
	e := q.byUID[pod.UID]
	q.mu.Unlock()
	if e == nil {
		in := inputOf(pod)
		q.mu.Lock()
		if e = q.byInput[in]; e != nil {
			e.keep(pod)
			q.byUID[pod.UID] = e
		}
		q.mu.Unlock()
	}
	if e == nil {
		return "", time.Time{}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	if !now.Before(e.until) {
		return "", time.Time{}
	}
	return fmt.Sprintf("quarantined: the policy failed on this pod or one like it %d time(s) (last: %s); not called for it for %s more", e.failures, e.why, e.until.Sub(now).Round(time.Second)), e.until
}

// keep remembers a pod seen with the input, to wake it when the
// quarantine ends.
func (e *quarantined) keep(pod *v1.Pod) {
	if _, ok := e.pods[pod.UID]; ok || len(e.pods) < maxPodsPerInput {
		e.pods[pod.UID] = pod
	}
}

// add quarantines pod (and its input, in) after a failed cycle and
// returns the period it is held for.
func (q *quarantine) add(pod *v1.Pod, in [32]byte, why string) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.byInput[in]
	if e == nil {
		if len(q.byInput) >= maxQuarantined {
			q.evictOldestLocked()
		}
		e = &quarantined{input: in, pods: map[types.UID]*v1.Pod{}}
		q.byInput[in] = e
		q.held.Store(int32(len(q.byInput)))
	}
	e.keep(pod)
	q.byUID[pod.UID] = e
	e.failures++
	e.why = why
	e.period = min(max(2*e.period, quarantineBase), quarantineMax)
	e.until = q.now().Add(e.period)
	if e.timer != nil {
		e.timer.Stop()
	}
	if q.wake != nil {
		e.timer = time.AfterFunc(e.period, func() {
			q.mu.Lock()
			pods := make(map[string]*v1.Pod, len(e.pods))
			for _, p := range e.pods {
				pods[p.Namespace+"/"+p.Name] = p
			}
			q.mu.Unlock()
			q.wake(pods)
		})
	}
	return e.period
}

// release ends a pod's quarantine after a cycle in which the policy
// answered it: its input is fine now.
func (q *quarantine) release(pod *v1.Pod) {
	if q.held.Load() == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if e := q.byUID[pod.UID]; e != nil {
		q.dropLocked(e)
	}
}

// reset ends every quarantine: a new module version gets a fresh start.
func (q *quarantine) reset() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, e := range q.byInput {
		if e.timer != nil {
			e.timer.Stop()
		}
	}
	clear(q.byUID)
	clear(q.byInput)
	q.held.Store(0)
}

// size is how many inputs are quarantined (for the metric and explain).
func (q *quarantine) size() int { return int(q.held.Load()) }

func (q *quarantine) dropLocked(e *quarantined) {
	if e.timer != nil {
		e.timer.Stop()
	}
	for uid := range e.pods {
		if q.byUID[uid] == e {
			delete(q.byUID, uid)
		}
	}
	delete(q.byInput, e.input)
	q.held.Store(int32(len(q.byInput)))
}

func (q *quarantine) evictOldestLocked() {
	var oldest *quarantined
	for _, e := range q.byInput {
		if oldest == nil || e.until.Before(oldest.until) {
			oldest = e
		}
	}
	if oldest != nil {
		q.dropLocked(oldest)
	}
}
