package wasmpolicy

import (
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/wasmsched/wasmsched/host"
)

const subsystem = "wasmsched"

// Metrics are exposed on the scheduler's /metrics. docs/metrics.md lists them.
var (
	rejections = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      subsystem,
		Name:           "policy_rejections_total",
		Help:           "Nodes (Filter) or pods (PreFilter) a policy rejected, by policy and extension point.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy", "extension_point"})
	callErrors = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      subsystem,
		Name:           "policy_call_errors_total",
		Help:           "Policy calls that failed (timeout, trap, exit, unavailable); the instance is discarded.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy", "extension_point", "outcome"})
	ignored = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      subsystem,
		Name:           "policy_ignored_failures_total",
		Help:           "Failed policy calls skipped because the policy's failurePolicy is Ignore.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy", "extension_point"})
	loads = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      subsystem,
		Name:           "policy_module_loads_total",
		Help:           "Module loads and reloads by result (Success or the reason of the failure).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy", "result"})
	loadDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      subsystem,
		Name:           "policy_module_load_duration_seconds",
		Help:           "Time to decode, compile, validate and initialize a module version.",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 15),
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy", "result"})
	moduleInfo = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      subsystem,
		Name:           "policy_module_info",
		Help:           "1 for the module version (sha256) each policy is serving.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy", "sha256"})

	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(rejections, callErrors, ignored, loads, loadDuration, moduleInfo)
	})
}

// policyMetrics holds a policy's pre-resolved counters, so the hot path
// never looks up label values.
type policyMetrics struct {
	name     string
	rejected [host.CallNormalizeScore + 1]metrics.CounterMetric
	ignored  [host.CallNormalizeScore + 1]metrics.CounterMetric
}

func newPolicyMetrics(name string) *policyMetrics {
	m := &policyMetrics{name: name}
	for k := host.CallPreFilter; k <= host.CallNormalizeScore; k++ {
		m.rejected[k] = rejections.WithLabelValues(name, k.String())
		m.ignored[k] = ignored.WithLabelValues(name, k.String())
	}
	return m
}

func (m *policyMetrics) countRejection(k host.CallKind) { m.rejected[k].Inc() }

func (m *policyMetrics) callError(k host.CallKind, o host.Outcome) {
	callErrors.WithLabelValues(m.name, k.String(), o.String()).Inc()
}

func (m *policyMetrics) ignoredCall(k host.CallKind) { m.ignored[k].Inc() }

func (m *policyMetrics) load(result string, d time.Duration) {
	loads.WithLabelValues(m.name, result).Inc()
	if d > 0 {
		loadDuration.WithLabelValues(m.name, result).Observe(d.Seconds())
	}
}

func (m *policyMetrics) setActive(sha, previous string) {
	if previous != "" && previous != "none" {
		moduleInfo.DeleteLabelValues(m.name, previous)
	}
	moduleInfo.WithLabelValues(m.name, sha).Set(1)
}
