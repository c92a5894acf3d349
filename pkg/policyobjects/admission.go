package policyobjects

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
	policyv1alpha1 "github.com/wasmsched/wasmsched/pkg/apis/policy/v1alpha1"
)

// The scheduler checks a namespaced spec against its namespace's limits
// when it loads it, and says why in the object's status; a team learns it
// only after its kubectl apply succeeded. The ceilings and grants are plain
// comparisons of the spec with the args, so the apiserver can make them
// too, at create and update, when it is told the args' values: one
// ValidatingAdmissionPolicy per tenants entry, with those values written
// into its CEL, bound to the namespaces the entry names (the default's
// binding to every other namespace). The messages are checkTenant's. What
// needs the scheduler's state (maxPolicies, the shares, the memory pools)
// stays with the scheduler, and so does the check of every spec: an
// object admitted before the args changed is still refused in its status.

// namespaceNameLabel is the label the apiserver sets on every namespace to
// its name.
const namespaceNameLabel = "kubernetes.io/metadata.name"

// AdmissionPolicies returns the ValidatingAdmissionPolicies and their
// bindings that refuse a SchedulingPolicy over its namespace's ceilings or
// grants under tenants (defaulted args), in order: a policy, then its
// binding. name prefixes the objects' names; selector, when not nil,
// narrows the namespaces every binding applies to (for example to team
// namespaces). An update that leaves the spec as it was is admitted, so
// an object from before a ceiling was lowered can still be labelled or
// deleted.
func AdmissionPolicies(tenants *config.Tenants, name string, selector *metav1.LabelSelector) []any {
	if tenants == nil || tenants.Default.SchedulingTimePercent == 0 {
		tenants = builtinTenants
	}
	var objs []any
	var named []string
	for i := range tenants.Namespaces {
		e := &tenants.Namespaces[i]
		named = append(named, e.Names...)
		sel := narrow(selector, metav1.LabelSelectorRequirement{Key: namespaceNameLabel, Operator: metav1.LabelSelectorOpIn, Values: e.Names})
		objs = append(objs, admissionPair(fmt.Sprintf("%s-namespaces-%d", name, i), &e.TenantLimits, fmt.Sprintf("policyObjects.tenants.namespaces[%d]", i), sel)...)
	}
	var sel *metav1.LabelSelector
	if len(named) > 0 {
		sel = narrow(selector, metav1.LabelSelectorRequirement{Key: namespaceNameLabel, Operator: metav1.LabelSelectorOpNotIn, Values: named})
	} else {
		sel = narrow(selector)
	}
	return append(objs, admissionPair(name+"-default", &tenants.Default, "policyObjects.tenants.default", sel)...)
}

// narrow returns selector (copied; nil: every namespace) with reqs added.
func narrow(selector *metav1.LabelSelector, reqs ...metav1.LabelSelectorRequirement) *metav1.LabelSelector {
	s := &metav1.LabelSelector{}
	if selector != nil {
		s = selector.DeepCopy()
	}
	s.MatchExpressions = append(s.MatchExpressions, reqs...)
	return s
}

// admissionPair is the policy with l's checks and its binding.
func admissionPair(name string, l *config.TenantLimits, path string, sel *metav1.LabelSelector) []any {
	fail := admissionv1.Fail
	p := &admissionv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/part-of": "wasmsched"}},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{
				ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule: admissionv1.Rule{
						APIGroups:   []string{policyv1alpha1.SchemeGroupVersion.Group},
						APIVersions: []string{"*"},
						Resources:   []string{policyv1alpha1.SchedulingPoliciesResource.Resource},
					},
				}}},
			},
			MatchConditions: []admissionv1.MatchCondition{{
				Name:       "spec-set-or-changed",
				Expression: "request.operation == 'CREATE' || object.spec != oldObject.spec",
			}},
			Validations: tenantValidations(l, path),
		},
	}
	b := &admissionv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: p.Labels},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources:    &admissionv1.MatchResources{NamespaceSelector: sel},
		},
	}
	return []any{p, b}
}

// tenantValidations are checkTenant's checks of limits l (set at path) in
// CEL, each with checkTenant's message.
func tenantValidations(l *config.TenantLimits, path string) []admissionv1.Validation {
	const ns = `object.metadata.namespace`
	ask := func(setting, fix string) string {
		return fmt.Sprintf(`"; the scheduler's operators set it for namespace " + %s + " in the WasmPolicy args (%s.%s): %s"`, ns, path, setting, fix)
	}
	invalid, forbidden := metav1.StatusReasonInvalid, metav1.StatusReasonForbidden
	var vs []admissionv1.Validation
	ceiling := func(field, value, cmp, shown, setting string) {
		vs = append(vs, admissionv1.Validation{
			Expression: fmt.Sprintf("!has(object.spec.%s) || %s", field, cmp),
			Message:    fmt.Sprintf("spec.%s: over the ceiling of %s for namespaced policies (%s.%s in the WasmPolicy args)", field, shown, path, setting),
			MessageExpression: fmt.Sprintf(`"spec.%s: Invalid value: " + %s + ": over the ceiling of %s for namespaced policies" + %s`,
				field, value, shown, ask(setting, "lower the value, or ask them to raise it")),
			Reason: &invalid,
		})
	}
	duration := func(field string, d time.Duration, setting string) {
		ceiling(field, `"\"" + object.spec.`+field+` + "\""`, fmt.Sprintf("duration(object.spec.%s) <= duration(%s)", field, strconv.Quote(d.String())), d.String(), setting)
	}
	duration("timeout", l.MaxTimeout, "maxTimeout")
	duration("cycleBudget", l.MaxCycleBudget, "maxCycleBudget")
	duration("preEnqueueTimeout", l.MaxPreEnqueueTimeout, "maxPreEnqueueTimeout")
	duration("maxPermitWait", l.MaxPermitWait, "maxPermitWait")
	// An int-or-string: string() of either is the quantity as written.
	mem := quantity(l.MaxMemoryLimit)
	ceiling("memoryLimit", `"\"" + string(object.spec.memoryLimit) + "\""`,
		fmt.Sprintf("quantity(string(object.spec.memoryLimit)).compareTo(quantity(%s)) <= 0", strconv.Quote(mem)), mem, "maxMemoryLimit")
	stack := quantity(l.MaxStackLimit)
	ceiling("stackLimit", `"\"" + string(object.spec.stackLimit) + "\""`,
		fmt.Sprintf("quantity(string(object.spec.stackLimit)).compareTo(quantity(%s)) <= 0", strconv.Quote(stack)), stack, "maxStackLimit")
	ceiling("weight", "string(object.spec.weight)", fmt.Sprintf("object.spec.weight <= %d", l.MaxWeight), strconv.Itoa(int(l.MaxWeight)), "maxWeight")

	grant := func(field, what string, allowed bool, setting string) {
		if allowed {
			return
		}
		vs = append(vs, admissionv1.Validation{
			Expression:        fmt.Sprintf("!has(object.spec.%s) || !object.spec.%s", field, field),
			Message:           fmt.Sprintf("spec.%s: Forbidden: %s is not granted to namespaced policies (%s.%s in the WasmPolicy args)", field, what, path, setting),
			MessageExpression: fmt.Sprintf(`"spec.%s: Forbidden: %s is not granted to namespaced policies" + %s`, field, what, ask(setting, "remove it, or ask them to raise it")),
			Reason:            &forbidden,
		})
	}
	grant("realClock", "the real clock", l.AllowRealClock, "allowRealClock")
	grant("realRandom", "real randomness", l.AllowRealRandom, "allowRealRandom")

	// The lists name the first entry refused, by its index, as checkTenant
	// does first.
	list := func(field, ok, refusal string) {
		first := fmt.Sprintf("object.spec.%s.filter(x, !(%s))[0]", field, ok)
		vs = append(vs, admissionv1.Validation{
			Expression: fmt.Sprintf("!has(object.spec.%s) || object.spec.%s.all(x, %s)", field, field, ok),
			Message:    fmt.Sprintf("spec.%s: Forbidden: an entry is not granted to namespaced policies (%s.%s in the WasmPolicy args)", field, path, field),
			MessageExpression: fmt.Sprintf(`"spec.%s[" + string(object.spec.%s.indexOf(%s)) + "]: Forbidden: " + %s`,
				field, field, first, strings.ReplaceAll(refusal, "FIRST", first)),
			Reason: &forbidden,
		})
	}
	granted := func(l []string) string {
		if len(l) == 0 {
			return "none"
		}
		return strings.Join(l, ", ")
	}
	in := func(l []string, ok string) string {
		if len(l) == 0 {
			return "false" // nothing granted (and no list literal of unknown type)
		}
		return ok
	}
	list("reads", in(l.Reads, "x in "+celList(l.Reads)),
		fmt.Sprintf(`FIRST + " is not granted to namespace " + %s + " (granted: %s); remove it, or ask the scheduler's operators to add it to %s.reads in the WasmPolicy args"`, ns, granted(l.Reads), path))
	list("patchPrefixes", in(l.PatchPrefixes, celList(l.PatchPrefixes)+".exists(g, x.startsWith(g))"),
		fmt.Sprintf(`"\"" + FIRST + "\" does not start with a prefix granted to namespace " + %s + " (granted: %s); use one of them, or ask the scheduler's operators to add it to %s.patchPrefixes in the WasmPolicy args"`, ns, granted(l.PatchPrefixes), path))
	kinds := make([]string, len(l.Objects))
	for i, o := range l.Objects {
		kinds[i] = o.APIVersion + " " + o.Kind
	}
	list("objects", in(kinds, `(x.apiVersion + " " + x.kind) in `+celList(kinds)),
		fmt.Sprintf(`FIRST.apiVersion + " " + FIRST.kind + " is not granted to namespace " + %s + "; remove the read, or ask the scheduler's operators to add {apiVersion: " + FIRST.apiVersion + ", kind: " + FIRST.kind + "} to %s.objects in the WasmPolicy args"`, ns, path))
	return vs
}

// celList is a CEL list of string literals.
func celList(l []string) string {
	q := make([]string, len(l))
	for i, s := range l {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
