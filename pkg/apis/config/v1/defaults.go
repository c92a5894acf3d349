package v1

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmsched/wasmsched/host/defaults"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

// Defaults, documented in the README's args reference.
const (
	DefaultCompilationCacheDir         = "/var/cache/wasmsched"
	DefaultMaxInstancesPerPolicy int32 = defaults.MaxInstances
	DefaultFilePollInterval            = time.Second
	DefaultWeight                int32 = 1
	DefaultTimeout                     = 100 * time.Millisecond
	DefaultPreEnqueueTimeout           = defaults.PreEnqueueTimeout
	DefaultMemoryBudget                = "512Mi"
	DefaultFailurePolicy               = "Fail"
	DefaultMode                        = "Enforce"
	DefaultVerdictReuse                = "Enabled"
	// DefaultCycleBudgetFactor times the timeout is a policy's default cycle budget.
	DefaultCycleBudgetFactor          = 2
	DefaultFailureThreshold     int32 = 3
	DefaultBreakerBackoff             = time.Second
	DefaultBreakerMaxBackoff          = 5 * time.Minute
	DefaultStatusLeaseNamespace       = "kube-system"
	DefaultStatusLeaseName            = "wasmsched-policy-status"
	DefaultModuleCacheDir             = "/var/cache/wasmsched/oci"
	DefaultOCIPollInterval            = time.Minute
	DefaultOCIMaxSize                 = "32Mi"
	DefaultOCITimeout                 = 60 * time.Second

	// What a namespace's policies get until the operator grants more
	// (policyObjects.tenants): small enough that one team's valid but
	// slow or large policy costs the other teams little.
	DefaultTenantMaxTimeout           = 50 * time.Millisecond
	DefaultTenantMaxCycleBudget       = 100 * time.Millisecond
	DefaultTenantMaxPreEnqueueTimeout = 10 * time.Millisecond
	// DefaultMaxPermitWait bounds a policy's Permit wait, and a
	// namespace's policies' by default.
	DefaultMaxPermitWait                     = time.Minute
	DefaultTenantMaxMemoryLimit              = "16Mi"
	DefaultTenantMaxStackLimit               = "256Ki"
	DefaultTenantMaxWeight             int32 = 1
	DefaultTenantMaxPolicies           int32 = 8
	DefaultTenantSchedulingTimePercent int32 = 5
	DefaultTenantPreEnqueueTimePercent int32 = 1
	DefaultTenantMemoryBudget                = "64Mi"
)

// SetDefaults_WasmPolicyArgs fills unset fields with their defaults.
func SetDefaults_WasmPolicyArgs(obj *WasmPolicyArgs) { //nolint:revive // k8s naming convention for defaulters
	if obj.CompilationCacheDir == nil {
		v := DefaultCompilationCacheDir
		obj.CompilationCacheDir = &v
	}
	if obj.ModuleCacheDir == nil {
		v := DefaultModuleCacheDir
		obj.ModuleCacheDir = &v
	}
	if obj.MaxInstancesPerPolicy == nil {
		v := DefaultMaxInstancesPerPolicy
		obj.MaxInstancesPerPolicy = &v
	}
	if obj.MemoryBudget == nil {
		q := resource.MustParse(DefaultMemoryBudget)
		obj.MemoryBudget = &q
	}
	if obj.FilePollInterval == nil {
		obj.FilePollInterval = &metav1.Duration{Duration: DefaultFilePollInterval}
	}
	l := &obj.CompileLimits
	if l.MaxFunctions == nil {
		v := int64(defaults.MaxFunctions)
		l.MaxFunctions = &v
	}
	if l.MaxCodeBytes == nil {
		l.MaxCodeBytes = resource.NewQuantity(defaults.MaxCodeBytes, resource.BinarySI)
	}
	if l.MaxLocals == nil {
		v := int64(defaults.MaxLocals)
		l.MaxLocals = &v
	}
	if obj.RetiredGrace == nil {
		obj.RetiredGrace = &metav1.Duration{Duration: defaults.RetiredGrace}
	}
	if l := &obj.PolicyObjects.StatusLease; l.Namespace == "" {
		l.Namespace = DefaultStatusLeaseNamespace
	}
	if l := &obj.PolicyObjects.StatusLease; l.Name == "" {
		l.Name = DefaultStatusLeaseName
	}
	t := &obj.PolicyObjects.Tenants
	if t.MemoryBudget == nil {
		t.MemoryBudget = resource.NewQuantity(obj.MemoryBudget.Value()/2, resource.BinarySI)
	}
	SetDefaults_TenantLimits(&t.Default)
	for i := range t.Namespaces {
		SetDefaults_TenantLimits(&t.Namespaces[i].TenantLimits)
	}
	cb := &obj.CircuitBreaker
	if cb.FailureThreshold == nil {
		v := DefaultFailureThreshold
		cb.FailureThreshold = &v
	}
	if cb.Backoff == nil {
		cb.Backoff = &metav1.Duration{Duration: DefaultBreakerBackoff}
	}
	if cb.MaxBackoff == nil {
		cb.MaxBackoff = &metav1.Duration{Duration: DefaultBreakerMaxBackoff}
	}
}

// DefaultMemoryLimit is a policy's memoryLimit when it sets none: the
// engine's (defaults.MemoryLimitBytes), 64Mi.
var DefaultMemoryLimit = resource.NewQuantity(defaults.MemoryLimitBytes, resource.BinarySI).String()

// DefaultStackLimit is a policy's stackLimit when it sets none: the
// engine's (defaults.StackLimitBytes), 256Ki.
var DefaultStackLimit = resource.NewQuantity(defaults.StackLimitBytes, resource.BinarySI).String()

// DefaultCycleBudget is the cycleBudget of a policy with this timeout that
// sets none.
func DefaultCycleBudget(timeout time.Duration) time.Duration {
	return DefaultCycleBudgetFactor * timeout
}

// SetDefaults_PolicySettings fills a policy's unset settings, the args' and
// a policy object's alike: the generated SetObjectDefaults_WasmPolicyArgs
// calls it for every policy of the args, the policy-object controller for
// every object.
func SetDefaults_PolicySettings(p *PolicySettings) { //nolint:revive // k8s naming convention for defaulters
	if p.Weight == nil {
		v := DefaultWeight
		p.Weight = &v
	}
	if p.Timeout == nil {
		p.Timeout = &metav1.Duration{Duration: DefaultTimeout}
	}
	if p.CycleBudget == nil {
		p.CycleBudget = &metav1.Duration{Duration: DefaultCycleBudget(p.Timeout.Duration)}
	}
	if p.PreEnqueueTimeout == nil {
		p.PreEnqueueTimeout = &metav1.Duration{Duration: defaults.PreEnqueueTimeoutFor(p.Timeout.Duration, 0)}
	}
	if p.MaxPermitWait == nil {
		p.MaxPermitWait = &metav1.Duration{Duration: DefaultMaxPermitWait}
	}
	if p.MemoryLimit == nil {
		q := resource.MustParse(DefaultMemoryLimit)
		p.MemoryLimit = &q
	}
	if p.StackLimit == nil {
		q := resource.MustParse(DefaultStackLimit)
		p.StackLimit = &q
	}
	if p.FailurePolicy == nil {
		v := DefaultFailurePolicy
		p.FailurePolicy = &v
	}
	if p.Mode == nil {
		v := DefaultMode
		p.Mode = &v
	}
	if p.VerdictReuse == nil {
		v := DefaultVerdictReuse
		p.VerdictReuse = &v
	}
}

// SetDefaults_OCISource fills an oci source's unset fields.
func SetDefaults_OCISource(o *OCISource) { //nolint:revive // k8s naming convention for defaulters
	if o.PollInterval == nil {
		o.PollInterval = &metav1.Duration{Duration: DefaultOCIPollInterval}
	}
	if o.MaxSize == nil {
		q := resource.MustParse(DefaultOCIMaxSize)
		o.MaxSize = &q
	}
	if o.Timeout == nil {
		o.Timeout = &metav1.Duration{Duration: DefaultOCITimeout}
	}
}

// DefaultPolicy returns an internal policy config with every field at its
// default, named name and reading its module from source: the one way
// programs that build args in Go (the CLI, policytest, tests, benchmarks)
// get the same defaults as a KubeSchedulerConfiguration that omits them.
func DefaultPolicy(name string, source config.Source) config.Policy {
	in := Policy{Name: name}
	SetDefaults_PolicySettings(&in.PolicySettings)
	var out config.Policy
	if err := Convert_v1_Policy_To_config_Policy(&in, &out, nil); err != nil {
		panic(err) // defaulted fields always convert
	}
	out.Source = source
	// Derived defaults stay unset (0), so that they follow the fields they
	// derive from when the caller changes those: a cycle budget of twice
	// whatever Timeout the caller sets, a preEnqueue timeout of the
	// default or that Timeout, whichever is shorter.
	out.CycleBudget = 0
	out.PreEnqueueTimeout = 0
	return out
}

// DefaultArgs returns internal plugin args with every field at its default
// and the given policies.
func DefaultArgs(policies ...config.Policy) *config.WasmPolicyArgs {
	in := &WasmPolicyArgs{}
	SetObjectDefaults_WasmPolicyArgs(in)
	out := &config.WasmPolicyArgs{}
	if err := Convert_v1_WasmPolicyArgs_To_config_WasmPolicyArgs(in, out, nil); err != nil {
		panic(err)
	}
	out.Policies = policies
	return out
}

// SetDefaults_TenantLimits fills a namespace's unset limits with the
// built-in ones: no reads, 50ms calls, 100ms per cycle, 10ms gates, 16Mi
// instances, weight 1, a twentieth of the scheduling time, a hundredth of
// it in gates, 64Mi of memory.
func SetDefaults_TenantLimits(l *TenantLimits) { //nolint:revive // k8s naming convention for defaulters
	if l.MaxTimeout == nil {
		l.MaxTimeout = &metav1.Duration{Duration: DefaultTenantMaxTimeout}
	}
	if l.MaxCycleBudget == nil {
		l.MaxCycleBudget = &metav1.Duration{Duration: DefaultTenantMaxCycleBudget}
	}
	if l.MaxPermitWait == nil {
		l.MaxPermitWait = &metav1.Duration{Duration: DefaultMaxPermitWait}
	}
	if l.MaxPreEnqueueTimeout == nil {
		l.MaxPreEnqueueTimeout = &metav1.Duration{Duration: DefaultTenantMaxPreEnqueueTimeout}
	}
	if l.MaxMemoryLimit == nil {
		q := resource.MustParse(DefaultTenantMaxMemoryLimit)
		l.MaxMemoryLimit = &q
	}
	if l.MaxStackLimit == nil {
		q := resource.MustParse(DefaultTenantMaxStackLimit)
		l.MaxStackLimit = &q
	}
	if l.MaxWeight == nil {
		v := DefaultTenantMaxWeight
		l.MaxWeight = &v
	}
	if l.MaxPolicies == nil {
		v := DefaultTenantMaxPolicies
		l.MaxPolicies = &v
	}
	if l.AllowRealClock == nil {
		v := false
		l.AllowRealClock = &v
	}
	if l.AllowRealRandom == nil {
		v := false
		l.AllowRealRandom = &v
	}
	if l.SchedulingTimePercent == nil {
		v := DefaultTenantSchedulingTimePercent
		l.SchedulingTimePercent = &v
	}
	if l.PreEnqueueTimePercent == nil {
		v := DefaultTenantPreEnqueueTimePercent
		l.PreEnqueueTimePercent = &v
	}
	if l.MemoryBudget == nil {
		q := resource.MustParse(DefaultTenantMemoryBudget)
		l.MemoryBudget = &q
	}
}

// DefaultTenants returns the internal tenant limits with every field at
// its default, for a plugin memory budget of memoryBudget bytes.
func DefaultTenants(memoryBudget int64) config.Tenants {
	in := Tenants{MemoryBudget: resource.NewQuantity(memoryBudget/2, resource.BinarySI)}
	SetDefaults_TenantLimits(&in.Default)
	var out config.Tenants
	if err := Convert_v1_Tenants_To_config_Tenants(&in, &out, nil); err != nil {
		panic(err)
	}
	return out
}
