package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
)

// ClusterSchedulingPolicy is a policy the cluster's operators ship: it may
// take its module from a file on the scheduler's host or from a ConfigMap in
// any namespace the scheduler can read, and may apply to pods of every
// namespace.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=csp,categories=wasmsched
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="SHA256",type=string,JSONPath=`.status.activeSHA256`
// +kubebuilder:printcolumn:name="Canary",type=string,JSONPath=`.status.canary.phase`
// +kubebuilder:printcolumn:name="Changed",type=string,JSONPath=`.status.canary.changedPercent`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterSchedulingPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ClusterSchedulingPolicySpec `json:"spec"`
	Status SchedulingPolicyStatus      `json:"status,omitempty"`
}

// ClusterSchedulingPolicySpec is what a cluster policy runs and where.
//
// +kubebuilder:validation:XValidation:rule="!has(self.source.configMap) || has(self.source.configMap.__namespace__)",message="source.configMap.namespace is required in a ClusterSchedulingPolicy: name the namespace of the ConfigMap that holds the module",fieldPath=".source.configMap"
// +kubebuilder:validation:XValidation:rule="!has(self.canary) || !has(self.canary.source) || !has(self.canary.source.configMap) || has(self.canary.source.configMap.__namespace__)",message="canary.source.configMap.namespace is required in a ClusterSchedulingPolicy: name the namespace of the ConfigMap that holds the candidate's module",fieldPath=".canary.source.configMap"
type ClusterSchedulingPolicySpec struct {
	// Source is where the module comes from: exactly one of file (a path on
	// the scheduler's host), configMap or oci.
	Source Source `json:"source"`

	configv1.PolicySettings `json:",inline"`

	// NamespaceSelector limits the policy to pods in namespaces whose labels
	// match. Unset: every namespace.
	// +optional
	NamespaceSelector *LabelSelector `json:"namespaceSelector,omitempty"`

	PolicyScope `json:",inline"`

	// Canary is a candidate version that runs beside this one, in Audit,
	// until its rule promotes it or drops it.
	// +optional
	Canary *Canary `json:"canary,omitempty"`
}

// ClusterSchedulingPolicyList is a list of ClusterSchedulingPolicy.
//
// +kubebuilder:object:root=true
type ClusterSchedulingPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterSchedulingPolicy `json:"items"`
}

// SchedulingPolicy is a policy a team ships for the pods of its own
// namespace. It applies to no other pods, and takes its module only from a
// ConfigMap in its own namespace.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=sp,categories=wasmsched
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="SHA256",type=string,JSONPath=`.status.activeSHA256`
// +kubebuilder:printcolumn:name="Canary",type=string,JSONPath=`.status.canary.phase`
// +kubebuilder:printcolumn:name="Changed",type=string,JSONPath=`.status.canary.changedPercent`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SchedulingPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SchedulingPolicySpec   `json:"spec"`
	Status SchedulingPolicyStatus `json:"status,omitempty"`
}

// SchedulingPolicySpec is what a namespaced policy runs and for which of its
// namespace's pods.
//
// +kubebuilder:validation:XValidation:rule="!has(self.source.file)",message="a SchedulingPolicy takes its module from a ConfigMap in its own namespace (source.configMap); file sources are for ClusterSchedulingPolicy",fieldPath=".source.file"
// +kubebuilder:validation:XValidation:rule="!has(self.canary) || !has(self.canary.source) || !has(self.canary.source.file)",message="a SchedulingPolicy's canary takes its module from a ConfigMap in its own namespace (canary.source.configMap) or from oci; file sources are for ClusterSchedulingPolicy",fieldPath=".canary.source.file"
type SchedulingPolicySpec struct {
	// Source is where the module comes from: a configMap in the policy's
	// own namespace (namespace may be left out), or oci (a pull secret,
	// if any, in the policy's own namespace).
	Source Source `json:"source"`

	configv1.PolicySettings `json:",inline"`
	PolicyScope             `json:",inline"`

	// Canary is a candidate version that runs beside this one, in Audit,
	// until its rule promotes it or drops it.
	// +optional
	Canary *Canary `json:"canary,omitempty"`
}

// SchedulingPolicyList is a list of SchedulingPolicy.
//
// +kubebuilder:object:root=true
type SchedulingPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SchedulingPolicy `json:"items"`
}

// Canary is a candidate version of the policy. It runs beside the
// enforcing version, in Audit, on the same pods; every scheduling cycle
// compares their verdicts. When the rule holds, the scheduler promotes it:
// the spec takes its source, sha256 and config (the version it replaces is
// kept in status.previous, for wasmsched rollback). When the rule breaks,
// the scheduler drops it and says why in status.canary.
type Canary struct {
	// Source of the candidate's module, with the rules of spec.source.
	// Unset: spec.source (a new config or pin alone).
	// +optional
	Source *Source `json:"source,omitempty"`
	// SHA256 pins the candidate's module.
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	SHA256 string `json:"sha256,omitempty"`
	// Config is the candidate's config string. Unset: spec.config.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	Config *string `json:"config,omitempty"`
	// Rule decides when the candidate is promoted or dropped.
	// +optional
	Rule CanaryRule `json:"rule,omitempty"`
}

// CanaryRule says when a candidate is promoted (every bound holds, for at
// least minCycles judged cycles and the time in for) and when it is
// dropped (maxRejectedRunning is passed, or maxChangedPercent once
// minCycles are judged).
type CanaryRule struct {
	// MinCycles is how many scheduling cycles the candidate must judge
	// (cycles of pods in the policy's scope) before it may be promoted.
	// Default 1000.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000000
	MinCycles int64 `json:"minCycles,omitempty"`
	// For is how long the candidate runs, at least, before it may be
	// promoted. Default 10m.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('720h')",message="must be between 0s and 720h"
	For *metav1.Duration `json:"for,omitempty"`
	// MaxRejectedRunning bounds the pods bound during the canary to a node
	// the candidate rejects: pods that would run where the candidate
	// forbids it. One more drops the candidate. Default 0.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxRejectedRunning int64 `json:"maxRejectedRunning,omitempty"`
	// MaxChangedPercent bounds the share of judged cycles in which the
	// candidate's verdict differs from the enforcing version's on some
	// node, in percent ("1", "0.5"). Default "1".
	// +optional
	// +kubebuilder:validation:Pattern=`^(100|[0-9]{1,2})(\.[0-9]{1,3})?$`
	MaxChangedPercent string `json:"maxChangedPercent,omitempty"`
}

// Canary phases (status.canary.phase).
const (
	CanaryLoading   = "Loading"
	CanaryObserving = "Observing"
	CanaryPromoted  = "Promoted"
	CanaryDropped   = "Dropped"
)

// CanaryStatus is how the spec's canary is doing.
type CanaryStatus struct {
	// Phase is Loading, Observing, Promoted or Dropped.
	Phase string `json:"phase"`
	// Spec identifies the canary spec this status is about (a digest of
	// spec.canary): a dropped canary is not started again until it changes.
	Spec string `json:"spec"`
	// SHA256 is the candidate's module ("" while it loads).
	// +optional
	SHA256 string `json:"sha256,omitempty"`
	// StartedAt is when the candidate started judging cycles.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// Cycles is how many scheduling cycles it judged; ChangedCycles how
	// many of them had a node (or the pod) where its verdict differed from
	// the enforcing version's; RejectedRunning how many pods were bound to
	// a node it rejects; Unblocked how many pods found no node while it
	// would have admitted one the enforcing version rejected; FailedCycles
	// how many of the changed cycles were the candidate's failures (a
	// failed call, its open breaker, no module), which count against it.
	Cycles          int64 `json:"cycles"`
	ChangedCycles   int64 `json:"changedCycles"`
	RejectedRunning int64 `json:"rejectedRunning"`
	Unblocked       int64 `json:"unblocked"`
	FailedCycles    int64 `json:"failedCycles"`
	// ChangedPercent is ChangedCycles of Cycles, in percent.
	ChangedPercent string `json:"changedPercent"`
	// LastExamples are the latest disagreements, newest first (at most 5).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=5
	LastExamples []string `json:"lastExamples,omitempty"`
	// Reason says what the rule waits for, why the candidate was dropped,
	// or that it was promoted.
	// +optional
	Reason string `json:"reason,omitempty"`
}

// PolicyVersion is one version of a policy: its module and config.
type PolicyVersion struct {
	Source Source `json:"source"`
	// +optional
	SHA256 string `json:"sha256,omitempty"`
	// +optional
	Config string `json:"config,omitempty"`
	// ReplacedAt is when a promotion replaced it.
	ReplacedAt metav1.Time `json:"replacedAt"`
}

// Source says where a module comes from: exactly one field is set.
//
// +kubebuilder:validation:XValidation:rule="[has(self.file), has(self.configMap), has(self.oci)].filter(x, x).size() == 1",message="set exactly one of file, configMap or oci"
type Source struct {
	// File is an absolute path on the scheduler's host (hostPath or a
	// mounted volume). ClusterSchedulingPolicy only.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:Pattern=`^/`
	File string `json:"file,omitempty"`
	// ConfigMap names a key of a ConfigMap whose binaryData (or data) holds
	// the module, raw or gzipped.
	// +optional
	ConfigMap *ConfigMapSource `json:"configMap,omitempty"`
	// OCI names a module in an OCI registry: a wasm artifact (wasmsched
	// push oci://…), or an image of one layer holding plugin.wasm.
	// +optional
	OCI *OCISource `json:"oci,omitempty"`
}

// OCISource is a module in an OCI registry; each field has the meaning and
// default of the field of the same name in the WasmPolicy args (README,
// args reference).
//
// +kubebuilder:validation:XValidation:rule="self.followTag == true ? !self.ref.contains('@') : self.ref.contains('@sha256:')",message="ref must pin a digest (registry/repository:tag@sha256:…), or set followTag and give a tag without a digest"
type OCISource struct {
	// Ref is registry/repository:tag@sha256:<manifest digest>.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Ref string `json:"ref"`
	// FollowTag follows ref's tag instead of pinning a digest.
	// +optional
	// +kubebuilder:default=false
	FollowTag bool `json:"followTag"`
	// PollInterval is how often a followed tag is resolved. Default 1m.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('5s') && duration(self) <= duration('24h')",message="must be between 5s and 24h"
	PollInterval *metav1.Duration `json:"pollInterval,omitempty"`
	// PullSecret names a kubernetes.io/dockerconfigjson Secret with the
	// registry's credentials. In a SchedulingPolicy it may only be in the
	// policy's own namespace.
	// +optional
	PullSecret *SecretReference `json:"pullSecret,omitempty"`
	// CABundle is PEM certificates the registry's certificate must chain to.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	CABundle string `json:"caBundle,omitempty"`
	// Insecure allows plain HTTP and skips certificate checks.
	// ClusterSchedulingPolicy only.
	// +optional
	Insecure bool `json:"insecure,omitempty"`
	// MaxSize bounds the module, checked before it is downloaded. Default
	// and most 32Mi.
	// +optional
	MaxSize *resource.Quantity `json:"maxSize,omitempty"`
	// Timeout bounds one pull. Default 60s.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('10m')",message="must be greater than 0 and at most 10m"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// Verify requires a cosign signature by a key.
	// +optional
	Verify *Verification `json:"verify,omitempty"`
}

// SecretReference names a Secret.
type SecretReference struct {
	// Namespace of the Secret. Required in a ClusterSchedulingPolicy; in a
	// SchedulingPolicy it may only be the policy's own namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// Verification says which key an artifact's signature must verify with.
type Verification struct {
	// PublicKey is a PEM public key (ECDSA, RSA or Ed25519; cosign.pub).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=16384
	PublicKey string `json:"publicKey"`
}

// ConfigMapSource names a key of a ConfigMap.
type ConfigMapSource struct {
	// Namespace of the ConfigMap. Required in a ClusterSchedulingPolicy; in
	// a SchedulingPolicy it may only be the policy's own namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Label().validate(self).hasValue()",message="must be a namespace name (a DNS label)"
	Namespace string `json:"namespace,omitempty"`
	// Name of the ConfigMap.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Subdomain().validate(self).hasValue()",message="must be a ConfigMap name (a DNS subdomain)"
	Name string `json:"name"`
	// Key of binaryData (or data) that holds the module, for example policy.wasm.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// PolicyScope says which pods a policy applies to. A pod outside its scope
// never calls the policy.
type PolicyScope struct {
	// PodSelector limits the policy to pods whose labels match. Unset: every pod.
	// +optional
	PodSelector *LabelSelector `json:"podSelector,omitempty"`
	// Profiles limits the policy to the named scheduler profiles
	// (schedulerName). Unset: every profile that enables WasmPolicy.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	Profiles []string `json:"profiles,omitempty"`
}

// LabelSelector selects by labels, as metav1.LabelSelector does and with
// the same JSON, but bounded: the apiserver checks its keys, operators and
// values when the object is applied, which its CEL rules can only do within
// a cost budget, that is, on bounded lists and strings.
//
// +structType=atomic
type LabelSelector struct {
	// MatchLabels are label key/value pairs that must all match.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.size() <= 317 && !format.qualifiedName().validate(k).hasValue())",message="matchLabels keys must be label keys: an optional DNS-subdomain prefix and '/', then a name of at most 63 characters, alphanumeric at both ends"
	MatchLabels map[string]LabelValue `json:"matchLabels,omitempty"`
	// MatchExpressions are label requirements that must all match.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// LabelValue is a label value: at most 63 characters, alphanumeric at
// both ends, with '-', '_' and '.' between.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
type LabelValue string

// LabelSelectorRequirement is one requirement of a LabelSelector.
//
// +kubebuilder:validation:XValidation:rule="(self.operator in ['In', 'NotIn']) == (has(self.values) && size(self.values) > 0)",message="In and NotIn need values; Exists and DoesNotExist take none"
type LabelSelectorRequirement struct {
	// Key is the label key.
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="!format.qualifiedName().validate(self).hasValue()",message="must be a label key: an optional DNS-subdomain prefix and '/', then a name of at most 63 characters, alphanumeric at both ends"
	Key string `json:"key"`
	// Operator is In, NotIn, Exists or DoesNotExist.
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
	Operator metav1.LabelSelectorOperator `json:"operator"`
	// Values for In and NotIn.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Values []LabelValue `json:"values,omitempty"`
}

// AsMeta returns the selector as a metav1.LabelSelector; nil stays nil.
func (s *LabelSelector) AsMeta() *metav1.LabelSelector {
	if s == nil {
		return nil
	}
	out := &metav1.LabelSelector{}
	if s.MatchLabels != nil {
		out.MatchLabels = make(map[string]string, len(s.MatchLabels))
		for k, v := range s.MatchLabels {
			out.MatchLabels[k] = string(v)
		}
	}
	for _, r := range s.MatchExpressions {
		req := metav1.LabelSelectorRequirement{Key: r.Key, Operator: r.Operator}
		for _, v := range r.Values {
			req.Values = append(req.Values, string(v))
		}
		out.MatchExpressions = append(out.MatchExpressions, req)
	}
	return out
}

// SchedulingPolicyStatus is what the scheduler reports about a policy. Only
// the replica holding the status lease writes it.
type SchedulingPolicyStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// ActiveSHA256 is the digest of the module serving now ("" before one loads).
	// +optional
	ActiveSHA256 string `json:"activeSHA256,omitempty"`
	// Conditions: Ready (True when the spec's module serves; reasons
	// Loaded, SHA256Mismatch, CompileError, SourceMissing, InvalidSpec,
	// Loading, NotInProfile).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastError is the last load or validation error ("" after a success).
	// +optional
	LastError string `json:"lastError,omitempty"`
	// Canary is how spec.canary is doing (absent without one, until it is
	// promoted or dropped).
	// +optional
	Canary *CanaryStatus `json:"canary,omitempty"`
	// Previous is the version the last promotion replaced: `wasmsched
	// rollback` makes it the spec's again.
	// +optional
	Previous *PolicyVersion `json:"previous,omitempty"`
}

// Condition types and reasons of SchedulingPolicyStatus.
const (
	ConditionReady = "Ready"

	ReasonLoaded         = "Loaded"
	ReasonLoading        = "Loading"
	ReasonSHA256Mismatch = "SHA256Mismatch"
	ReasonCompileError   = "CompileError"
	ReasonSourceMissing  = "SourceMissing"
	ReasonInvalidSpec    = "InvalidSpec"
	// Reasons of an oci source that could not be pulled or trusted.
	ReasonNotFound         = "NotFound"
	ReasonUnauthorized     = "Unauthorized"
	ReasonTooLarge         = "TooLarge"
	ReasonSignatureInvalid = "SignatureInvalid"
	ReasonDigestMismatch   = "DigestMismatch"
)
