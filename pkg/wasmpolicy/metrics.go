package wasmpolicy

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host"
)

const subsystem = "wasmsched"

// Results of one policy evaluation, the values of the "result" label.
// The first five are the status the guest returned; the others say how a
// failed call ended.
const (
	ResultSuccess                      = "Success"
	ResultUnschedulable                = "Unschedulable"
	ResultUnschedulableAndUnresolvable = "UnschedulableAndUnresolvable"
	ResultSkip                         = "Skip"
	ResultError                        = "Error"
	ResultTimeout                      = "Timeout"
	ResultTrap                         = "Trap"
	ResultExit                         = "Exit"
	ResultUnavailable                  = "Unavailable"
	// ResultBudgetExceeded: the call ran until the policy's cycle budget was spent.
	ResultBudgetExceeded = "BudgetExceeded"
	// ResultNotCalled: the policy was not called (or its call was
	// interrupted) because the cycle had stopped it: an earlier failed call
	// or its open circuit breaker.
	ResultNotCalled = "NotCalled"
)

// The reasons of wasmsched_policy_stopped_cycles_total besides the call
// results: a cycle that never called the policy.
const (
	reasonBreakerOpen = "BreakerOpen"
	// reasonQuarantined: the pod was quarantined (quarantine.go).
	reasonQuarantined = "Quarantined"
)

var results = []string{ResultSuccess, ResultUnschedulable, ResultUnschedulableAndUnresolvable, ResultSkip, ResultError, ResultTimeout, ResultTrap, ResultExit, ResultUnavailable, ResultBudgetExceeded, ResultNotCalled}

const (
	rSuccess = iota
	rUnschedulable
	rUnresolvable
	rSkip
	rError
	rTimeout
	rTrap
	rExit
	rUnavailable
	rBudgetExceeded
	rNotCalled
	numResults
)

// resultOf maps a guest status code (already validated by the host) to its
// result index.
func resultOf(code int32) int {
	switch code {
	case abi.CodeSuccess:
		return rSuccess
	case abi.CodeUnschedulable:
		return rUnschedulable
	case abi.CodeUnschedulableAndUnresolvable:
		return rUnresolvable
	case abi.CodeSkip:
		return rSkip
	}
	return rError
}

// resultOfOutcome maps how a failed call ended to its result index.
func resultOfOutcome(o host.Outcome) int {
	switch o {
	case host.OutcomeTimeout:
		return rTimeout
	case host.OutcomeTrap:
		return rTrap
	case host.OutcomeExit:
		return rExit
	case host.OutcomeBudget:
		return rBudgetExceeded
	case host.OutcomeStopped:
		return rNotCalled
	}
	return rUnavailable
}

// Metrics are exposed on the scheduler's /metrics. docs/metrics.md lists them.
var (
	tenantSeconds = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      subsystem,
		Name:           "tenant_policy_seconds_total",
		Help:           "Wall time a namespace's policies (its SchedulingPolicy objects) took, charged to its share: point Cycle (scheduling cycles and PreBind) or PreEnqueue.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"namespace", "point"})
	tenantShareRatio = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      subsystem,
		Name:           "tenant_share_ratio",
		Help:           "A namespace's share of the scheduler's time (policyObjects.tenants), by point: Cycle or PreEnqueue.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"namespace", "point"})
	tenantWaits = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      subsystem,
		Name:           "tenant_share_waits_total",
		Help:           "Times a pod waited because its namespace's policies had used their share, by point where it was held: Cycle (PreFilter) or PreEnqueue.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"namespace", "point"})
	podPatches = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      subsystem,
		Name:           "pod_patches_total",
		Help:           "PreBind patches of pods (one request per pod, with the labels and annotations every policy's prebind wrote) by result: Success or Failed.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	patchDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      subsystem,
		Name:           "pod_patch_duration_seconds",
		Help:           "Time to apply a PreBind patch to a pod, retries included.",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 14),
		StabilityLevel: metrics.ALPHA,
	})
	evaluations = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      subsystem,
		Name:           "policy_evaluations_total",
		Help:           "Policy evaluations (one per node for Filter and Score, one per cycle otherwise) by extension point and result: the guest's status, or Timeout, Trap, Exit, BudgetExceeded, Unavailable for failed calls, NotCalled when the cycle had stopped the policy.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy", "extension_point", "result"})
	callDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      subsystem,
		Name:           "policy_call_duration_seconds",
		Help:           "Duration of guest calls by extension point. A batched Filter or Score call covers up to 32 nodes and is observed once.",
		Buckets:        metrics.ExponentialBuckets(1e-6, 4, 12),
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy", "extension_point"})
	ignored = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      subsystem,
		Name:           "policy_ignored_failures_total",
		Help:           "Failed policy evaluations skipped because the policy's failurePolicy is Ignore or its mode is Audit.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy", "extension_point"})
	auditVerdicts = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      subsystem,
		Name:           "policy_audit_verdicts_total",
		Help:           "Verdicts of policies in Audit mode that were not enforced: rejections (Filter, PreFilter) and failures that would have failed the pod.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy", "extension_point", "result"})
	canaryCycles = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      subsystem,
		Name:           "canary_cycles_total",
		Help:           "Scheduling cycles a policy object's canary judged beside its enforcing version, by whether their verdicts were the same or changed on some node.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy", "verdict"})
	canaryFindings = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      subsystem,
		Name:           "canary_findings_total",
		Help:           "What a canary found: rejected_running (a pod bound to a node the canary rejects), unblocked (a pod with no node that the canary would have admitted somewhere).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy", "finding"})
	canaryTransitions = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      subsystem,
		Name:           "canary_transitions_total",
		Help:           "Canary transitions of policy objects: started, promoted, dropped.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy", "phase"})
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
	deadlineOverrun = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      subsystem,
		Name:           "policy_deadline_overrun_seconds",
		Help:           "For guest calls that ran into their deadline (timeout or cycle budget): how long after the deadline they returned.",
		Buckets:        metrics.ExponentialBuckets(0.0005, 2, 12),
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy"})
	stoppedCycles = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      subsystem,
		Name:           "policy_stopped_cycles_total",
		Help:           "Scheduling cycles in which a policy was stopped, by reason: the first failed call (Timeout, Trap, Exit, BudgetExceeded), Quarantined when the pod's quarantine kept the policy from being called for it, or BreakerOpen when its circuit breaker did. Each such cycle costs the scheduler up to the policy's cycleBudget (nothing when Quarantined or BreakerOpen).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy", "reason"})
	breakerStates = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      subsystem,
		Name:           "policy_circuit_breaker_state",
		Help:           "1 for the state (closed, open, half-open) each policy's circuit breaker is in, 0 for the others.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy", "state"})
	quarantinedInputs = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      subsystem,
		Name:           "policy_quarantined_inputs",
		Help:           "Distinct pod inputs (namespace, labels, annotations and spec) each policy has failed on and holds in quarantine: their pods get the failurePolicy without a call until the quarantine ends.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy"})
	moduleInfo = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      subsystem,
		Name:           "policy_module_info",
		Help:           "1 for the module version (sha256) each policy is serving.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy", "sha256"})
	sourceInfo = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      subsystem,
		Name:           "policy_source_info",
		Help:           "1 for the OCI manifest digest each policy with an oci source last loaded: the digest a followed tag resolved to, or the pinned one.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy", "source", "digest"})

	instancesDesc = metrics.NewDesc("wasmsched_policy_instances",
		"Instances of each policy's serving module version, by state (idle or in_use).",
		[]string{"policy", "state"}, nil, metrics.ALPHA, "")
	poolSizeDesc = metrics.NewDesc("wasmsched_policy_pool_size",
		"The most instances a policy may have (maxInstancesPerPolicy).",
		[]string{"policy"}, nil, metrics.ALPHA, "")
	suppressedDesc = metrics.NewDesc("wasmsched_policy_output_lines_suppressed_total",
		"Lines of a policy's output (stdout, stderr and log calls) dropped by its output rate limit.",
		[]string{"policy"}, nil, metrics.ALPHA, "")
	memoryPagesDesc = metrics.NewDesc("wasmsched_policy_memory_pages",
		"Wasm linear memory (64 KiB pages) held by a policy's live instances.",
		[]string{"policy"}, nil, metrics.ALPHA, "")

	policyMemoryDesc = metrics.NewDesc("wasmsched_policy_memory_bytes",
		"What a policy is charged in the memory budget: its instances' host heap and linear memory, and its share of the compiled module it uses (shared modules are divided among their policies).",
		[]string{"policy"}, nil, metrics.ALPHA, "")
	memoryBudgetDesc = metrics.NewDesc("wasmsched_memory_budget_bytes",
		"The memory budget of all policies together (memoryBudget; 0: none).",
		nil, nil, metrics.ALPHA, "")
	memoryUsedDesc = metrics.NewDesc("wasmsched_memory_used_bytes",
		"Memory charged to the budget, by part: modules (compiled code and its host heap), instances (host heap and linear memory) and verdicts (remembered verdicts and the pod templates met).",
		[]string{"part"}, nil, metrics.ALPHA, "")
	evictionsDesc = metrics.NewDesc("wasmsched_memory_evicted_instances_total",
		"Idle instances closed to make room in the memory budget for another policy's call.",
		nil, nil, metrics.ALPHA, "")
	overBudgetDesc = metrics.NewDesc("wasmsched_memory_over_budget_instances_total",
		"Instances created while the memory budget was full and no idle instance was left to close.",
		nil, nil, metrics.ALPHA, "")
	reservedDesc = metrics.NewDesc("wasmsched_memory_reserved_bytes",
		"Memory budget kept free for the guest calls that may start now (one instance of the largest policy for each running slot without one) and for the call stacks of the calls that may run at once (three of the largest stackLimit each): a policy's growth cannot take it.",
		nil, nil, metrics.ALPHA, "")
	refusedGrowthDesc = metrics.NewDesc("wasmsched_memory_refused_growth_total",
		"memory.grow calls refused because the memory budget (or the namespace's share of it) could not hold them; the guest sees its own out-of-memory.",
		nil, nil, metrics.ALPHA, "")
	rowsDesc = metrics.NewDesc("wasmsched_policy_rows_total",
		"Batch nodes by how the policy answered them: evaluated (a row the guest evaluated), shared (the verdict of an equal row of the same batch) or remembered (a verdict of an earlier cycle for the same pod template, cycle state and row), docs/abi.md §3.4.",
		[]string{"policy", "result"}, nil, metrics.ALPHA, "")
	policiesDesc = metrics.NewDesc("wasmsched_policies",
		"Policies by load state: loading (first module not loaded yet), serving, or failed (first load failed; the failurePolicy applies).",
		[]string{"state"}, nil, metrics.ALPHA, "")

	registerOnce sync.Once

	// live is every running plugin, for the pool collector.
	liveMu sync.Mutex
	live   = map[*WasmPolicy]struct{}{}
)

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(evaluations, callDuration, ignored, auditVerdicts, canaryCycles, canaryFindings, canaryTransitions, loads, loadDuration, moduleInfo, sourceInfo, stoppedCycles, breakerStates, quarantinedInputs, deadlineOverrun, podPatches, patchDuration, tenantSeconds, tenantShareRatio, tenantWaits)
		legacyregistry.CustomMustRegister(&poolCollector{})
	})
}

// poolCollector reports pool and memory gauges when /metrics is scraped, so
// the scheduling path never updates them.
type poolCollector struct {
	metrics.BaseStableCollector
}

func (c *poolCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- instancesDesc
	ch <- poolSizeDesc
	ch <- memoryPagesDesc
	ch <- suppressedDesc
	ch <- policyMemoryDesc
	ch <- memoryBudgetDesc
	ch <- memoryUsedDesc
	ch <- evictionsDesc
	ch <- overBudgetDesc
	ch <- reservedDesc
	ch <- refusedGrowthDesc
	ch <- policiesDesc
	ch <- rowsDesc
}

func (c *poolCollector) CollectWithStability(ch chan<- metrics.Metric) {
	type stats struct{ idle, inUse, size, pages, suppressed, share, evaluated, shared, remembered int64 }
	by := map[string]*stats{}
	var mem host.MemoryUse
	var progress LoadProgress
	liveMu.Lock()
	for w := range live {
		if w.engine != nil {
			u := w.engine.MemoryBudget()
			mem.Budget += u.Budget
			mem.Modules += u.Modules
			mem.Instances += u.Instances
			mem.Evictions += u.Evictions
			mem.OverBudget += u.OverBudget
			mem.Reserved += u.Reserved
			mem.RefusedGrowth += u.RefusedGrowth
			mem.Verdicts += u.Verdicts
		}
		lp := w.LoadProgress()
		progress.Loading += lp.Loading
		progress.Serving += lp.Serving
		progress.Failed += lp.Failed
		for _, p := range w.current().all {
			s := by[p.cfg.Name]
			if s == nil {
				s = &stats{}
				by[p.cfg.Name] = s
			}
			s.size += int64(w.maxInstances)
			s.suppressed += p.runtime.SuppressedLines()
			ev, sh, re := p.runtime.RowStats()
			s.evaluated += ev
			s.shared += sh
			s.remembered += re
			if v := p.runtime.Current(); v != nil {
				n, inUse := v.PoolStats()
				s.idle += n - inUse
				s.inUse += inUse
				s.pages += v.MemoryBytes() / 65536
				s.share += v.MemoryShare()
			}
		}
	}
	liveMu.Unlock()
	for name, s := range by {
		ch <- metrics.NewLazyConstMetric(instancesDesc, metrics.GaugeValue, float64(s.idle), name, "idle")
		ch <- metrics.NewLazyConstMetric(instancesDesc, metrics.GaugeValue, float64(s.inUse), name, "in_use")
		ch <- metrics.NewLazyConstMetric(poolSizeDesc, metrics.GaugeValue, float64(s.size), name)
		ch <- metrics.NewLazyConstMetric(memoryPagesDesc, metrics.GaugeValue, float64(s.pages), name)
		ch <- metrics.NewLazyConstMetric(suppressedDesc, metrics.CounterValue, float64(s.suppressed), name)
		ch <- metrics.NewLazyConstMetric(policyMemoryDesc, metrics.GaugeValue, float64(s.share), name)
		ch <- metrics.NewLazyConstMetric(rowsDesc, metrics.CounterValue, float64(s.evaluated), name, "evaluated")
		ch <- metrics.NewLazyConstMetric(rowsDesc, metrics.CounterValue, float64(s.shared), name, "shared")
		ch <- metrics.NewLazyConstMetric(rowsDesc, metrics.CounterValue, float64(s.remembered), name, "remembered")
	}
	ch <- metrics.NewLazyConstMetric(memoryBudgetDesc, metrics.GaugeValue, float64(mem.Budget))
	ch <- metrics.NewLazyConstMetric(memoryUsedDesc, metrics.GaugeValue, float64(mem.Modules), "modules")
	ch <- metrics.NewLazyConstMetric(memoryUsedDesc, metrics.GaugeValue, float64(mem.Instances), "instances")
	ch <- metrics.NewLazyConstMetric(memoryUsedDesc, metrics.GaugeValue, float64(mem.Verdicts), "verdicts")
	ch <- metrics.NewLazyConstMetric(evictionsDesc, metrics.CounterValue, float64(mem.Evictions))
	ch <- metrics.NewLazyConstMetric(overBudgetDesc, metrics.CounterValue, float64(mem.OverBudget))
	ch <- metrics.NewLazyConstMetric(reservedDesc, metrics.GaugeValue, float64(mem.Reserved))
	ch <- metrics.NewLazyConstMetric(refusedGrowthDesc, metrics.CounterValue, float64(mem.RefusedGrowth))
	ch <- metrics.NewLazyConstMetric(policiesDesc, metrics.GaugeValue, float64(progress.Loading), "loading")
	ch <- metrics.NewLazyConstMetric(policiesDesc, metrics.GaugeValue, float64(progress.Serving), "serving")
	ch <- metrics.NewLazyConstMetric(policiesDesc, metrics.GaugeValue, float64(progress.Failed), "failed")
}
