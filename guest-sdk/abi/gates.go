package abi

// Gates and patches (ABI v3, docs/abi.md §3.3 and §4.7): preenqueue keeps a
// pod out of the scheduling queue, prebind records on the pod what the
// scheduler decided. Both are optional exports; a policy may implement only
// them, without filter or score.

// Guest exports of ABI v3.
const (
	// ExportPreEnqueue is `preenqueue(cycle i64)`: the pod only, before it
	// enters the scheduling queue.
	ExportPreEnqueue = "preenqueue"
	// ExportPreBind is `prebind(cycle i64)`: the pod and the node it is
	// about to be bound to.
	ExportPreBind = "prebind"
)

// Host functions of ABI v3.
const (
	// FnRecheckOn is `recheck_on(events i32, after_ms i32) -> i32`.
	FnRecheckOn = "recheck_on"
	// FnPatchLabel is `patch_label(key_ptr, key_len, value_ptr, value_len) -> i32`.
	FnPatchLabel = "patch_label"
	// FnPatchAnnotation is `patch_annotation(key_ptr, key_len, value_ptr, value_len) -> i32`.
	FnPatchAnnotation = "patch_annotation"
	// FnCyclePolicies is `cycle_policies(buf, cap) -> i32`.
	FnCyclePolicies = "cycle_policies"
)

// Return values of the patch functions besides 0, BadArgs and NotAvailable.
const (
	// NotAllowed means the key is outside the prefixes the policy's args
	// allow it to write (patchPrefixes) (-5).
	NotAllowed int32 = -5
	// TooLarge means the write would take the policy's patch for this pod
	// past MaxPatchKeys keys or MaxPatchBytes bytes (-6).
	TooLarge int32 = -6
)

// Bounds of one policy's patch of one pod: labels and annotations together.
const (
	MaxPatchKeys  = 64
	MaxPatchBytes = 16 << 10
)

// Events for recheck_on: what may lift a gate, so the scheduler checks the
// gated pod again when it happens.
const (
	// RecheckPodUpdate: the gated pod's own labels or annotations change.
	// It is what a gate checks again on when it calls no recheck_on.
	RecheckPodUpdate int32 = 1 << 0
	// RecheckPodsChange: another pod is bound, changes its labels, or is
	// deleted (a gate counting pods).
	RecheckPodsChange int32 = 1 << 1
	// RecheckNodesChange: a node is added, or its labels, taints,
	// annotations or allocatable resources change.
	RecheckNodesChange int32 = 1 << 2
	// RecheckAll is every event.
	RecheckAll = RecheckPodUpdate | RecheckPodsChange | RecheckNodesChange
)

// Bounds of recheck_on's after_ms: a shorter or longer delay is clamped.
const (
	MinRecheckAfterMillis = 1000
	MaxRecheckAfterMillis = 3600 * 1000
)

// The records of cycle_policies: name, sha256 (hex) of the module version
// the cycle pinned, and mode ("Enforce" or "Audit").
const CyclePolicyColumns = 3

// CheckPatchKey reports whether key may be written as a label (label
// true) or annotation by a policy allowed prefixes: 0, BadArgs for a key
// Kubernetes refuses, NotAllowed for a key under none of the prefixes. The
// host and the SDK's native backend share it, so a unit test sees what the
// scheduler answers.
func CheckPatchKey(key string, prefixes []string) int32 {
	if !QualifiedName(key) {
		return BadArgs
	}
	for _, p := range prefixes {
		if p != "" && len(key) > len(p) && key[:len(p)] == p {
			return 0
		}
	}
	return NotAllowed
}

// CheckLabelValue reports whether v is a valid label value: at most 63
// characters, empty or alphanumerics with '-', '_' or '.' inside.
func CheckLabelValue(v string) bool {
	return v == "" || len(v) <= 63 && namePart(v)
}

// QualifiedName reports whether s is a Kubernetes qualified name, what
// label and annotation keys must be: an optional DNS subdomain prefix and
// '/', then a name of at most 63 alphanumerics with '-', '_' or '.' inside.
func QualifiedName(s string) bool {
	name := s
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			if !DNSSubdomain(s[:i]) {
				return false
			}
			name = s[i+1:]
			break
		}
	}
	return name != "" && len(name) <= 63 && namePart(name)
}

// namePart checks [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?.
func namePart(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && ((i == 0 || i == len(s)-1) || c != '-' && c != '_' && c != '.') {
			return false
		}
	}
	return true
}

// DNSSubdomain reports whether s is a DNS-1123 subdomain: at most 253
// characters, dot-separated lowercase alphanumerics with '-' inside.
func DNSSubdomain(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != '.' {
			c := s[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
			continue
		}
		if i == start || s[start] == '-' || s[i-1] == '-' {
			return false
		}
		start = i + 1
	}
	return true
}

// Patch is one policy's patch of one pod as prebind builds it. The host
// and the SDK's native backend both keep it with Set, so the limits and
// checks are the same in a unit test as in the scheduler.
type Patch struct {
	Labels      map[string]string
	Annotations map[string]string
	// Bytes counts the keys and values set.
	Bytes int
}

// Len is how many keys the patch sets.
func (p *Patch) Len() int { return len(p.Labels) + len(p.Annotations) }

// Set records one write of a label (label true) or annotation and returns
// 0, or the code that refuses it (BadArgs, NotAllowed, TooLarge); a
// refused write changes nothing. Setting a key again replaces its value.
func (p *Patch) Set(label bool, key, value string, prefixes []string) int32 {
	if code := CheckPatchKey(key, prefixes); code != 0 {
		return code
	}
	if label && !CheckLabelValue(value) {
		return BadArgs
	}
	m := &p.Annotations
	if label {
		m = &p.Labels
	}
	old, replaced := (*m)[key]
	keys, size := p.Len()+1, p.Bytes+len(key)+len(value)
	if replaced {
		keys, size = keys-1, size-len(key)-len(old)
	}
	if keys > MaxPatchKeys || size > MaxPatchBytes {
		return TooLarge
	}
	if *m == nil {
		*m = map[string]string{}
	}
	(*m)[key] = value
	p.Bytes = size
	return 0
}
