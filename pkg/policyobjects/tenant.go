package policyobjects

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
)

// A SchedulingPolicy belongs to a team the operator does not fully trust:
// what it may set, read and spend is what the scheduler's args grant its
// namespace (policyObjects.tenants), not what the CRD's schema allows. The
// ceilings are checked here, where the spec becomes a policy, so the
// object's status names the field, the ceiling and the setting that sets
// it. The apiserver cannot see the args; AdmissionPolicies gives it their
// values, so that it refuses the same specs at kubectl apply.

// tenantDefaults gives the settings a namespaced spec leaves unset the
// lesser of their default and the namespace's ceiling, so that a policy
// that asks for nothing special runs within its ceilings.
// It returns whether the cycle budget was derived here: a timeout over its
// ceiling then derives one over its ceiling too, which is not reported
// twice.
func tenantDefaults(s *configv1.PolicySettings, l *config.TenantLimits) (derivedBudget bool) {
	if s.Timeout == nil {
		s.Timeout = &metav1.Duration{Duration: min(configv1.DefaultTimeout, l.MaxTimeout)}
	}
	if s.CycleBudget == nil {
		// Never below the timeout, which the args' validation requires.
		s.CycleBudget = &metav1.Duration{Duration: min(configv1.DefaultCycleBudget(s.Timeout.Duration), max(l.MaxCycleBudget, s.Timeout.Duration))}
		derivedBudget = true
	}
	if s.PreEnqueueTimeout == nil {
		s.PreEnqueueTimeout = &metav1.Duration{Duration: min(host.PreEnqueueTimeout(s.Timeout.Duration, 0), l.MaxPreEnqueueTimeout)}
	}
	if s.MaxPermitWait == nil {
		s.MaxPermitWait = &metav1.Duration{Duration: min(configv1.DefaultMaxPermitWait, l.MaxPermitWait)}
	}
	if s.MemoryLimit == nil {
		s.MemoryLimit = resource.NewQuantity(min(int64(host.DefaultMemoryLimitBytes), l.MaxMemoryLimit), resource.BinarySI)
	}
	if s.StackLimit == nil {
		s.StackLimit = resource.NewQuantity(min(int64(host.DefaultStackLimitBytes), l.MaxStackLimit), resource.BinarySI)
	}
	if s.Weight == nil {
		w := min(configv1.DefaultWeight, l.MaxWeight)
		s.Weight = &w
	}
	return derivedBudget
}

// checkTenant refuses what p (a namespaced policy of ns, defaulted) sets
// beyond the limits l that the args set at path (for example
// "policyObjects.tenants.default"). The paths are the object's (spec.*).
func checkTenant(ns string, p *config.Policy, l *config.TenantLimits, path string, derivedBudget bool) field.ErrorList {
	var errs field.ErrorList
	sp := field.NewPath("spec")
	ask := func(setting string) string {
		return fmt.Sprintf("the scheduler's operators set it for namespace %s in the WasmPolicy args (%s.%s): lower the value, or ask them to raise it", ns, path, setting)
	}
	over := func(name string, v, ceiling interface{}, setting string) {
		errs = append(errs, field.Invalid(sp.Child(name), v, fmt.Sprintf("over the ceiling of %v for namespaced policies; %s", ceiling, ask(setting))))
	}
	if p.Timeout > l.MaxTimeout {
		over("timeout", p.Timeout.String(), l.MaxTimeout, "maxTimeout")
	}
	if p.CycleBudget > l.MaxCycleBudget && !(derivedBudget && p.Timeout > l.MaxTimeout) {
		over("cycleBudget", p.CycleBudget.String(), l.MaxCycleBudget, "maxCycleBudget")
	}
	if p.PreEnqueueTimeout > l.MaxPreEnqueueTimeout {
		over("preEnqueueTimeout", p.PreEnqueueTimeout.String(), l.MaxPreEnqueueTimeout, "maxPreEnqueueTimeout")
	}
	if p.MaxPermitWait > l.MaxPermitWait {
		over("maxPermitWait", p.MaxPermitWait.String(), l.MaxPermitWait, "maxPermitWait")
	}
	if p.MemoryLimit > l.MaxMemoryLimit {
		over("memoryLimit", quantity(p.MemoryLimit), quantity(l.MaxMemoryLimit), "maxMemoryLimit")
	}
	if p.StackLimit > l.MaxStackLimit {
		over("stackLimit", quantity(p.StackLimit), quantity(l.MaxStackLimit), "maxStackLimit")
	}
	if p.Weight > l.MaxWeight {
		over("weight", p.Weight, l.MaxWeight, "maxWeight")
	}
	forbidden := func(name, what, setting string) {
		errs = append(errs, field.Forbidden(sp.Child(name), fmt.Sprintf("%s is not granted to namespaced policies; %s", what, strings.Replace(ask(setting), "lower the value", "remove it", 1))))
	}
	if p.RealClock && !l.AllowRealClock {
		forbidden("realClock", "the real clock", "allowRealClock")
	}
	if p.RealRandom && !l.AllowRealRandom {
		forbidden("realRandom", "real randomness", "allowRealRandom")
	}
	granted := "none"
	if len(l.Reads) > 0 {
		granted = strings.Join(l.Reads, ", ")
	}
	for i, r := range p.Reads {
		if !slices.Contains(l.Reads, r) {
			errs = append(errs, field.Forbidden(sp.Child("reads").Index(i), fmt.Sprintf("%s is not granted to namespace %s (granted: %s); remove it, or ask the scheduler's operators to add it to %s.reads in the WasmPolicy args", r, ns, granted, path)))
		}
	}
	for i, o := range p.Objects {
		if !slices.ContainsFunc(l.Objects, func(g config.TenantObjectGrant) bool { return g.APIVersion == o.APIVersion && g.Kind == o.Kind }) {
			errs = append(errs, field.Forbidden(sp.Child("objects").Index(i), fmt.Sprintf("%s %s is not granted to namespace %s; remove the read, or ask the scheduler's operators to add {apiVersion: %s, kind: %s} to %s.objects in the WasmPolicy args", o.APIVersion, o.Kind, ns, o.APIVersion, o.Kind, path)))
		}
	}
	for i, pre := range p.PatchPrefixes {
		if !slices.ContainsFunc(l.PatchPrefixes, func(g string) bool { return strings.HasPrefix(pre, g) }) {
			allowed := "none"
			if len(l.PatchPrefixes) > 0 {
				allowed = strings.Join(l.PatchPrefixes, ", ")
			}
			errs = append(errs, field.Forbidden(sp.Child("patchPrefixes").Index(i), fmt.Sprintf("%q does not start with a prefix granted to namespace %s (granted: %s); use one of them, or ask the scheduler's operators to add it to %s.patchPrefixes in the WasmPolicy args", pre, ns, allowed, path)))
		}
	}
	return errs
}

func quantity(b int64) string { return resource.NewQuantity(b, resource.BinarySI).String() }

// builtinTenants are the limits of a scheduler whose args set none.
var builtinTenants = func() *config.Tenants {
	t := configv1.DefaultTenants(0)
	return &t
}()

// TenantLimitsFor returns namespace ns's limits under tenants, and the
// args' path that sets them: the built-in limits when tenants is nil or
// was not defaulted (args built in Go). The one reading of the tenants'
// limits, for the controller's checks and the plugin's shares alike.
func TenantLimitsFor(tenants *config.Tenants, ns string) (*config.TenantLimits, string) {
	if tenants == nil || tenants.Default.SchedulingTimePercent == 0 {
		tenants = builtinTenants
	}
	return tenants.For(ns)
}
