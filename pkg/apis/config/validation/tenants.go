package validation

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/wasmsched/wasmsched/guest-sdk/abi/fields"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

// validateTenants checks policyObjects.tenants at path against the args'
// own bounds: a ceiling may be raised up to what an args policy may set,
// never past it. memoryBudget is the plugin's (0: none).
func validateTenants(path *field.Path, t *config.Tenants, memoryBudget int64, grants []config.ObjectGrant) field.ErrorList {
	var errs field.ErrorList
	if memoryBudget != 0 && (t.MemoryBudget < 0 || t.MemoryBudget > memoryBudget) {
		errs = append(errs, field.Invalid(path.Child("memoryBudget"), t.MemoryBudget, fmt.Sprintf("must be between 0 and memoryBudget (%d bytes), for example half of it (unset: half); the rest is kept for the args' policies and ClusterSchedulingPolicy objects", memoryBudget)))
	}
	errs = append(errs, validateTenantLimits(path.Child("default"), &t.Default, t.MemoryBudget, memoryBudget, grants)...)
	named := map[string]int{}
	for i := range t.Namespaces {
		ip := path.Child("namespaces").Index(i)
		n := &t.Namespaces[i]
		if len(n.Names) == 0 {
			errs = append(errs, field.Required(ip.Child("names"), "name the namespaces these limits apply to, for example [team-a]"))
		}
		for j, name := range n.Names {
			if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
				errs = append(errs, field.Invalid(ip.Child("names").Index(j), name, "must be a namespace name: "+strings.Join(msgs, "; ")))
			}
			if k, dup := named[name]; dup {
				errs = append(errs, field.Duplicate(ip.Child("names").Index(j), fmt.Sprintf("%s (also in namespaces[%d]): name each namespace in one entry", name, k)))
			}
			named[name] = i
		}
		errs = append(errs, validateTenantLimits(ip, &n.TenantLimits, t.MemoryBudget, memoryBudget, grants)...)
	}
	return errs
}

func validateTenantLimits(path *field.Path, l *config.TenantLimits, tenantsBudget, memoryBudget int64, grants []config.ObjectGrant) field.ErrorList {
	var errs field.ErrorList
	between := func(name string, v interface{}, ok bool, bounds string) {
		if !ok {
			errs = append(errs, field.Invalid(path.Child(name), v, "must be "+bounds))
		}
	}
	between("maxTimeout", l.MaxTimeout.String(), l.MaxTimeout > 0 && l.MaxTimeout <= MaxTimeout, "greater than 0 and at most 10s, for example 50ms (unset: 50ms)")
	between("maxCycleBudget", l.MaxCycleBudget.String(), l.MaxCycleBudget >= l.MaxTimeout && l.MaxCycleBudget <= MaxCycleBudget, fmt.Sprintf("at least maxTimeout (%s) and at most 1m, for example 100ms (unset: 100ms)", l.MaxTimeout))
	between("maxPermitWait", l.MaxPermitWait.String(), l.MaxPermitWait > 0 && l.MaxPermitWait <= MaxPermitWait, "greater than 0 and at most 15m, for example 1m (unset: 1m)")
	between("maxPreEnqueueTimeout", l.MaxPreEnqueueTimeout.String(), l.MaxPreEnqueueTimeout > 0 && l.MaxPreEnqueueTimeout <= MaxPreEnqueueTimeout, "greater than 0 and at most 1s, for example 10ms (unset: 10ms)")
	between("maxMemoryLimit", l.MaxMemoryLimit, l.MaxMemoryLimit >= MinMemoryLimit && l.MaxMemoryLimit <= MaxMemoryLimit, "between 64Ki and 4Gi, for example 16Mi (unset: 16Mi)")
	between("maxStackLimit", l.MaxStackLimit, l.MaxStackLimit >= MinStackLimit && l.MaxStackLimit <= MaxStackLimit, "between 64Ki and 8Mi, for example 256Ki (unset: 256Ki)")
	between("maxWeight", l.MaxWeight, l.MaxWeight >= 1 && l.MaxWeight <= MaxWeight, "between 1 and 100 (unset: 1)")
	between("maxPolicies", l.MaxPolicies, l.MaxPolicies >= 1 && l.MaxPolicies <= MaxPolicies, "between 1 and 1000, for example 8 (unset: 8); each policy costs memory and, in a cycle, up to its cycleBudget")
	between("schedulingTimePercent", l.SchedulingTimePercent, l.SchedulingTimePercent >= 1 && l.SchedulingTimePercent <= 100, "between 1 and 100, for example 5 (unset: 5); it is the namespace's share of the scheduler's time")
	between("preEnqueueTimePercent", l.PreEnqueueTimePercent, l.PreEnqueueTimePercent >= 1 && l.PreEnqueueTimePercent <= 100, "between 1 and 100, for example 1 (unset: 1); PreEnqueue runs with the scheduling queue locked, so keep it small")
	if memoryBudget != 0 && tenantsBudget != 0 {
		between("memoryBudget", l.MemoryBudget, l.MemoryBudget >= MinMemoryLimit && l.MemoryBudget <= tenantsBudget, fmt.Sprintf("between 64Ki and tenants.memoryBudget (%d bytes), for example 64Mi (unset: 64Mi)", tenantsBudget))
	}
	scopes := make([]string, len(fields.Scopes))
	for i, sc := range fields.Scopes {
		scopes[i] = string(sc)
	}
	for i, r := range l.Reads {
		if !slices.Contains(scopes, r) {
			errs = append(errs, field.NotSupported(path.Child("reads").Index(i), r, scopes))
		}
	}
	errs = append(errs, validatePatchPrefixes(path.Child("patchPrefixes"), l.PatchPrefixes)...)
	for i, o := range l.Objects {
		op := path.Child("objects").Index(i)
		if FindGrant(grants, o.APIVersion, o.Kind) == nil {
			errs = append(errs, field.Invalid(op, o.APIVersion+" "+o.Kind, fmt.Sprintf("not among the args' objects: grant the kind there first, as %s, then name it here", grantString(o.APIVersion, o.Kind, ""))))
		}
		errs = append(errs, validateNamespaces(op.Child("namespaces"), o.Namespaces)...)
	}
	return errs
}
