package policyobjects

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
	policyv1alpha1 "github.com/wasmsched/wasmsched/pkg/apis/policy/v1alpha1"
)

// grantAll are tenant limits at the args' own maxima: a namespaced
// policy under them may set what an args policy may.
func grantAll() *config.Tenants {
	t := configv1.DefaultTenants(512 << 20)
	t.Default = config.TenantLimits{
		Reads: []string{"NodePods", "WholeObjects", "Cluster", "Namespaces", "Volumes"}, MaxTimeout: 10 * time.Second,
		MaxCycleBudget: time.Minute, MaxPreEnqueueTimeout: time.Second, MaxPermitWait: 15 * time.Minute, MaxMemoryLimit: 4 << 30, MaxStackLimit: 8 << 20, MaxWeight: 100,
		AllowRealClock: true, AllowRealRandom: true, PatchPrefixes: []string{"team.example.com/"},
		SchedulingTimePercent: 100, PreEnqueueTimePercent: 100, MemoryBudget: 256 << 20,
		Objects: []config.TenantObjectGrant{{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"}},
	}
	return &t
}

// objectPolicy runs a SchedulingPolicy with settings through the
// controller's policyOf, its namespace granted everything.
func objectPolicy(t *testing.T, settings configv1.PolicySettings) (config.Policy, string) {
	t.Helper()
	return tenantPolicy(t, "team-a", settings, grantAll())
}

// leaseGrants are the args' objects of the tests: Leases.
var leaseGrants = []config.ObjectGrant{{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Resource: "leases"}}

// tenantPolicy runs a SchedulingPolicy of namespace ns with settings
// through policyOf under tenants (nil: the built-in limits).
func tenantPolicy(t *testing.T, ns string, settings configv1.PolicySettings, tenants *config.Tenants) (config.Policy, string) {
	t.Helper()
	obj := &policyv1alpha1.SchedulingPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy.wasmsched.io/v1alpha1", Kind: "SchedulingPolicy"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"},
		Spec: policyv1alpha1.SchedulingPolicySpec{
			Source:         policyv1alpha1.Source{ConfigMap: &policyv1alpha1.ConfigMapSource{Name: "cm", Key: "policy.wasm"}},
			PolicySettings: settings,
		},
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return policyOf(key{namespace: ns, name: "p"}, &unstructured.Unstructured{Object: u}, func(string) bool { return false }, tenants, leaseGrants)
}

// argsPolicy runs the same settings through the args' path: defaulting,
// conversion to the internal type.
func argsPolicy(t *testing.T, settings configv1.PolicySettings) config.Policy {
	t.Helper()
	args := &configv1.WasmPolicyArgs{Policies: []configv1.Policy{{Name: "team-a/p", PolicySettings: *settings.DeepCopy()}}}
	configv1.SetObjectDefaults_WasmPolicyArgs(args)
	var out config.WasmPolicyArgs
	if err := configv1.Convert_v1_WasmPolicyArgs_To_config_WasmPolicyArgs(args, &out, nil); err != nil {
		t.Fatal(err)
	}
	return out.Policies[0]
}

// A policy object's settings are the args' settings: the same type,
// defaulted and converted by the same code, so a policy declared either way
// runs the same. The test sets every field (reflection finds a new one
// left out), and also leaves every field unset.
func TestObjectSettingsAreTheArgs(t *testing.T) {
	weight, fp, mode, reuse := int32(7), "Ignore", "Audit", "Disabled"
	mem, stack := resource.MustParse("32Mi"), resource.MustParse("1Mi")
	full := configv1.PolicySettings{
		SHA256: strings.Repeat("ab", 32), Config: "key=team", Weight: &weight,
		Timeout: &metav1.Duration{Duration: 50 * time.Millisecond}, PreEnqueueTimeout: &metav1.Duration{Duration: 20 * time.Millisecond},
		MaxPermitWait: &metav1.Duration{Duration: 30 * time.Second},
		CycleBudget:   &metav1.Duration{Duration: 300 * time.Millisecond}, MemoryLimit: &mem, StackLimit: &stack, FailurePolicy: &fp, Mode: &mode,
		VerdictReuse: &reuse, RealClock: true, RealRandom: true, Reads: []string{"NodePods"}, PatchPrefixes: []string{"team.example.com/"},
		Objects: []configv1.ObjectRead{{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Fields: []string{"spec.renewTime", "metadata.labels[team]"}}},
	}
	v := reflect.ValueOf(full)
	for i := 0; i < v.NumField(); i++ {
		if v.Field(i).IsZero() {
			t.Fatalf("the test leaves PolicySettings.%s unset: set it", v.Type().Field(i).Name)
		}
	}
	for name, s := range map[string]configv1.PolicySettings{"every field set": full, "none set": {}, "timeout only": {Timeout: &metav1.Duration{Duration: 5 * time.Millisecond}}} {
		t.Run(name, func(t *testing.T) {
			obj, why := objectPolicy(t, s)
			if why != "" {
				t.Fatalf("policyOf: %s", why)
			}
			args := argsPolicy(t, s)
			if !reflect.DeepEqual(obj.PolicySettings, args.PolicySettings) {
				t.Errorf("object settings %+v,\nargs settings %+v", obj.PolicySettings, args.PolicySettings)
			}
		})
	}
	// The derived defaults follow the timeout, by one rule each.
	obj, _ := objectPolicy(t, configv1.PolicySettings{Timeout: &metav1.Duration{Duration: 5 * time.Millisecond}})
	if obj.PreEnqueueTimeout != 5*time.Millisecond || obj.CycleBudget != 10*time.Millisecond || obj.MemoryLimit != 64<<20 || obj.Mode != config.ModeEnforce || obj.FailurePolicy != config.FailurePolicyFail {
		t.Errorf("defaulted settings %+v", obj.PolicySettings)
	}
	// Validation is the args' too, and names the object's field.
	zero := int32(0)
	if _, why := objectPolicy(t, configv1.PolicySettings{Weight: &zero}); !strings.Contains(why, "spec.weight") {
		t.Errorf("weight 0: %q, want an error naming spec.weight", why)
	}
}
