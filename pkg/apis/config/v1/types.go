package v1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// WasmPolicyArgs configures the WasmPolicy plugin.
type WasmPolicyArgs struct {
	metav1.TypeMeta `json:",inline"`

	// Policies run in the order given. Filter stops at the first policy that
	// rejects a node; Score combines the policies' scores by weight.
	Policies []Policy `json:"policies,omitempty"`
	// CompilationCacheDir keeps compiled machine code across restarts.
	// Default /var/cache/wasmsched; if it cannot be created the plugin logs a
	// warning and caches in memory only.
	CompilationCacheDir *string `json:"compilationCacheDir,omitempty"`
	// MaxInstancesPerPolicy bounds each policy's instance pool, i.e. how many
	// calls of one policy run at once. Default 16, the scheduler's default
	// parallelism; set it to your `parallelism`.
	MaxInstancesPerPolicy *int32 `json:"maxInstancesPerPolicy,omitempty"`
	// FilePollInterval is how often file sources are checked for a new
	// module. Default 1s.
	FilePollInterval *metav1.Duration `json:"filePollInterval,omitempty"`
	// CompileLimits bound what one module may ask the compiler to do; a
	// module over a limit is refused before compiling (load reason TooLarge).
	CompileLimits CompileLimits `json:"compileLimits,omitempty"`
	// CircuitBreaker stops calling a policy that keeps failing, for every
	// policy: its failurePolicy applies at once until a backoff ends.
	CircuitBreaker CircuitBreaker `json:"circuitBreaker,omitempty"`
	// MemoryBudget bounds the memory of all policies together: their
	// compiled code, the host heap of modules and instances, and linear
	// memory, as measured when they load and run. A module that does not
	// fit next to the loaded ones (with room for one running instance per
	// CPU) is refused (load reason MemoryBudget); the loaded policies keep
	// serving. Instances are created on demand within the budget; idle
	// ones are closed, least recently used policy first. Default 512Mi,
	// which leaves room for the scheduler in the deployment's 1Gi limit;
	// 0 means no budget.
	MemoryBudget *resource.Quantity `json:"memoryBudget,omitempty"`
	// PolicyObjects turns on policies from ClusterSchedulingPolicy and
	// SchedulingPolicy objects (policy.wasmsched.io), which teams create,
	// change and delete while the scheduler runs. Off by default, so a
	// scheduler that cannot reach the objects' API (the replace-default
	// static pod) runs from its args alone.
	PolicyObjects PolicyObjects `json:"policyObjects,omitempty"`
	// RetiredGrace is how long a replaced module version, or a replaced or
	// deleted policy object's policy, stays callable for the scheduling
	// cycles that started with it; then its instances and compiled code
	// are freed. Default 30s; at least 1s.
	RetiredGrace *metav1.Duration `json:"retiredGrace,omitempty"`
	// ModuleCacheDir keeps the modules pulled from OCI registries (oci
	// sources), by digest, with their signatures, so a scheduler that
	// restarts while its registry is down starts with its pinned policies.
	// Default /var/cache/wasmsched/oci; if it cannot be created the plugin
	// logs a warning and keeps nothing.
	ModuleCacheDir *string `json:"moduleCacheDir,omitempty"`
	// Objects are the kinds of objects policies may read, beyond the pods,
	// nodes, namespaces and volumes the scheduler itself watches: Leases,
	// DRA objects, any custom resource. Each kind is watched once, from
	// the first policy that declares it (policies[].objects) to the last,
	// and the scheduler's RBAC must let it get, list and watch the kind:
	// a policy declaring a kind it may not watch fails to load, with the
	// rule to grant in its status and Events. Default none.
	Objects []ObjectGrant `json:"objects,omitempty"`
}

// ObjectGrant lets policies read the objects of one kind.
type ObjectGrant struct {
	// APIVersion is the kind's group and version, such as
	// coordination.k8s.io/v1 ("v1" for the core group).
	APIVersion string `json:"apiVersion"`
	// Kind is the kind, such as Lease.
	Kind string `json:"kind"`
	// Resource is the kind's plural as RBAC and the API name it, such as
	// leases.
	Resource string `json:"resource"`
	// Namespaces limits the reads to the objects of these namespaces (a
	// namespaced kind). Default: all namespaces.
	Namespaces []string `json:"namespaces,omitempty"`
	// Fields limits the field paths policies may declare (objects[].fields)
	// to these and the fields under them. Default: any.
	Fields []string `json:"fields,omitempty"`
}

// TenantObjectGrant lets a namespace's policies read a kind the args
// grant (objects).
type TenantObjectGrant struct {
	// APIVersion and Kind name a kind of the args' objects.
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Namespaces are the namespaces, beyond the policy's own, whose
	// objects its policies may read. Default: only its own.
	Namespaces []string `json:"namespaces,omitempty"`
	// ClusterScoped lets its policies read the objects of a cluster-scoped
	// kind (such as DeviceClass): every object of the kind, since they
	// are no namespace's. Default false: a team reads namespaced objects
	// only.
	ClusterScoped bool `json:"clusterScoped,omitempty"`
}

// PolicyObjects configures policies from Kubernetes objects.
type PolicyObjects struct {
	// Enabled makes the plugin watch ClusterSchedulingPolicy and
	// SchedulingPolicy objects and run them next to the policies above.
	Enabled bool `json:"enabled,omitempty"`
	// StatusLease is the Lease that elects the one replica writing the
	// objects' status. Default kube-system/wasmsched-policy-status.
	StatusLease LeaseRef `json:"statusLease,omitempty"`
	// Tenants is what SchedulingPolicy objects, the policies teams own in
	// their namespaces, may set, read and spend. The defaults are small;
	// the operator raises them here, for every namespace or for named
	// ones. ClusterSchedulingPolicy objects and the policies above are
	// the operator's own and are not bound by it.
	Tenants Tenants `json:"tenants,omitempty"`
}

// Tenants bounds the namespaced policies (docs/security.md, Teams).
type Tenants struct {
	// Default applies to every namespace that no entry of namespaces
	// names.
	Default TenantLimits `json:"default,omitempty"`
	// Namespaces gives the namespaces it names their own limits: the first
	// entry naming a namespace applies, whole (a field it leaves unset
	// takes the built-in default, not default's).
	Namespaces []NamespaceTenantLimits `json:"namespaces,omitempty"`
	// MemoryBudget bounds the memory of all namespaced policies together,
	// out of memoryBudget; the rest is kept for the args' policies and
	// ClusterSchedulingPolicy objects, which teams can then never crowd
	// out. Default half of memoryBudget.
	MemoryBudget *resource.Quantity `json:"memoryBudget,omitempty"`
}

// NamespaceTenantLimits are the limits of the namespaces named.
type NamespaceTenantLimits struct {
	// Names are the namespaces these limits apply to.
	Names        []string `json:"names"`
	TenantLimits `json:",inline"`
}

// TenantLimits are the ceilings and grants of one namespace's policies. A
// SchedulingPolicy that sets more than a ceiling is refused (its
// Ready=False, reason Invalid, naming the field, the ceiling and this
// setting); one that leaves a setting unset gets the lesser of the
// setting's default and the ceiling.
type TenantLimits struct {
	// Reads are the reads (policies[].reads) its policies may declare.
	// Default none: a team's policy reads the pod being scheduled and the
	// node being evaluated only. Whatever is granted, what a namespaced
	// policy learns about other namespaces' pods is only counts
	// (docs/abi.md §4.0).
	Reads []string `json:"reads,omitempty"`
	// MaxTimeout bounds timeout. Default 50ms.
	MaxTimeout *metav1.Duration `json:"maxTimeout,omitempty"`
	// MaxCycleBudget bounds cycleBudget. Default 100ms.
	MaxCycleBudget *metav1.Duration `json:"maxCycleBudget,omitempty"`
	// MaxPreEnqueueTimeout bounds preEnqueueTimeout. Default 10ms.
	MaxPreEnqueueTimeout *metav1.Duration `json:"maxPreEnqueueTimeout,omitempty"`
	// MaxPermitWait bounds maxPermitWait: how long a namespace's policy
	// can keep a pod waiting, holding its node's resources. Default 1m.
	MaxPermitWait *metav1.Duration `json:"maxPermitWait,omitempty"`
	// MaxMemoryLimit bounds memoryLimit. Default 16Mi.
	MaxMemoryLimit *resource.Quantity `json:"maxMemoryLimit,omitempty"`
	// MaxStackLimit bounds stackLimit. Default 256Ki.
	MaxStackLimit *resource.Quantity `json:"maxStackLimit,omitempty"`
	// MaxWeight bounds weight. Default 1.
	MaxWeight *int32 `json:"maxWeight,omitempty"`
	// MaxPolicies bounds how many SchedulingPolicy objects of the
	// namespace run at once: each costs memory and, in a cycle, up to its
	// cycleBudget. One more is refused in its status until one is
	// deleted. Default 8.
	MaxPolicies *int32 `json:"maxPolicies,omitempty"`
	// AllowRealClock lets its policies set realClock. Default false.
	AllowRealClock *bool `json:"allowRealClock,omitempty"`
	// AllowRealRandom lets its policies set realRandom. Default false.
	AllowRealRandom *bool `json:"allowRealRandom,omitempty"`
	// PatchPrefixes are the prefixes its policies' patchPrefixes must
	// each start with. Default none: its policies may write nothing.
	PatchPrefixes []string `json:"patchPrefixes,omitempty"`
	// SchedulingTimePercent is the namespace's share of the scheduler's
	// time, in percent: the wall time its policies' calls take in
	// scheduling cycles (and PreBind) is counted against it over a
	// sliding second, and past it the namespace's pods wait, while other
	// namespaces' pods go on. Default 5.
	SchedulingTimePercent *int32 `json:"schedulingTimePercent,omitempty"`
	// PreEnqueueTimePercent is the namespace's share of wall time spent
	// in its policies' PreEnqueue gates, which kube-scheduler runs with its
	// queue locked, in percent. Default 1.
	PreEnqueueTimePercent *int32 `json:"preEnqueueTimePercent,omitempty"`
	// MemoryBudget is the namespace's slice of tenants.memoryBudget: its
	// policies' compiled code, host heap and linear memory together. A
	// load that does not fit is refused (MemoryBudget) and never closes
	// another namespace's or the operator's instances. Default 64Mi.
	MemoryBudget *resource.Quantity `json:"memoryBudget,omitempty"`
	// Objects are the kinds of the args' objects its policies may declare
	// (objects), and the namespaces they may read them in. Default none.
	Objects []TenantObjectGrant `json:"objects,omitempty"`
}

// LeaseRef names a coordination.k8s.io Lease.
type LeaseRef struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
}

// CircuitBreaker shapes each policy's circuit breaker (docs/security.md).
type CircuitBreaker struct {
	// FailureThreshold is how many distinct pods (distinct inputs: pods
	// of one template count once) must have failed the policy (timeout,
	// trap, exit, spent cycle budget) within a minute, more than twice
	// the pods it answered meanwhile, for the breaker to open: the policy
	// is broken for everyone. A pod the policy fails on is quarantined
	// first (docs/security.md), so a few failing pods never open it.
	// Default 3.
	FailureThreshold *int32 `json:"failureThreshold,omitempty"`
	// Backoff is how long the breaker stays open the first time; each failed
	// probe doubles it. Default 1s.
	Backoff *metav1.Duration `json:"backoff,omitempty"`
	// MaxBackoff caps the open period. Default 5m.
	MaxBackoff *metav1.Duration `json:"maxBackoff,omitempty"`
}

// Policy is one wasm policy.
type Policy struct {
	// Name identifies the policy in FailedScheduling reasons
	// ("WasmPolicy/<name>"), logs, events and metrics. Required, a DNS label.
	Name string `json:"name"`
	// Source is where the module comes from: exactly one of file,
	// configMap or oci.
	Source Source `json:"source"`
	// PolicySettings say how the policy runs. A SchedulingPolicy's and a
	// ClusterSchedulingPolicy's spec embed the same type, so the fields,
	// their defaults (SetDefaults_PolicySettings) and their validation are
	// the same in both.
	PolicySettings `json:",inline"`
	// Scope limits the pods the policy applies to; a pod outside it never
	// calls the policy.
	Scope Scope `json:"scope,omitempty"`
}

// PolicySettings are how a policy runs, whether the scheduler's args or a
// policy object declare it. The kubebuilder markers give the policy CRDs
// their schema (controller-gen); the args are checked by
// pkg/apis/config/validation, which also checks objects.
type PolicySettings struct {
	// SHA256 pins the module: hex sha256 of the .wasm bytes (before any
	// gzip). A module with another digest is refused (a policy object's
	// Ready=False, reason SHA256Mismatch) and the last good one keeps
	// serving.
	// +optional
	// +kubebuilder:validation:Pattern=`^(sha256:)?[0-9a-fA-F]{64}$`
	SHA256 string `json:"sha256,omitempty"`
	// Config is an opaque string handed to the guest (sdk.Config()).
	// +optional
	// +kubebuilder:validation:MaxLength=262144
	Config string `json:"config,omitempty"`
	// Weight of the policy's score among the plugin's policies. Default 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Weight *int32 `json:"weight,omitempty"`
	// Timeout bounds each call into the policy. Default 100ms, at most 10s.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('10s')",message="must be greater than 0 and at most 10s, for example 100ms"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// PreEnqueueTimeout bounds each call of the policy's PreEnqueue gate,
	// which kube-scheduler runs with its scheduling queue locked, so it is
	// tighter than timeout. Default 10ms (or the timeout, if shorter), at
	// most 1s.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('1s')",message="must be greater than 0 and at most 1s, for example 10ms"
	PreEnqueueTimeout *metav1.Duration `json:"preEnqueueTimeout,omitempty"`
	// MaxPermitWait bounds how long the policy's Permit may make a pod
	// wait before it is bound (a waiting pod holds its node's resources).
	// A permit asking for longer is the policy's error. Default 1m, at
	// most 15m (kube-scheduler's own bound).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('15m')",message="must be greater than 0 and at most 15m, for example 1m"
	MaxPermitWait *metav1.Duration `json:"maxPermitWait,omitempty"`
	// CycleBudget bounds the time the policy's calls may take in one pod's
	// scheduling cycle, from PreFilter to NormalizeScore; calls running in
	// parallel are charged once for the time they overlap. When a call
	// fails or the budget is spent, the policy is not called again in that
	// cycle and its failurePolicy applies to the nodes left. At least the
	// timeout, at most 1m. Default twice the timeout.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('1m')",message="must be greater than 0 and at most 1m, and at least the timeout"
	CycleBudget *metav1.Duration `json:"cycleBudget,omitempty"`
	// MemoryLimit caps each instance's linear memory. Default 64Mi.
	// +optional
	MemoryLimit *resource.Quantity `json:"memoryLimit,omitempty"`
	// StackLimit caps the call stack of each call, which lives outside
	// linear memory: a call whose calls nest deeper (unbounded recursion)
	// traps, as the policy's own failure. The memory budget keeps three
	// times it for each call that may run at once. Between 64Ki and 8Mi.
	// Default 256Ki.
	// +optional
	StackLimit *resource.Quantity `json:"stackLimit,omitempty"`
	// FailurePolicy is Fail (default: the node is rejected with the reason,
	// a Score failure fails the attempt) or Ignore (the call is skipped and
	// counted).
	// +optional
	// +kubebuilder:default=Fail
	// +kubebuilder:validation:Enum=Fail;Ignore
	FailurePolicy *string `json:"failurePolicy,omitempty"`
	// Mode is Enforce (default) or Audit: an audited policy runs and reports
	// what it would have rejected or scored (metrics, logs and Events on the
	// pod) but never filters a node or changes a score.
	// +optional
	// +kubebuilder:default=Enforce
	// +kubebuilder:validation:Enum=Enforce;Audit
	Mode *string `json:"mode,omitempty"`
	// VerdictReuse is Enabled (default) or Disabled. Enabled, nodes whose
	// declared fields are all equal (nodes of one pool) share one
	// evaluation, and a later pod of the same template takes the verdicts
	// remembered for the same rows: the verdict of a policy is a function
	// of what it reads (docs/abi.md §3.4). Disable it for a policy whose verdicts depend on
	// something else, such as state it keeps across calls and does not
	// declare with sdk.KeepsState.
	// +optional
	// +kubebuilder:default=Enabled
	// +kubebuilder:validation:Enum=Enabled;Disabled
	VerdictReuse *string `json:"verdictReuse,omitempty"`
	// RealClock gives the guest the host's clock; by default it sees a
	// deterministic clock.
	// +optional
	RealClock bool `json:"realClock,omitempty"`
	// RealRandom gives the guest crypto/rand; by default randomness is
	// deterministic.
	// +optional
	RealRandom bool `json:"realRandom,omitempty"`
	// Reads declares what the policy may read beyond the pod being
	// scheduled and the node being evaluated: NodePods (the pods on each
	// node, whatever their namespace, and the host ports they use),
	// WholeObjects (every field of the pod and the node), Cluster (every
	// node's name, labels and taints, and pod counts across the cluster),
	// Namespaces (namespace labels), Volumes (the pod's own
	// PersistentVolumeClaims with their bound volumes and storage
	// classes) and Devices (the pod's own ResourceClaims, and per node
	// the total and free devices of the classes they request). An
	// undeclared read returns -4 (NotDeclared) to the guest and is logged
	// once.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=6
	// +kubebuilder:validation:items:Enum=NodePods;WholeObjects;Cluster;Namespaces;Volumes;Devices
	Reads []string `json:"reads,omitempty"`
	// PatchPrefixes are the label and annotation key prefixes the policy's
	// PreBind may write on the pod being bound, such as
	// "team.example.com/" or "placement.example.com/zone-": a DNS
	// subdomain, '/', then an optional start of the name. Keys of the
	// kubernetes.io and k8s.io domains belong to Kubernetes and cannot be
	// allowed. Unset: the policy may write nothing.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=317
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[-A-Za-z0-9_.]*$`
	// +kubebuilder:validation:XValidation:rule="self.all(p, !p.matches('^([^/]*[.])?(kubernetes|k8s)[.]io/'))",message="kubernetes.io, k8s.io and their subdomains are domains of Kubernetes itself: a policy may not write their labels or annotations; use a domain of your own"
	PatchPrefixes []string `json:"patchPrefixes,omitempty"`
	// Objects are the objects the policy reads, each of a kind the
	// operator granted (objects in WasmPolicy's args), with the fields it
	// reads: a field path such as spec.renewTime or
	// metadata.labels[team.example.com/owner]. The policy pays for these
	// fields only; an object of a kind it did not declare cannot be read.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Objects []ObjectRead `json:"objects,omitempty"`
}

// ObjectRead is a policy's read of the objects of one granted kind.
type ObjectRead struct {
	// APIVersion is the kind's group and version, as granted.
	// +kubebuilder:validation:MaxLength=317
	APIVersion string `json:"apiVersion"`
	// Kind is the kind, as granted.
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// Fields are the field paths the policy reads, in the order the
	// records it gets hold them: names separated by dots, and [key] for a
	// map's key (spec.holderIdentity, metadata.labels[app]). A scalar
	// reads as text, anything else as compact JSON.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=256
	Fields []string `json:"fields"`
}

// Scope says which pods a policy applies to. Unset fields match every pod.
type Scope struct {
	// NamespaceSelector matches the labels of the pod's namespace.
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// PodSelector matches the pod's labels.
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`
	// Profiles are the scheduler profiles (their schedulerName) the policy
	// runs in.
	// +listType=set
	Profiles []string `json:"profiles,omitempty"`
}

// Source says where a module comes from.
type Source struct {
	// File is an absolute path on the scheduler's filesystem (hostPath or a mounted volume).
	File string `json:"file,omitempty"`
	// ConfigMap names a key of a ConfigMap; binaryData (or data) holds the
	// module, raw or gzipped.
	ConfigMap *ConfigMapSource `json:"configMap,omitempty"`
	// OCI names a module in an OCI registry: a wasm artifact (wasmsched
	// push oci://…), or an image of one layer holding plugin.wasm.
	OCI *OCISource `json:"oci,omitempty"`
}

// OCISource is a module in an OCI registry.
type OCISource struct {
	// Ref is registry/repository:tag@sha256:<digest of the manifest>, as
	// wasmsched push prints it. The digest pins the module: a reference
	// without one is refused unless followTag is set.
	Ref string `json:"ref"`
	// FollowTag follows ref's tag instead of pinning a digest: the tag is
	// resolved every pollInterval and each new digest is pulled, verified
	// and loaded; one that fails leaves the last good module serving. The
	// digest in use is logged and in the metric
	// wasmsched_policy_source_info. ref then has a tag and no digest.
	FollowTag bool `json:"followTag,omitempty"`
	// PollInterval is how often a followed tag is resolved. Default 1m;
	// at least 5s.
	PollInterval *metav1.Duration `json:"pollInterval,omitempty"`
	// PullSecret names a Secret of type kubernetes.io/dockerconfigjson
	// holding the registry's credentials, read at every pull (the
	// scheduler needs get on it). Unset: anonymous.
	PullSecret *SecretReference `json:"pullSecret,omitempty"`
	// CABundle is PEM certificates that the registry's certificate must
	// chain to, for a registry with a private CA. Unset: the system's.
	CABundle string `json:"caBundle,omitempty"`
	// Insecure allows plain HTTP and skips certificate checks: for test
	// registries only. Without it, plain HTTP is refused.
	Insecure bool `json:"insecure,omitempty"`
	// MaxSize bounds the module, checked against the manifest before
	// anything is downloaded. Default and most 32Mi, the largest module
	// the scheduler loads.
	MaxSize *resource.Quantity `json:"maxSize,omitempty"`
	// Timeout bounds one pull, every request included. Default 60s.
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// Verify, when set, requires a cosign signature (cosign sign --key,
	// or wasmsched push --sign-key) by this key; a module without one is
	// refused.
	Verify *Verification `json:"verify,omitempty"`
}

// SecretReference names a Secret.
type SecretReference struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// Verification says which key an artifact's signature must verify with.
type Verification struct {
	// PublicKey is a PEM public key (ECDSA, RSA or Ed25519; cosign.pub).
	PublicKey string `json:"publicKey"`
}

// ConfigMapSource names a ConfigMap key.
type ConfigMapSource struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Key       string `json:"key"`
}

// CompileLimits bound a module's code, checked before compiling.
type CompileLimits struct {
	// MaxFunctions bounds the functions a module defines (default 50000).
	MaxFunctions *int64 `json:"maxFunctions,omitempty"`
	// MaxCodeBytes bounds the total size of its function bodies (default 4Mi).
	MaxCodeBytes *resource.Quantity `json:"maxCodeBytes,omitempty"`
	// MaxLocals bounds the locals all its functions declare together
	// (default 1000000).
	MaxLocals *int64 `json:"maxLocals,omitempty"`
}
