package validation

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
)

func validArgs() *config.WasmPolicyArgs {
	return configv1.DefaultArgs(
		configv1.DefaultPolicy("team-isolation", config.Source{File: "/etc/wasmsched/team-isolation.wasm"}),
		configv1.DefaultPolicy("bin-packing", config.Source{ConfigMap: &config.ConfigMapSource{Namespace: "wasmsched", Name: "bin-packing", Key: "policy.wasm"}}),
	)
}

const ociRef = "registry.example.com/policies/team-isolation:v1@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// ociSource makes the first policy's source an oci source changed by f.
func ociSource(f func(o *config.OCISource)) func(a *config.WasmPolicyArgs) {
	return func(a *config.WasmPolicyArgs) {
		o := &config.OCISource{Ref: ociRef}
		f(o)
		a.Policies[0].Source = config.Source{OCI: o}
	}
}

// tenants turns policy objects on and changes their tenants' limits by f.
func tenants(f func(t *config.Tenants)) func(a *config.WasmPolicyArgs) {
	return func(a *config.WasmPolicyArgs) {
		a.PolicyObjects.Enabled = true
		f(&a.PolicyObjects.Tenants)
	}
}

// objects grants Leases (changed by grant) and makes the first policy read
// their renew time and holder (changed by read).
func objects(grant func(*config.ObjectGrant), read func(*config.ObjectRead)) func(a *config.WasmPolicyArgs) {
	return func(a *config.WasmPolicyArgs) {
		g := config.ObjectGrant{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Resource: "leases"}
		if grant != nil {
			grant(&g)
		}
		r := config.ObjectRead{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Fields: []string{"spec.renewTime", "spec.holderIdentity"}}
		if read != nil {
			read(&r)
		}
		a.Objects = []config.ObjectGrant{g}
		a.Policies[0].Objects = []config.ObjectRead{r}
	}
}

// manyPolicies returns n valid policies with distinct names.
func manyPolicies(n int) []config.Policy {
	ps := make([]config.Policy, n)
	for i := range ps {
		ps[i] = configv1.DefaultPolicy(fmt.Sprintf("p%d", i), config.Source{File: "/etc/wasmsched/p.wasm"})
	}
	return ps
}

// Each case breaks one field of valid, defaulted args; the error must name
// that field (so a user finds it in the KubeSchedulerConfiguration) and say
// how to fix it.
func TestValidateWasmPolicyArgs(t *testing.T) {
	root := field.NewPath("pluginConfig").Index(0).Child("args")
	for _, c := range []struct {
		name   string
		mutate func(a *config.WasmPolicyArgs)
		field  string // "" means valid
		hint   string
	}{
		{"defaults are valid", func(*config.WasmPolicyArgs) {}, "", ""},
		{"no policies", func(a *config.WasmPolicyArgs) { a.Policies = nil }, "policies", "add at least one policy"},
		{"duplicate name", func(a *config.WasmPolicyArgs) { a.Policies[1].Name = a.Policies[0].Name }, "policies[1].name", "unique name"},
		{"empty name", func(a *config.WasmPolicyArgs) { a.Policies[0].Name = "" }, "policies[0].name", "name the policy"},
		{"name not a DNS label", func(a *config.WasmPolicyArgs) { a.Policies[0].Name = "Team_Isolation" }, "policies[0].name", "DNS label"},
		{"two sources", func(a *config.WasmPolicyArgs) { a.Policies[1].Source.File = "/x.wasm" }, "policies[1].source", "exactly one of file, configMap or oci"},
		{"no source", func(a *config.WasmPolicyArgs) { a.Policies[0].Source = config.Source{} }, "policies[0].source", "exactly one of file, configMap or oci"},
		{"relative file", func(a *config.WasmPolicyArgs) { a.Policies[0].Source.File = "policy.wasm" }, "policies[0].source.file", "absolute path"},
		{"oci pinned", ociSource(func(o *config.OCISource) {}), "", ""},
		{"oci and file", func(a *config.WasmPolicyArgs) {
			a.Policies[0].Source.OCI = &config.OCISource{Ref: ociRef}
		}, "policies[0].source", "exactly one of file, configMap or oci"},
		{"oci without ref", ociSource(func(o *config.OCISource) { o.Ref = "" }), "policies[0].source.oci.ref", "wasmsched push prints"},
		{"oci ref not a reference", ociSource(func(o *config.OCISource) { o.Ref = "registry.example.com/p/team@sha256:abc" }), "policies[0].source.oci.ref", "64 hex digits"},
		{"oci ref without registry", ociSource(func(o *config.OCISource) { o.Ref = "team-isolation:v1" }), "policies[0].source.oci.ref", "names no registry"},
		{"oci ref with scheme", ociSource(func(o *config.OCISource) { o.Ref = "oci://" + ociRef }), "policies[0].source.oci.ref", "without oci://"},
		{"oci tag without digest", ociSource(func(o *config.OCISource) { o.Ref = "registry.example.com/policies/team-isolation:v1" }), "policies[0].source.oci.ref", "followTag: true"},
		{"oci followTag", ociSource(func(o *config.OCISource) {
			o.Ref, o.FollowTag = "registry.example.com/policies/team-isolation:stable", true
		}), "", ""},
		{"oci followTag with digest", ociSource(func(o *config.OCISource) { o.FollowTag = true }), "policies[0].source.oci.ref", "remove the digest"},
		{"oci followTag without tag", ociSource(func(o *config.OCISource) {
			o.Ref, o.FollowTag = "registry.example.com:5000/policies/team-isolation", true
		}), "policies[0].source.oci.ref", "tag to follow"},
		{"oci poll too often", ociSource(func(o *config.OCISource) {
			o.Ref, o.FollowTag, o.PollInterval = "registry.example.com/p/team:stable", true, time.Second
		}), "policies[0].source.oci.pollInterval", "between 5s"},
		{"oci secret without namespace", ociSource(func(o *config.OCISource) { o.PullSecret = &config.SecretReference{Name: "regcred"} }), "policies[0].source.oci.pullSecret.namespace", "dockerconfigjson"},
		{"oci bad CA", ociSource(func(o *config.OCISource) { o.CABundle = "not a certificate" }), "policies[0].source.oci.caBundle", "BEGIN CERTIFICATE"},
		{"oci too large maxSize", ociSource(func(o *config.OCISource) { o.MaxSize = 1 << 30 }), "policies[0].source.oci.maxSize", "at most 32Mi"},
		{"oci bad public key", ociSource(func(o *config.OCISource) { o.Verify = &config.Verification{PublicKey: "ssh-ed25519 AAAA"} }), "policies[0].source.oci.verify.publicKey", "cosign.pub"},
		{"oci relative cache dir", func(a *config.WasmPolicyArgs) { a.ModuleCacheDir = "cache" }, "moduleCacheDir", "absolute path"},
		{"configMap without key", func(a *config.WasmPolicyArgs) { a.Policies[1].Source.ConfigMap.Key = "" }, "policies[1].source.configMap.key", "binaryData key"},
		{"configMap without namespace", func(a *config.WasmPolicyArgs) { a.Policies[1].Source.ConfigMap.Namespace = "" }, "policies[1].source.configMap.namespace", "namespace"},
		{"bad sha256", func(a *config.WasmPolicyArgs) { a.Policies[0].SHA256 = "abc" }, "policies[0].sha256", "64 hex digits"},
		{"sha256 with prefix", func(a *config.WasmPolicyArgs) { a.Policies[0].SHA256 = "sha256:" + strings.Repeat("ab", 32) }, "", ""},
		{"weight 0", func(a *config.WasmPolicyArgs) { a.Policies[0].Weight = 0 }, "policies[0].weight", "must be between 1"},
		{"timeout 0", func(a *config.WasmPolicyArgs) { a.Policies[0].Timeout = 0 }, "policies[0].timeout", "greater than 0"},
		{"timeout too long", func(a *config.WasmPolicyArgs) { a.Policies[0].Timeout = time.Hour }, "policies[0].timeout", "at most"},
		{"memory too small", func(a *config.WasmPolicyArgs) { a.Policies[0].MemoryLimit = 1024 }, "policies[0].memoryLimit", "64Mi"},
		{"stack too small", func(a *config.WasmPolicyArgs) { a.Policies[0].StackLimit = 1024 }, "policies[0].stackLimit", "between 64Ki and 8Mi"},
		{"stack too large", func(a *config.WasmPolicyArgs) { a.Policies[0].StackLimit = 64 << 20 }, "policies[0].stackLimit", "unset: 256Ki"},
		{"unknown failurePolicy", func(a *config.WasmPolicyArgs) { a.Policies[0].FailurePolicy = "Retry" }, "policies[0].failurePolicy", "Fail"},
		{"unknown mode", func(a *config.WasmPolicyArgs) { a.Policies[0].Mode = "DryRun" }, "policies[0].mode", "Audit"},
		{"unknown verdictReuse", func(a *config.WasmPolicyArgs) { a.Policies[0].VerdictReuse = "Sometimes" }, "policies[0].verdictReuse", "Disabled"},
		{"declared reads", func(a *config.WasmPolicyArgs) { a.Policies[0].Reads = []string{"NodePods", "WholeObjects"} }, "", ""},
		{"policy objects without args policies", func(a *config.WasmPolicyArgs) { a.Policies = nil; a.PolicyObjects.Enabled = true }, "", ""},
		{"status lease without a namespace", func(a *config.WasmPolicyArgs) {
			a.PolicyObjects.Enabled = true
			a.PolicyObjects.StatusLease.Namespace = ""
		}, "policyObjects.statusLease.namespace", "namespace name"},
		{"tenant ceilings raised for a namespace", tenants(func(t *config.Tenants) {
			t.Namespaces = []config.NamespaceTenantLimits{{Names: []string{"team-a"}, TenantLimits: t.Default}}
			t.Namespaces[0].Reads, t.Namespaces[0].MaxTimeout = []string{"NodePods"}, time.Second
			t.Namespaces[0].MaxCycleBudget = 2 * time.Second
		}), "", ""},
		{"tenant stack ceiling too large", tenants(func(t *config.Tenants) { t.Default.MaxStackLimit = 1 << 30 }), "policyObjects.tenants.default.maxStackLimit", "between 64Ki and 8Mi"},
		{"tenant timeout ceiling too long", tenants(func(t *config.Tenants) { t.Default.MaxTimeout = time.Minute }), "policyObjects.tenants.default.maxTimeout", "at most 10s"},
		{"tenant cycle budget below the timeout", tenants(func(t *config.Tenants) { t.Default.MaxCycleBudget = time.Millisecond }), "policyObjects.tenants.default.maxCycleBudget", "at least maxTimeout"},
		{"tenant policy count 0", tenants(func(t *config.Tenants) { t.Default.MaxPolicies = 0 }), "policyObjects.tenants.default.maxPolicies", "between 1 and 1000"},
		{"tenant share 0", tenants(func(t *config.Tenants) { t.Default.SchedulingTimePercent = 0 }), "policyObjects.tenants.default.schedulingTimePercent", "share of the scheduler's time"},
		{"tenant gate share over 100", tenants(func(t *config.Tenants) { t.Default.PreEnqueueTimePercent = 101 }), "policyObjects.tenants.default.preEnqueueTimePercent", "queue locked"},
		{"tenant unknown read", tenants(func(t *config.Tenants) { t.Default.Reads = []string{"Secrets"} }), "policyObjects.tenants.default.reads[0]", "NodePods"},
		{"tenant patch prefix of Kubernetes", tenants(func(t *config.Tenants) { t.Default.PatchPrefixes = []string{"kubernetes.io/"} }), "policyObjects.tenants.default.patchPrefixes[0]", "Kubernetes"},
		{"tenants' budget over the plugin's", tenants(func(t *config.Tenants) { t.MemoryBudget = 1 << 40 }), "policyObjects.tenants.memoryBudget", "kept for the args' policies"},
		{"a namespace's budget over the tenants'", tenants(func(t *config.Tenants) { t.Default.MemoryBudget = t.MemoryBudget + 1 }), "policyObjects.tenants.default.memoryBudget", "tenants.memoryBudget"},
		{"a namespace named twice", tenants(func(t *config.Tenants) {
			t.Namespaces = []config.NamespaceTenantLimits{{Names: []string{"team-a"}, TenantLimits: t.Default}, {Names: []string{"team-a"}, TenantLimits: t.Default}}
		}), "policyObjects.tenants.namespaces[1].names[0]", "one entry"},
		{"a namespace entry naming none", tenants(func(t *config.Tenants) {
			t.Namespaces = []config.NamespaceTenantLimits{{TenantLimits: t.Default}}
		}), "policyObjects.tenants.namespaces[0].names", "name the namespaces"},
		{"scope", func(a *config.WasmPolicyArgs) {
			a.Policies[0].Scope = config.Scope{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "batch"}}, NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpExists}}}, Profiles: []string{"wasmsched"}}
		}, "", ""},
		{"bad pod selector", func(a *config.WasmPolicyArgs) {
			a.Policies[0].Scope.PodSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Near"}}}
		}, "policies[0].scope.podSelector.matchExpressions[0].operator", "not a valid selector operator"},
		{"bad namespace selector", func(a *config.WasmPolicyArgs) {
			a.Policies[0].Scope.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}}
		}, "policies[0].scope.namespaceSelector.matchLabels", "name part must consist"},
		{"duplicate profile", func(a *config.WasmPolicyArgs) { a.Policies[0].Scope.Profiles = []string{"a", "a"} }, "policies[0].scope.profiles[1]", "Duplicate"},
		{"unknown read", func(a *config.WasmPolicyArgs) { a.Policies[0].Reads = []string{"NodePods", "Secrets"} }, "policies[0].reads[1]", `supported values: "NodePods", "WholeObjects"`},
		{"read declared twice", func(a *config.WasmPolicyArgs) { a.Policies[0].Reads = []string{"NodePods", "NodePods"} }, "policies[0].reads[1]", "Duplicate"},
		{"maxInstances 0", func(a *config.WasmPolicyArgs) { a.MaxInstancesPerPolicy = 0 }, "maxInstancesPerPolicy", "parallelism"},
		{"poll interval too short", func(a *config.WasmPolicyArgs) { a.FilePollInterval = time.Millisecond }, "filePollInterval", "between 100ms and 1h"},
		{"relative cache dir", func(a *config.WasmPolicyArgs) { a.CompilationCacheDir = "cache" }, "compilationCacheDir", "absolute path"},
		{"negative function limit", func(a *config.WasmPolicyArgs) { a.CompileLimits.MaxFunctions = -1 }, "compileLimits.maxFunctions", "between 1 and"},
		{"unset limits take the defaults", func(a *config.WasmPolicyArgs) { a.CompileLimits = config.CompileLimits{} }, "", ""},
		{"code limit over the module size", func(a *config.WasmPolicyArgs) { a.CompileLimits.MaxCodeBytes = 64 << 20 }, "compileLimits.maxCodeBytes", "4Mi"},
		{"locals limit too high", func(a *config.WasmPolicyArgs) { a.CompileLimits.MaxLocals = 1 << 40 }, "compileLimits.maxLocals", "scheduler's memory"},
		{"cycle budget under the timeout", func(a *config.WasmPolicyArgs) { a.Policies[0].CycleBudget = a.Policies[0].Timeout / 2 }, "policies[0].cycleBudget", "at least the timeout"},
		{"cycle budget too long", func(a *config.WasmPolicyArgs) { a.Policies[0].CycleBudget = time.Hour }, "policies[0].cycleBudget", "at most 1m0s"},
		{"negative breaker threshold", func(a *config.WasmPolicyArgs) { a.CircuitBreaker.FailureThreshold = -1 }, "circuitBreaker.failureThreshold", "between 1 and"},
		{"breaker backoff too short", func(a *config.WasmPolicyArgs) { a.CircuitBreaker.Backoff = time.Millisecond }, "circuitBreaker.backoff", "between 100ms and 1h"},
		{"memory budget too small", func(a *config.WasmPolicyArgs) { a.MemoryBudget = 1 << 20 }, "memoryBudget", "for example 512Mi"},
		{"no memory budget", func(a *config.WasmPolicyArgs) { a.MemoryBudget = 0 }, "", ""},
		{"more than 64 policies", func(a *config.WasmPolicyArgs) { a.Policies = manyPolicies(240) }, "", ""},
		{"too many policies", func(a *config.WasmPolicyArgs) { a.Policies = manyPolicies(MaxPolicies + 1) }, "policies", "merge policies that share a module"},
		{"a granted kind read", objects(nil, nil), "", ""},
		{"a grant with namespaces and fields", objects(func(g *config.ObjectGrant) {
			g.Namespaces, g.Fields = []string{"kube-node-lease"}, []string{"spec"}
		}, nil), "", ""},
		{"a read of a kind not granted", objects(nil, func(r *config.ObjectRead) { r.Kind = "ResourceSlice" }), "policies[0].objects[0]", "add {apiVersion: coordination.k8s.io/v1, kind: ResourceSlice, resource: <plural>} to objects"},
		{"a read of another version", objects(nil, func(r *config.ObjectRead) { r.APIVersion = "coordination.k8s.io/v1beta1" }), "policies[0].objects[0]", "not granted"},
		{"a read without fields", objects(nil, func(r *config.ObjectRead) { r.Fields = nil }), "policies[0].objects[0].fields", "such as spec.renewTime"},
		{"a read of a bad path", objects(nil, func(r *config.ObjectRead) { r.Fields = []string{"spec..renewTime"} }), "policies[0].objects[0].fields[0]", "not a field path"},
		{"a read of a field the grant leaves out", objects(func(g *config.ObjectGrant) { g.Fields = []string{"spec.renewTime"} },
			func(r *config.ObjectRead) { r.Fields = []string{"spec.renewTime", "metadata.labels"} }), "policies[0].objects[0].fields[1]", "grants only the fields spec.renewTime"},
		{"a kind read twice", func(a *config.WasmPolicyArgs) {
			objects(nil, nil)(a)
			a.Policies[0].Objects = append(a.Policies[0].Objects, a.Policies[0].Objects[0])
		}, "policies[0].objects[1]", "declare each kind once"},
		{"a grant of Secrets", objects(func(g *config.ObjectGrant) { g.APIVersion, g.Kind, g.Resource = "v1", "Secret", "secrets" },
			func(r *config.ObjectRead) { r.APIVersion, r.Kind = "v1", "Secret" }), "objects[0]", "Secrets hold credentials"},
		{"a grant of Secrets under another kind", objects(func(g *config.ObjectGrant) { g.APIVersion, g.Kind, g.Resource = "v1", "ConfigMap", "secrets" },
			func(r *config.ObjectRead) { r.APIVersion, r.Kind = "v1", "ConfigMap" }), "objects[0]", "ConfigMap (secrets) may not be granted: Secrets hold credentials"},
		{"a grant without its plural", objects(func(g *config.ObjectGrant) { g.Resource = "" }, nil), "objects[0].resource", "kubectl api-resources"},
		{"a grant of a lower-case kind", objects(func(g *config.ObjectGrant) { g.Kind = "lease" }, nil), "objects[0].kind", "such as Lease"},
		{"a grant without a version", objects(func(g *config.ObjectGrant) { g.APIVersion = "coordination.k8s.io" }, nil), "objects[0].apiVersion", "group/version"},
		{"a kind granted twice", func(a *config.WasmPolicyArgs) {
			objects(nil, nil)(a)
			a.Objects = append(a.Objects, a.Objects[0])
		}, "objects[1]", "grant each kind once"},
		{"a grant of a bad namespace", objects(func(g *config.ObjectGrant) { g.Namespaces = []string{"Kube_System"} }, nil), "objects[0].namespaces[0]", "namespace name"},
		{"a tenant granted a granted kind", func(a *config.WasmPolicyArgs) {
			objects(nil, nil)(a)
			tenants(func(t *config.Tenants) {
				t.Default.Objects = []config.TenantObjectGrant{{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Namespaces: []string{"kube-node-lease"}}}
			})(a)
		}, "", ""},
		{"a tenant granted a kind the args do not grant", tenants(func(t *config.Tenants) {
			t.Default.Objects = []config.TenantObjectGrant{{APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaim"}}
		}), "policyObjects.tenants.default.objects[0]", "grant the kind there first, as {apiVersion: resource.k8s.io/v1, kind: ResourceClaim"},
		{"breaker cap under its backoff", func(a *config.WasmPolicyArgs) {
			a.CircuitBreaker.Backoff, a.CircuitBreaker.MaxBackoff = time.Minute, time.Second
		}, "circuitBreaker.maxBackoff", "at least backoff"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := validArgs()
			c.mutate(a)
			errs := ValidateWasmPolicyArgs(root, a)
			if c.field == "" {
				if len(errs) > 0 {
					t.Fatalf("valid args refused: %v", errs)
				}
				return
			}
			want := root.String() + "." + c.field
			for _, e := range errs {
				if e.Field == want && strings.Contains(e.Error(), c.hint) {
					return
				}
			}
			t.Fatalf("errors %v: want one for %s mentioning %q", errs, want, c.hint)
		})
	}
}
