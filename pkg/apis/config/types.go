package config

import (
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// WasmPolicyArgs configures the WasmPolicy plugin: the policies it runs and
// what they share.
type WasmPolicyArgs struct {
	metav1.TypeMeta

	// Policies run in order; Filter stops at the first rejection.
	Policies []Policy
	// CompilationCacheDir keeps compiled modules across restarts.
	CompilationCacheDir string
	// MaxInstancesPerPolicy bounds each policy's instance pool; it should
	// equal the scheduler's parallelism.
	MaxInstancesPerPolicy int32
	// FilePollInterval is how often file sources are checked for changes.
	FilePollInterval time.Duration
	// CompileLimits bound what one module may ask the compiler to do.
	CompileLimits CompileLimits
	// CircuitBreaker shapes every policy's circuit breaker.
	CircuitBreaker CircuitBreaker
	// MemoryBudget bounds the memory of all policies together, in bytes;
	// 0 means no budget.
	MemoryBudget int64
	// PolicyObjects turns on policies from ClusterSchedulingPolicy and
	// SchedulingPolicy objects.
	PolicyObjects PolicyObjects
	// RetiredGrace is how long a replaced module version, or a replaced or
	// deleted object policy, stays callable for cycles that pinned it; 0
	// means the host's default.
	RetiredGrace time.Duration
	// ModuleCacheDir keeps modules pulled from OCI registries, by digest,
	// so a restart with the registry down still starts; "": none.
	ModuleCacheDir string
	// Objects are the kinds of objects policies may read (policies[].objects),
	// the operator's grants.
	Objects []ObjectGrant
}

// ObjectGrant lets policies read the objects of one kind (v1.ObjectGrant).
type ObjectGrant struct {
	// APIVersion is group/version ("v1" for the core group).
	APIVersion string
	Kind       string
	// Resource is the kind's plural, as RBAC and the API path name it.
	Resource string
	// Namespaces limits reads to these namespaces; empty: all.
	Namespaces []string
	// Fields limits the field paths policies may declare; empty: any.
	Fields []string
}

// ObjectRead is a policy's read of the objects of one granted kind
// (v1.ObjectRead).
type ObjectRead struct {
	APIVersion string
	Kind       string
	// Fields are the field paths the policy reads, in the order its
	// records hold them.
	Fields []string
}

// TenantObjectGrant lets a namespace's policies read a granted kind
// (v1.TenantObjectGrant).
type TenantObjectGrant struct {
	APIVersion string
	Kind       string
	// Namespaces beyond the policy's own that it may read; empty: its own.
	Namespaces []string
	// ClusterScoped lets its policies read the objects of no namespace
	// (a cluster-scoped kind): every one of them.
	ClusterScoped bool
}

// PolicyObjects configures policies from Kubernetes objects
// (policy.wasmsched.io).
type PolicyObjects struct {
	// Enabled makes the plugin watch the policy objects.
	Enabled bool
	// StatusLease is the Lease whose holder writes the objects' status.
	StatusLease LeaseRef
	// Tenants bounds the namespaced SchedulingPolicy objects.
	Tenants Tenants
}

// Tenants bounds what namespaced policies may set, read and spend.
type Tenants struct {
	// Default applies to namespaces no entry of Namespaces names.
	Default TenantLimits
	// Namespaces: the first entry naming a namespace applies.
	Namespaces []NamespaceTenantLimits
	// MemoryBudget bounds all namespaced policies together, in bytes.
	MemoryBudget int64
}

// NamespaceTenantLimits are the limits of the namespaces named.
type NamespaceTenantLimits struct {
	Names []string
	TenantLimits
}

// TenantLimits are one namespace's ceilings and grants (v1.TenantLimits
// documents each), defaulted.
type TenantLimits struct {
	Reads                 []string
	MaxTimeout            time.Duration
	MaxCycleBudget        time.Duration
	MaxPreEnqueueTimeout  time.Duration
	MaxPermitWait         time.Duration
	MaxMemoryLimit        int64
	MaxStackLimit         int64
	MaxWeight             int32
	MaxPolicies           int32
	AllowRealClock        bool
	AllowRealRandom       bool
	PatchPrefixes         []string
	SchedulingTimePercent int32
	PreEnqueueTimePercent int32
	MemoryBudget          int64
	Objects               []TenantObjectGrant
}

// For returns the limits of namespace ns and the args' field path that
// sets them (policyObjects.tenants.default, or .namespaces[i]).
func (t *Tenants) For(ns string) (*TenantLimits, string) {
	for i := range t.Namespaces {
		for _, n := range t.Namespaces[i].Names {
			if n == ns {
				return &t.Namespaces[i].TenantLimits, "policyObjects.tenants.namespaces[" + strconv.Itoa(i) + "]"
			}
		}
	}
	return &t.Default, "policyObjects.tenants.default"
}

// LeaseRef names a coordination.k8s.io Lease.
type LeaseRef struct {
	Namespace string
	Name      string
}

// CircuitBreaker shapes each policy's circuit breaker. A zero field means
// the default.
type CircuitBreaker struct {
	// FailureThreshold is how many distinct pods must fail within a
	// minute, and outnumber twice the pods answered, for it to open.
	FailureThreshold int32
	// Backoff is the first open period; MaxBackoff caps its doubling.
	Backoff    time.Duration
	MaxBackoff time.Duration
}

// Policy is one wasm policy.
type Policy struct {
	Name   string
	Source Source
	// PolicySettings are how the policy runs, the same for the args and
	// the policy objects (v1.PolicySettings).
	PolicySettings
	// Scope limits the pods the policy applies to.
	Scope Scope
}

// PolicySettings are how a policy runs, defaulted (v1.SetDefaults_PolicySettings).
type PolicySettings struct {
	SHA256  string
	Config  string
	Weight  int32
	Timeout time.Duration
	// PreEnqueueTimeout bounds a preenqueue call, which runs on the
	// scheduling queue's path.
	PreEnqueueTimeout time.Duration
	// MaxPermitWait bounds how long the policy's permit may make a pod
	// wait (0: the default, 1m).
	MaxPermitWait time.Duration
	CycleBudget   time.Duration
	MemoryLimit   int64
	StackLimit    int64
	FailurePolicy FailurePolicy
	Mode          Mode
	// VerdictReuse says whether nodes with equal rows share an evaluation;
	// "" is Enabled.
	VerdictReuse VerdictReuse
	RealClock    bool
	RealRandom   bool
	// Reads are the reads beyond the pod and the node being evaluated that
	// the policy may make (fields.Scopes: NodePods, WholeObjects, Cluster,
	// Namespaces, Volumes, Devices).
	Reads []string
	// PatchPrefixes are the label and annotation key prefixes the policy's
	// prebind may write on a pod; none: it may write nothing.
	PatchPrefixes []string
	// Objects are the granted kinds the policy reads, with the fields.
	Objects []ObjectRead
}

// Scope says which pods a policy applies to; a zero Scope applies to all.
// A pod outside a policy's scope never calls it.
type Scope struct {
	// NamespaceSelector matches the labels of the pod's namespace; nil: any.
	NamespaceSelector *metav1.LabelSelector
	// PodSelector matches the pod's labels; nil: any.
	PodSelector *metav1.LabelSelector
	// Profiles are the scheduler profiles (schedulerName) the policy runs
	// in; empty: all.
	Profiles []string
	// Namespace, when set, limits the policy to pods of that namespace (a
	// namespaced SchedulingPolicy). Not settable in the args.
	Namespace string
}

// Source says where a policy's module comes from; exactly one field is set.
type Source struct {
	File      string
	ConfigMap *ConfigMapSource
	OCI       *OCISource
}

// OCISource is a module in an OCI registry: a wasm artifact, or an image
// of one layer holding it.
type OCISource struct {
	// Ref is registry/repository:tag@sha256:digest. The digest is
	// required unless FollowTag is set, and then there is none.
	Ref string
	// FollowTag resolves the tag every PollInterval and loads each new
	// digest, keeping the last good one when a new one fails.
	FollowTag    bool
	PollInterval time.Duration
	// PullSecret names a kubernetes.io/dockerconfigjson Secret with the
	// registry's credentials; nil: anonymous.
	PullSecret *SecretReference
	// CABundle is PEM certificates the registry's certificate must chain
	// to, instead of the system's.
	CABundle string
	// Insecure allows plain HTTP and skips certificate checks.
	Insecure bool
	// MaxSize bounds the module, checked before it is downloaded.
	MaxSize int64
	// Timeout bounds one pull.
	Timeout time.Duration
	// Verify, when set, requires a cosign signature by its key.
	Verify *Verification
}

// SecretReference names a Secret.
type SecretReference struct {
	Namespace string
	Name      string
}

// Verification says how an artifact's signature is checked.
type Verification struct {
	// PublicKey is the PEM public key (cosign.pub) a signature must be
	// made with.
	PublicKey string
}

// ConfigMapSource names a key of a ConfigMap. The module is read from
// binaryData (or data), raw or gzipped.
type ConfigMapSource struct {
	Namespace string
	Name      string
	Key       string
}

// VerdictReuse says whether a policy's verdict for one node may be given to
// another node that reads the same (docs/abi.md §3.4).
type VerdictReuse string

const (
	// VerdictReuseEnabled shares one evaluation among nodes whose declared
	// fields are equal.
	VerdictReuseEnabled VerdictReuse = "Enabled"
	// VerdictReuseDisabled evaluates every node.
	VerdictReuseDisabled VerdictReuse = "Disabled"
)

// Mode says whether a policy's verdicts are enforced.
type Mode string

const (
	// ModeEnforce applies the policy's rejections and scores.
	ModeEnforce Mode = "Enforce"
	// ModeAudit runs the policy and reports what it would have rejected or
	// scored (metrics, logs, Events on the pod) without filtering or scoring.
	ModeAudit Mode = "Audit"
)

// FailurePolicy says what happens when a policy call fails (trap, timeout,
// error status, no instance).
type FailurePolicy string

const (
	// FailurePolicyFail rejects the node (Filter) or fails the pod's scheduling attempt (Score).
	FailurePolicyFail FailurePolicy = "Fail"
	// FailurePolicyIgnore skips the call: the node passes (Filter) or gets 0 from this policy (Score).
	FailurePolicyIgnore FailurePolicy = "Ignore"
)

// CompileLimits bound a module's code, checked before compiling: wazero's
// compiler runs in the scheduler, and its memory grows with these
// (docs/security.md, compile limits). A zero field means the host's default.
type CompileLimits struct {
	// MaxFunctions bounds the functions a module defines.
	MaxFunctions int64
	// MaxCodeBytes bounds the total size of its function bodies.
	MaxCodeBytes int64
	// MaxLocals bounds the locals all its functions declare together.
	MaxLocals int64
}
