package policyobjects

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
	"github.com/wasmsched/wasmsched/pkg/apis/config/validation"
	policyv1alpha1 "github.com/wasmsched/wasmsched/pkg/apis/policy/v1alpha1"
)

// policyOf turns the object into the policy config the plugin runs, or
// says why it cannot: the checks the apiserver cannot make (the module's
// namespace, a name the args already use, the args' validation, selectors
// included, and for a namespaced policy the limits tenants grant its
// namespace).
func policyOf(k key, u *unstructured.Unstructured, hasArgsPolicy func(name string) bool, tenants *config.Tenants, grants []config.ObjectGrant) (config.Policy, string) {
	var src policyv1alpha1.Source
	var settings configv1.PolicySettings
	var sc policyv1alpha1.PolicyScope
	var nsSel *policyv1alpha1.LabelSelector
	if k.namespace == "" {
		var p policyv1alpha1.ClusterSchedulingPolicy
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
			return config.Policy{}, "spec: " + err.Error()
		}
		src, settings, sc, nsSel = p.Spec.Source, p.Spec.PolicySettings, p.Spec.PolicyScope, p.Spec.NamespaceSelector
	} else {
		var p policyv1alpha1.SchedulingPolicy
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
			return config.Policy{}, "spec: " + err.Error()
		}
		src, settings, sc = p.Spec.Source, p.Spec.PolicySettings, p.Spec.PolicyScope
		if src.File != "" {
			return config.Policy{}, "spec.source.file: a SchedulingPolicy takes its module from a ConfigMap in its own namespace; use source.configMap"
		}
		if cm := src.ConfigMap; cm != nil {
			if cm.Namespace != "" && cm.Namespace != k.namespace {
				return config.Policy{}, fmt.Sprintf("spec.source.configMap.namespace: Forbidden: %q is not the policy's namespace; a SchedulingPolicy may take its module only from a ConfigMap in %s (copy the ConfigMap there, or ask the cluster's operators for a ClusterSchedulingPolicy)", cm.Namespace, k.namespace)
			}
		}
		if o := src.OCI; o != nil && o.Insecure {
			return config.Policy{}, "spec.source.oci.insecure: Forbidden: a SchedulingPolicy may not turn TLS off; a cluster's operators may, in a ClusterSchedulingPolicy"
		}
		if o := src.OCI; o != nil && o.PullSecret != nil && o.PullSecret.Namespace != "" && o.PullSecret.Namespace != k.namespace {
			return config.Policy{}, fmt.Sprintf("spec.source.oci.pullSecret.namespace: Forbidden: %q is not the policy's namespace; a SchedulingPolicy may use only a pull secret in %s", o.PullSecret.Namespace, k.namespace)
		}
	}
	// The object's settings are the args' type: defaulted, converted and
	// validated by the same code as a policy of the args.
	in := configv1.Policy{
		Name: k.policyName(), PolicySettings: *settings.DeepCopy(),
		Scope: configv1.Scope{NamespaceSelector: nsSel.AsMeta(), PodSelector: sc.PodSelector.AsMeta(), Profiles: sc.Profiles},
	}
	in.Source.File = src.File
	if cm := src.ConfigMap; cm != nil {
		ns := cm.Namespace
		if ns == "" {
			ns = k.namespace
		}
		in.Source.ConfigMap = &configv1.ConfigMapSource{Namespace: ns, Name: cm.Name, Key: cm.Key}
	}
	if o := src.OCI; o != nil {
		in.Source.OCI = &configv1.OCISource{
			Ref: o.Ref, FollowTag: o.FollowTag, PollInterval: o.PollInterval, CABundle: o.CABundle,
			Insecure: o.Insecure, MaxSize: o.MaxSize, Timeout: o.Timeout,
		}
		if ps := o.PullSecret; ps != nil {
			ns := ps.Namespace
			if ns == "" {
				ns = k.namespace
			}
			in.Source.OCI.PullSecret = &configv1.SecretReference{Namespace: ns, Name: ps.Name}
		}
		if o.Verify != nil {
			in.Source.OCI.Verify = &configv1.Verification{PublicKey: o.Verify.PublicKey}
		}
		configv1.SetDefaults_OCISource(in.Source.OCI)
	}
	var limits *config.TenantLimits
	var limitsPath string
	var derivedBudget bool
	if k.namespace != "" {
		limits, limitsPath = TenantLimitsFor(tenants, k.namespace)
		derivedBudget = tenantDefaults(&in.PolicySettings, limits)
	}
	configv1.SetDefaults_PolicySettings(&in.PolicySettings)
	var out config.Policy
	if err := configv1.Convert_v1_Policy_To_config_Policy(&in, &out, nil); err != nil {
		return config.Policy{}, "spec: " + err.Error()
	}
	out.Scope.Namespace = k.namespace
	// The namespace's ceilings first: what the team may set is what it
	// most needs to read.
	var errs field.ErrorList
	if limits != nil {
		errs = checkTenant(k.namespace, &out, limits, limitsPath, derivedBudget)
	}
	errs = append(errs, objectPaths(validation.ValidatePolicy(field.NewPath("spec"), &out))...)
	errs = append(errs, objectPaths(validation.ValidateObjectReads(field.NewPath("spec", "objects"), out.Objects, grants))...)
	if len(errs) > 0 {
		return config.Policy{}, errs.ToAggregate().Error()
	}
	if k.namespace == "" {
		if hasArgsPolicy(k.name) {
			return config.Policy{}, fmt.Sprintf("metadata.name: Duplicate value: %q is the name of a policy in the scheduler's WasmPolicy args; rename the object", k.name)
		}
	}
	return out, ""
}

// PolicyNameOf is the name of the policy a policy object runs, as
// PolicyOf names it, before the scheduler's args are known to check it.
func PolicyNameOf(u *unstructured.Unstructured) (string, error) {
	k := key{name: u.GetName()}
	switch u.GetKind() {
	case "ClusterSchedulingPolicy":
	case "SchedulingPolicy":
		k.namespace = u.GetNamespace()
		if k.namespace == "" {
			return "", fmt.Errorf("SchedulingPolicy %s: metadata.namespace is required", u.GetName())
		}
	default:
		return "", fmt.Errorf("%s %s is not a ClusterSchedulingPolicy or SchedulingPolicy", u.GetKind(), u.GetName())
	}
	return k.policyName(), nil
}

// PolicyOf is the policy config the scheduler would run for a policy
// object (a ClusterSchedulingPolicy, or a SchedulingPolicy in its
// namespace), checked as the scheduler checks it. hasArgsPolicy, when not
// nil, says which names the scheduler's args already use. Tools use it to
// run an object that is not applied yet (wasmsched rollout-report --object).
// tenants are the args' limits of namespaced policies; nil: the built-in
// ones.
func PolicyOf(u *unstructured.Unstructured, hasArgsPolicy func(name string) bool, tenants *config.Tenants, grants []config.ObjectGrant) (config.Policy, error) {
	if hasArgsPolicy == nil {
		hasArgsPolicy = func(string) bool { return false }
	}
	k := key{name: u.GetName()}
	switch u.GetKind() {
	case "ClusterSchedulingPolicy":
	case "SchedulingPolicy":
		k.namespace = u.GetNamespace()
		if k.namespace == "" {
			return config.Policy{}, fmt.Errorf("SchedulingPolicy %s: metadata.namespace is required", u.GetName())
		}
	default:
		return config.Policy{}, fmt.Errorf("%s %s is not a ClusterSchedulingPolicy or SchedulingPolicy", u.GetKind(), u.GetName())
	}
	p, invalid := policyOf(k, u, hasArgsPolicy, tenants, grants)
	if invalid != "" {
		return config.Policy{}, fmt.Errorf("%s: %s", k, invalid)
	}
	return p, nil
}

// objectPaths renames the args' field paths of errs to the object's: the
// name is metadata.name, and the scope's fields sit in the spec itself.
func objectPaths(errs field.ErrorList) field.ErrorList {
	out := make(field.ErrorList, len(errs))
	for i, e := range errs {
		c := *e
		switch {
		case c.Field == "spec.name":
			c.Field = "metadata.name"
		case strings.HasPrefix(c.Field, "spec.scope."):
			c.Field = "spec." + strings.TrimPrefix(c.Field, "spec.scope.")
		}
		out[i] = &c
	}
	return out
}
