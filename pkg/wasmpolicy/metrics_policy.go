package wasmpolicy

import (
	"sync"
	"time"

	"k8s.io/component-base/metrics"

	"github.com/wasmsched/wasmsched/host"
)

// policyMetrics holds a policy's pre-resolved series, so the hot path never
// looks up label values.
type policyMetrics struct {
	name string
	// used holds the label values of the series created on demand (load
	// results, audit verdicts, stop reasons), so forget can delete them.
	usedMu sync.Mutex
	used   map[usedSeries]struct{}

	eval     [host.NumCallKinds][numResults]metrics.CounterMetric
	duration [host.NumCallKinds]metrics.ObserverMetric
	ignored  [host.NumCallKinds]metrics.CounterMetric
	overrun  metrics.ObserverMetric

	// sourceSeries holds the labels of the sourceInfo series, under usedMu.
	sourceSeries map[string]string
}

// setSourceDigest points sourceInfo at the digest an oci source loaded.
func (m *policyMetrics) setSourceDigest(src, digest string) {
	m.usedMu.Lock()
	defer m.usedMu.Unlock()
	if old, ok := m.sourceSeries["digest"]; ok {
		if old == digest {
			return
		}
		sourceInfo.DeleteLabelValues(m.name, m.sourceSeries["source"], old)
	}
	m.sourceSeries = map[string]string{"source": src, "digest": digest}
	sourceInfo.WithLabelValues(m.name, src, digest).Set(1)
}

func newPolicyMetrics(name string) *policyMetrics {
	m := &policyMetrics{name: name, overrun: deadlineOverrun.WithLabelValues(name)}
	// One row per call kind; a batch form shares the series of the point it
	// batches (its String is that point's name), so no kind can index past
	// the arrays and no label value is added by a batch form.
	for k := host.CallKind(0); k < host.NumCallKinds; k++ {
		for r, label := range results {
			m.eval[k][r] = evaluations.WithLabelValues(name, k.String(), label)
		}
		m.duration[k] = callDuration.WithLabelValues(name, k.String())
		m.ignored[k] = ignored.WithLabelValues(name, k.String())
	}
	return m
}

func (m *policyMetrics) evaluated(k host.CallKind, result int) { m.eval[k][result].Inc() }

func (m *policyMetrics) observe(k host.CallKind, since time.Time) {
	m.duration[k].Observe(time.Since(since).Seconds())
}

func (m *policyMetrics) ignoredCall(k host.CallKind) { m.ignored[k].Inc() }

// usedSeries names an on-demand series of a policy: which vector, and
// its label values after the policy's name.
type usedSeries struct {
	vec  string
	a, b string
}

func (m *policyMetrics) use(vec, a, b string) {
	m.usedMu.Lock()
	if m.used == nil {
		m.used = map[usedSeries]struct{}{}
	}
	m.used[usedSeries{vec, a, b}] = struct{}{}
	m.usedMu.Unlock()
}

func (m *policyMetrics) audited(k host.CallKind, result string) {
	m.use("audit", k.String(), result)
	auditVerdicts.WithLabelValues(m.name, k.String(), result).Inc()
}

func (m *policyMetrics) load(result string, d time.Duration) {
	m.use("load", result, "")
	loads.WithLabelValues(m.name, result).Inc()
	if d > 0 {
		m.use("loadDuration", result, "")
		loadDuration.WithLabelValues(m.name, result).Observe(d.Seconds())
	}
}

func (m *policyMetrics) stoppedCycle(reason string) {
	m.use("stopped", reason, "")
	stoppedCycles.WithLabelValues(m.name, reason).Inc()
}

// setBreaker sets the breaker gauge: 1 for state, 0 for the others.
func (m *policyMetrics) setQuarantined(n int) {
	quarantinedInputs.WithLabelValues(m.name).Set(float64(n))
}

func (m *policyMetrics) setBreaker(state breakerState) {
	for s := breakerClosed; s <= breakerHalfOpen; s++ {
		v := 0.0
		if s == state {
			v = 1
		}
		breakerStates.WithLabelValues(m.name, s.String()).Set(v)
	}
}

func (m *policyMetrics) setActive(sha, previous string) {
	if previous != "" && previous != "none" {
		moduleInfo.DeleteLabelValues(m.name, previous)
	}
	moduleInfo.WithLabelValues(m.name, sha).Set(1)
}

// forget deletes the policy's series: its object was deleted, and a
// policy that no longer exists must not keep reporting.
func (m *policyMetrics) forget(activeSHA string) {
	for k := host.CallKind(0); k < host.NumCallKinds; k++ {
		for _, label := range results {
			evaluations.Delete(map[string]string{"policy": m.name, "extension_point": k.String(), "result": label})
		}
		callDuration.Delete(map[string]string{"policy": m.name, "extension_point": k.String()})
		ignored.Delete(map[string]string{"policy": m.name, "extension_point": k.String()})
	}
	deadlineOverrun.Delete(map[string]string{"policy": m.name})
	quarantinedInputs.Delete(map[string]string{"policy": m.name})
	for s := breakerClosed; s <= breakerHalfOpen; s++ {
		breakerStates.Delete(map[string]string{"policy": m.name, "state": s.String()})
	}
	if activeSHA != "" {
		moduleInfo.DeleteLabelValues(m.name, activeSHA)
	}
	m.usedMu.Lock()
	defer m.usedMu.Unlock()
	if d, ok := m.sourceSeries["digest"]; ok {
		sourceInfo.DeleteLabelValues(m.name, m.sourceSeries["source"], d)
		m.sourceSeries = nil
	}
	for u := range m.used {
		switch u.vec {
		case "audit":
			auditVerdicts.Delete(map[string]string{"policy": m.name, "extension_point": u.a, "result": u.b})
		case "load":
			loads.Delete(map[string]string{"policy": m.name, "result": u.a})
		case "loadDuration":
			loadDuration.Delete(map[string]string{"policy": m.name, "result": u.a})
		case "stopped":
			stoppedCycles.Delete(map[string]string{"policy": m.name, "reason": u.a})
		}
	}
	m.used = nil
}
