package policyobjects

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
	policyv1alpha1 "github.com/wasmsched/wasmsched/pkg/apis/policy/v1alpha1"
)

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

// Every ceiling and grant of policyObjects.tenants refuses a namespaced
// spec that asks for more, in the object's status: the field, the
// ceiling, the args' setting that sets it and the fix.
func TestTenantCeilingsRefuse(t *testing.T) {
	mem, stack, weight := resource.MustParse("4Gi"), resource.MustParse("8Mi"), int32(100)
	for _, tc := range []struct {
		name     string
		settings configv1.PolicySettings
		want     []string
	}{
		{"timeout", configv1.PolicySettings{Timeout: dur(10 * time.Second)}, []string{"spec.timeout", `"10s"`, "ceiling of 50ms", "policyObjects.tenants.default.maxTimeout", "namespace team-x"}},
		{"cycleBudget", configv1.PolicySettings{CycleBudget: dur(time.Minute)}, []string{"spec.cycleBudget", "ceiling of 100ms", "policyObjects.tenants.default.maxCycleBudget"}},
		{"preEnqueueTimeout", configv1.PolicySettings{PreEnqueueTimeout: dur(time.Second)}, []string{"spec.preEnqueueTimeout", "ceiling of 10ms", ".maxPreEnqueueTimeout"}},
		// A waiting pod holds its node's resources from every other team.
		{"maxPermitWait", configv1.PolicySettings{MaxPermitWait: dur(10 * time.Minute)}, []string{"spec.maxPermitWait", "ceiling of 1m0s", ".maxPermitWait"}},
		{"memoryLimit", configv1.PolicySettings{MemoryLimit: &mem}, []string{"spec.memoryLimit", `"4Gi"`, "ceiling of 16Mi", ".maxMemoryLimit"}},
		{"stackLimit", configv1.PolicySettings{StackLimit: &stack}, []string{"spec.stackLimit", `"8Mi"`, "ceiling of 256Ki", ".maxStackLimit"}},
		{"weight", configv1.PolicySettings{Weight: &weight}, []string{"spec.weight", "ceiling of 1 ", ".maxWeight"}},
		{"realClock", configv1.PolicySettings{RealClock: true}, []string{"spec.realClock: Forbidden", "the real clock is not granted", ".allowRealClock", "remove it"}},
		{"realRandom", configv1.PolicySettings{RealRandom: true}, []string{"spec.realRandom: Forbidden", ".allowRealRandom"}},
		{"reads", configv1.PolicySettings{Reads: []string{"NodePods", "Cluster", "WholeObjects", "Namespaces", "Devices"}}, []string{
			"spec.reads[0]: Forbidden: NodePods is not granted to namespace team-x (granted: none)", "spec.reads[1]", "spec.reads[2]", "spec.reads[3]",
			"spec.reads[4]: Forbidden: Devices is not granted to namespace team-x (granted: none)",
			"policyObjects.tenants.default.reads"}},
		{"patchPrefixes", configv1.PolicySettings{PatchPrefixes: []string{"team.example.com/"}}, []string{"spec.patchPrefixes[0]: Forbidden", "granted: none", ".patchPrefixes"}},
		// The args grant Leases, but not to the team's namespace.
		{"objects", configv1.PolicySettings{Objects: []configv1.ObjectRead{{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Fields: []string{"spec.renewTime"}}}}, []string{
			"spec.objects[0]: Forbidden: coordination.k8s.io/v1 Lease is not granted to namespace team-x", "{apiVersion: coordination.k8s.io/v1, kind: Lease} to policyObjects.tenants.default.objects"}},
		// A kind the args do not grant at all.
		{"objects not granted", configv1.PolicySettings{Objects: []configv1.ObjectRead{{APIVersion: "resource.k8s.io/v1", Kind: "ResourceSlice", Fields: []string{"spec.driver"}}}}, []string{
			"spec.objects[0]: Invalid value: \"resource.k8s.io/v1 ResourceSlice\": not granted", "add {apiVersion: resource.k8s.io/v1, kind: ResourceSlice, resource: <plural>} to objects"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, why := tenantPolicy(t, "team-x", tc.settings, nil)
			for _, w := range tc.want {
				if !strings.Contains(why, w) {
					t.Errorf("refusal %q lacks %q", why, w)
				}
			}
		})
	}
}

// A namespaced spec that sets nothing runs within its ceilings: each unset
// setting is the lesser of its default and the ceiling.
func TestTenantDefaultsFitTheCeilings(t *testing.T) {
	p, why := tenantPolicy(t, "team-x", configv1.PolicySettings{}, nil)
	if why != "" {
		t.Fatalf("policyOf: %s", why)
	}
	got := [6]interface{}{p.Timeout, p.CycleBudget, p.PreEnqueueTimeout, p.MemoryLimit, p.StackLimit, p.Weight}
	want := [6]interface{}{50 * time.Millisecond, 100 * time.Millisecond, 10 * time.Millisecond, int64(16 << 20), int64(256 << 10), int32(1)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaulted settings (-want +got):\n%s", diff)
	}
	// A timeout below the ceiling keeps its derived cycle budget.
	p, _ = tenantPolicy(t, "team-x", configv1.PolicySettings{Timeout: dur(20 * time.Millisecond)}, nil)
	if p.CycleBudget != 40*time.Millisecond || p.PreEnqueueTimeout != 10*time.Millisecond {
		t.Errorf("timeout 20ms: cycle budget %s, preEnqueue %s; want 40ms, 10ms", p.CycleBudget, p.PreEnqueueTimeout)
	}
}

// The operator raises a named namespace's limits in the args; the other
// namespaces keep the default entry, and the refusal names the entry.
func TestTenantLimitsPerNamespace(t *testing.T) {
	args := &configv1.WasmPolicyArgs{PolicyObjects: configv1.PolicyObjects{Enabled: true, Tenants: configv1.Tenants{
		Namespaces: []configv1.NamespaceTenantLimits{{Names: []string{"team-y", "team-z"}, TenantLimits: configv1.TenantLimits{
			Reads: []string{"NodePods"}, MaxTimeout: dur(time.Second), MaxCycleBudget: dur(2 * time.Second)}}},
	}}}
	configv1.SetObjectDefaults_WasmPolicyArgs(args)
	var out config.WasmPolicyArgs
	if err := configv1.Convert_v1_WasmPolicyArgs_To_config_WasmPolicyArgs(args, &out, nil); err != nil {
		t.Fatal(err)
	}
	tenants := &out.PolicyObjects.Tenants
	if tenants.MemoryBudget != 256<<20 {
		t.Errorf("tenants.memoryBudget defaults to %d, want half of the 512Mi budget", tenants.MemoryBudget)
	}
	s := configv1.PolicySettings{Timeout: dur(500 * time.Millisecond), Reads: []string{"NodePods"}}
	if p, why := tenantPolicy(t, "team-z", s, tenants); why != "" || p.Timeout != 500*time.Millisecond || p.CycleBudget != time.Second {
		t.Errorf("team-z under its own limits: %q, %+v", why, p.PolicySettings)
	}
	// The entry's unset fields take the built-in defaults.
	if _, why := tenantPolicy(t, "team-z", configv1.PolicySettings{Reads: []string{"Cluster"}}, tenants); !strings.Contains(why, "policyObjects.tenants.namespaces[0].reads") || !strings.Contains(why, "granted: NodePods") {
		t.Errorf("team-z reading Cluster: %q", why)
	}
	if _, why := tenantPolicy(t, "team-x", s, tenants); !strings.Contains(why, "policyObjects.tenants.default.maxTimeout") || !strings.Contains(why, "spec.reads[0]") {
		t.Errorf("team-x under the default entry: %q", why)
	}
}

// The operator's own policies (ClusterSchedulingPolicy) are not bound by
// the tenants' limits, and neither is a canary of them; a namespaced
// canary is.
func TestTenantLimitsBindOnlyNamespacedObjects(t *testing.T) {
	obj := &policyv1alpha1.ClusterSchedulingPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy.wasmsched.io/v1alpha1", Kind: "ClusterSchedulingPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: "ops"},
		Spec: policyv1alpha1.ClusterSchedulingPolicySpec{
			Source:         policyv1alpha1.Source{ConfigMap: &policyv1alpha1.ConfigMapSource{Namespace: "ops", Name: "cm", Key: "policy.wasm"}},
			PolicySettings: configv1.PolicySettings{Timeout: dur(10 * time.Second), Reads: []string{"Cluster", "NodePods"}, RealClock: true},
		},
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	if p, why := policyOf(key{name: "ops"}, &unstructured.Unstructured{Object: u}, func(string) bool { return false }, nil, nil); why != "" || p.Timeout != 10*time.Second {
		t.Errorf("cluster policy: %q", why)
	}
	cfg := "x"
	nsObj := map[string]interface{}{
		"apiVersion": "policy.wasmsched.io/v1alpha1", "kind": "SchedulingPolicy",
		"metadata": map[string]interface{}{"namespace": "team-x", "name": "p", "generation": int64(1)},
		"spec": map[string]interface{}{
			"source": map[string]interface{}{"configMap": map[string]interface{}{"name": "cm", "key": "policy.wasm"}},
			"reads":  []interface{}{"Cluster"},
			"canary": map[string]interface{}{"config": cfg},
		},
	}
	_, _, _, why := canaryOf(key{namespace: "team-x", name: "p"}, &unstructured.Unstructured{Object: nsObj}, func(string) bool { return false }, nil, nil)
	if !strings.Contains(why, "spec.canary.reads[0]: Forbidden") {
		t.Errorf("namespaced canary reading Cluster: %q", why)
	}
}

// A namespace runs at most maxPolicies SchedulingPolicy objects: one more
// is refused in its status, naming the setting, without touching another
// namespace's; when one of the namespace's objects goes, it is reconciled
// again and starts.
func TestTenantPolicyCount(t *testing.T) {
	plugin := &testPlugin{profile: "default-scheduler"}
	c := newTestController(t, plugin)
	tenants := configv1.DefaultTenants(512 << 20)
	tenants.Default.MaxPolicies = 2
	c.cfg.Tenants = &tenants
	named := func(ns, name string) *policyv1alpha1.SchedulingPolicy {
		p := teamPolicy(types.UID(ns+"/"+name), 1, "")
		p.Namespace, p.Name = ns, name
		return p
	}
	put(t, c, named("team-a", "one"))
	two := put(t, c, named("team-a", "two"))
	three := put(t, c, named("team-a", "three"))
	if why := c.entryOf(t, three).invalid; !strings.Contains(why, "namespace team-a already runs 2 SchedulingPolicy objects") || !strings.Contains(why, "policyObjects.tenants.default.maxPolicies") {
		t.Errorf("the third policy of team-a: %q", why)
	}
	if why := c.entryOf(t, put(t, c, named("team-b", "one"))).invalid; why != "" {
		t.Errorf("team-b's policy refused: %q", why)
	}
	if len(plugin.built) != 3 {
		t.Fatalf("built %d policies, want 3 (team-a's two, team-b's one)", len(plugin.built))
	}
	// One of team-a's goes: the third is reconciled again and starts.
	if err := c.informers[true].GetStore().Delete(c.object(two)); err != nil {
		t.Fatal(err)
	}
	reconcile(t, c, two)
	if c.queue.Len() == 0 {
		t.Fatal("nothing requeued after team-a's policy went")
	}
	k, _ := c.queue.Get()
	c.queue.Done(k)
	if k != three {
		t.Fatalf("requeued %s, want %s", k, three)
	}
	reconcile(t, c, three)
	if why := c.entryOf(t, three).invalid; why != "" {
		t.Errorf("the third policy after one went: %q", why)
	}
}
