// Package validation checks WasmPolicy args. Every error carries the field
// path and says how to fix the value, because the scheduler refuses to start
// on invalid args and the operator reads this message in a crash log.
package validation

import (
	"crypto/x509"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/wasmsched/wasmsched/guest-sdk/abi/fields"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
	"github.com/wasmsched/wasmsched/pkg/oci"
)

// Bounds enforced on args; docs/security.md explains them.
const (
	// MaxPolicies bounds the policies of one plugin. What bounds them in
	// practice is the memory budget (memoryBudget) and each scheduling
	// cycle calling every policy; this cap only catches a runaway config.
	MaxPolicies     = 1000
	MinMemoryBudget = 16 << 20
	MaxMemoryBudget = 1 << 40
	MaxTimeout      = 10 * time.Second
	MinMemoryLimit  = 64 << 10
	MaxMemoryLimit  = 4 << 30
	// A policy's stackLimit: host.MinStackLimitBytes..MaxStackLimitBytes.
	MinStackLimit         = 64 << 10
	MaxStackLimit         = 8 << 20
	MaxWeight             = 100
	MaxInstancesPerPolicy = 1024
	MaxConfigLength       = 256 << 10
	MaxCycleBudget        = time.Minute
	MaxFailureThreshold   = 1000
	MaxBreakerBackoff     = 24 * time.Hour
)

var sha256Re = regexp.MustCompile(`^(sha256:)?[0-9a-fA-F]{64}$`)

// ValidateWasmPolicyArgs validates args found at path (for example
// profiles[0].pluginConfig[1].args).
func ValidateWasmPolicyArgs(path *field.Path, args *config.WasmPolicyArgs) field.ErrorList {
	var errs field.ErrorList
	pp := path.Child("policies")
	if len(args.Policies) == 0 && !args.PolicyObjects.Enabled {
		errs = append(errs, field.Required(pp, "add at least one policy with a name and a source, or set policyObjects.enabled to run policies from ClusterSchedulingPolicy and SchedulingPolicy objects"))
	}
	if len(args.Policies) > MaxPolicies {
		errs = append(errs, &field.Error{Type: field.ErrorTypeTooMany, Field: pp.String(), BadValue: len(args.Policies),
			Detail: fmt.Sprintf("must have at most %d policies; merge policies that share a module into one policy with a richer config, or run them in another scheduler profile", MaxPolicies)})
	}
	seen := map[string]int{}
	for i := range args.Policies {
		p := &args.Policies[i]
		ip := pp.Index(i)
		errs = append(errs, ValidatePolicy(ip, p)...)
		errs = append(errs, ValidateObjectReads(ip.Child("objects"), p.Objects, args.Objects)...)
		if j, dup := seen[p.Name]; dup && p.Name != "" {
			errs = append(errs, field.Duplicate(ip.Child("name"), fmt.Sprintf("%s (also policies[%d].name): give each policy a unique name", p.Name, j)))
		}
		seen[p.Name] = i
	}
	if args.MaxInstancesPerPolicy < 1 || args.MaxInstancesPerPolicy > MaxInstancesPerPolicy {
		errs = append(errs, field.Invalid(path.Child("maxInstancesPerPolicy"), args.MaxInstancesPerPolicy, fmt.Sprintf("must be between 1 and %d; set it to the scheduler's parallelism (default 16)", MaxInstancesPerPolicy)))
	}
	if b := args.MemoryBudget; b != 0 && (b < MinMemoryBudget || b > MaxMemoryBudget) {
		errs = append(errs, field.Invalid(path.Child("memoryBudget"), b, "must be 0 (no budget) or between 16Mi and 1Ti, for example 512Mi; keep it below the scheduler container's memory limit minus what the scheduler itself uses (README, Operations: memory)"))
	}
	if args.FilePollInterval < 100*time.Millisecond || args.FilePollInterval > time.Hour {
		errs = append(errs, field.Invalid(path.Child("filePollInterval"), args.FilePollInterval.String(), "must be between 100ms and 1h, for example 1s"))
	}
	lp := path.Child("compileLimits")
	for _, l := range []struct {
		name     string
		v, limit int64
		example  string
	}{
		{"maxFunctions", args.CompileLimits.MaxFunctions, 1_000_000, "50000"},
		{"maxCodeBytes", args.CompileLimits.MaxCodeBytes, 32 << 20, "4Mi"},
		{"maxLocals", args.CompileLimits.MaxLocals, 10_000_000, "1000000"},
	} {
		// 0 (args built in Go without defaulting) means the host's default.
		if l.v < 0 || l.v > l.limit {
			errs = append(errs, field.Invalid(lp.Child(l.name), l.v, fmt.Sprintf("must be between 1 and %d, for example %s (unset: the default); a larger limit lets one module take more of the scheduler's memory while it compiles", l.limit, l.example)))
		}
	}
	bp, cb := path.Child("circuitBreaker"), args.CircuitBreaker
	// Zero fields (args built in Go without defaulting) mean the defaults.
	if cb.FailureThreshold < 0 || cb.FailureThreshold > MaxFailureThreshold {
		errs = append(errs, field.Invalid(bp.Child("failureThreshold"), cb.FailureThreshold, fmt.Sprintf("must be between 1 and %d, for example 3 (unset: 3)", MaxFailureThreshold)))
	}
	if cb.Backoff != 0 && (cb.Backoff < 100*time.Millisecond || cb.Backoff > time.Hour) {
		errs = append(errs, field.Invalid(bp.Child("backoff"), cb.Backoff.String(), "must be between 100ms and 1h, for example 1s (unset: 1s)"))
	}
	if cb.MaxBackoff != 0 && (cb.MaxBackoff < cb.Backoff || cb.MaxBackoff > MaxBreakerBackoff) {
		errs = append(errs, field.Invalid(bp.Child("maxBackoff"), cb.MaxBackoff.String(), fmt.Sprintf("must be at least backoff (%s) and at most %s, for example 5m (unset: 5m)", cb.Backoff, MaxBreakerBackoff)))
	}
	// 0 (args built in Go without defaulting) means the default.
	if g := args.RetiredGrace; g != 0 && (g < time.Second || g > time.Hour) {
		errs = append(errs, field.Invalid(path.Child("retiredGrace"), g.String(), "must be between 1s and 1h, for example 30s (unset: 30s); it must outlast a scheduling cycle"))
	}
	if po := args.PolicyObjects; po.Enabled {
		lp := path.Child("policyObjects", "statusLease")
		if msgs := validation.IsDNS1123Label(po.StatusLease.Namespace); len(msgs) > 0 {
			errs = append(errs, field.Invalid(lp.Child("namespace"), po.StatusLease.Namespace, "must be a namespace name, for example kube-system (the scheduler's namespace): "+strings.Join(msgs, "; ")))
		}
		if msgs := validation.IsDNS1123Subdomain(po.StatusLease.Name); len(msgs) > 0 {
			errs = append(errs, field.Invalid(lp.Child("name"), po.StatusLease.Name, "must be a Lease name, for example wasmsched-policy-status: "+strings.Join(msgs, "; ")))
		}
		errs = append(errs, validateTenants(path.Child("policyObjects", "tenants"), &po.Tenants, args.MemoryBudget, args.Objects)...)
	}
	errs = append(errs, validateObjectGrants(path.Child("objects"), args.Objects)...)
	if d := args.CompilationCacheDir; d != "" && !filepath.IsAbs(d) {
		errs = append(errs, field.Invalid(path.Child("compilationCacheDir"), d, "must be an absolute path, for example /var/cache/wasmsched"))
	}
	if d := args.ModuleCacheDir; d != "" && !filepath.IsAbs(d) {
		errs = append(errs, field.Invalid(path.Child("moduleCacheDir"), d, "must be an absolute path, for example /var/cache/wasmsched/oci"))
	}
	return errs
}

// MaxPreEnqueueTimeout bounds policies[].preEnqueueTimeout, and
// MaxPatchPrefixes the number of policies[].patchPrefixes.
const (
	MaxPreEnqueueTimeout = time.Second
	// MaxPermitWait bounds policies[].maxPermitWait and tenants'
	// maxPermitWait: kube-scheduler's bound on a Permit wait.
	MaxPermitWait    = 15 * time.Minute
	MaxPatchPrefixes = 16
)

// reservedDomains are the label and annotation domains of Kubernetes
// itself: a policy may not write keys there, nor under their subdomains
// (node-role.kubernetes.io/...).
var reservedDomains = []string{"kubernetes.io", "k8s.io"}

// validatePatchPrefixes checks each prefix is a DNS subdomain, '/', then
// the start of a name, outside the reserved domains.
func validatePatchPrefixes(path *field.Path, prefixes []string) field.ErrorList {
	var errs field.ErrorList
	if len(prefixes) > MaxPatchPrefixes {
		errs = append(errs, field.TooMany(path, len(prefixes), MaxPatchPrefixes))
	}
	seen := map[string]bool{}
	for i, pre := range prefixes {
		ip := path.Index(i)
		domain, name, ok := strings.Cut(pre, "/")
		switch {
		case !ok:
			errs = append(errs, field.Invalid(ip, pre, "must be a DNS subdomain followed by '/' and, optionally, the start of a name, for example team.example.com/"))
		case len(validation.IsDNS1123Subdomain(domain)) > 0:
			errs = append(errs, field.Invalid(ip, pre, "the part before '/' must be a DNS subdomain such as team.example.com: "+strings.Join(validation.IsDNS1123Subdomain(domain), "; ")))
		case name != "" && len(validation.IsQualifiedName(pre+"x")) > 0:
			errs = append(errs, field.Invalid(ip, pre, "the part after '/' must be the start of a label name: alphanumerics, '-', '_' or '.', starting with an alphanumeric"))
		case slices.ContainsFunc(reservedDomains, func(r string) bool { return domain == r || strings.HasSuffix(domain, "."+r) }):
			errs = append(errs, field.Forbidden(ip, fmt.Sprintf("%q is a domain of Kubernetes itself (kubernetes.io, k8s.io and their subdomains): a policy may not write its labels or annotations; use a domain of your own, for example placement.example.com/", domain)))
		case seen[pre]:
			errs = append(errs, field.Duplicate(ip, pre))
		}
		seen[pre] = true
	}
	return errs
}

// ValidatePolicy validates one policy found at path: a policy of the args,
// or the policy the plugin builds from a policy object (whose name is
// <namespace>/<name> for a namespaced SchedulingPolicy).
func ValidatePolicy(path *field.Path, p *config.Policy) field.ErrorList {
	var errs field.ErrorList
	name := p.Name
	if ns, n, ok := strings.Cut(p.Name, "/"); ok && ns == p.Scope.Namespace {
		name = n
	}
	if p.Name == "" {
		errs = append(errs, field.Required(path.Child("name"), "name the policy; it appears in FailedScheduling reasons as WasmPolicy/<name>"))
	} else if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		errs = append(errs, field.Invalid(path.Child("name"), p.Name, "must be a DNS label such as team-isolation: "+strings.Join(msgs, "; ")))
	}
	errs = append(errs, validateScope(path.Child("scope"), &p.Scope)...)
	sp := path.Child("source")
	switch {
	case sourceCount(p.Source) != 1:
		errs = append(errs, field.Invalid(sp, sourceString(p.Source), "exactly one of file, configMap or oci must be set"))
	case p.Source.OCI != nil:
		errs = append(errs, validateOCI(sp.Child("oci"), p.Source.OCI)...)
	case p.Source.File != "":
		if !filepath.IsAbs(p.Source.File) {
			errs = append(errs, field.Invalid(sp.Child("file"), p.Source.File, "must be an absolute path to a .wasm file (raw or gzipped), for example /etc/wasmsched/policies/team-isolation.wasm"))
		}
	default:
		cm := p.Source.ConfigMap
		cp := sp.Child("configMap")
		errs = append(errs, validateObjectRef(cp, cm.Namespace, cm.Name, "ConfigMap that holds the module")...)
		if cm.Key == "" {
			errs = append(errs, field.Required(cp.Child("key"), "set the binaryData key that holds the module, for example policy.wasm"))
		} else if msgs := validation.IsConfigMapKey(cm.Key); len(msgs) > 0 {
			errs = append(errs, field.Invalid(cp.Child("key"), cm.Key, strings.Join(msgs, "; ")))
		}
	}
	if p.SHA256 != "" && !sha256Re.MatchString(p.SHA256) {
		errs = append(errs, field.Invalid(path.Child("sha256"), p.SHA256, "must be 64 hex digits (the output of sha256sum policy.wasm), optionally prefixed with sha256:"))
	}
	if len(p.Config) > MaxConfigLength {
		errs = append(errs, field.TooLong(path.Child("config"), "", MaxConfigLength))
	}
	if p.Weight < 1 || p.Weight > MaxWeight {
		errs = append(errs, field.Invalid(path.Child("weight"), p.Weight, fmt.Sprintf("must be between 1 and %d (default 1)", MaxWeight)))
	}
	if p.Timeout <= 0 || p.Timeout > MaxTimeout {
		errs = append(errs, field.Invalid(path.Child("timeout"), p.Timeout.String(), fmt.Sprintf("must be greater than 0 and at most %s, for example 100ms", MaxTimeout)))
	}
	// 0 (args built in Go without defaulting) means the default.
	if t := p.PreEnqueueTimeout; t < 0 || t > MaxPreEnqueueTimeout {
		errs = append(errs, field.Invalid(path.Child("preEnqueueTimeout"), t.String(), fmt.Sprintf("must be at most %s, for example 10ms (unset: 10ms, or the timeout if shorter): kube-scheduler runs PreEnqueue with its scheduling queue locked", MaxPreEnqueueTimeout)))
	}
	// 0 (args built in Go without defaulting) means the default.
	if w := p.MaxPermitWait; w < 0 || w > MaxPermitWait {
		errs = append(errs, field.Invalid(path.Child("maxPermitWait"), w.String(), fmt.Sprintf("must be greater than 0 and at most %s, for example 1m (unset: 1m): kube-scheduler lets a pod wait at Permit no longer", MaxPermitWait)))
	}
	errs = append(errs, validatePatchPrefixes(path.Child("patchPrefixes"), p.PatchPrefixes)...)
	// 0 (args built in Go without defaulting) means twice the timeout.
	if b := p.CycleBudget; b != 0 && (b < p.Timeout || b > MaxCycleBudget) {
		errs = append(errs, field.Invalid(path.Child("cycleBudget"), b.String(), fmt.Sprintf("must be at least the timeout (%s) and at most %s, for example %s (unset: twice the timeout)", p.Timeout, MaxCycleBudget, 2*p.Timeout)))
	}
	if p.MemoryLimit < MinMemoryLimit || p.MemoryLimit > MaxMemoryLimit {
		errs = append(errs, field.Invalid(path.Child("memoryLimit"), p.MemoryLimit, "must be between 64Ki and 4Gi, for example 64Mi (Go guests need at least 4Mi)"))
	}
	// 0 (args built in Go without defaulting) means the default.
	if s := p.StackLimit; s != 0 && (s < MinStackLimit || s > MaxStackLimit) {
		errs = append(errs, field.Invalid(path.Child("stackLimit"), s, "must be between 64Ki and 8Mi, for example 256Ki (unset: 256Ki); the example policies' calls use under 20Ki"))
	}
	switch p.FailurePolicy {
	case config.FailurePolicyFail, config.FailurePolicyIgnore:
	default:
		errs = append(errs, field.NotSupported(path.Child("failurePolicy"), p.FailurePolicy, []string{string(config.FailurePolicyFail), string(config.FailurePolicyIgnore)}))
	}
	switch p.Mode {
	case "", config.ModeEnforce, config.ModeAudit: // "" is Enforce
	default:
		errs = append(errs, field.NotSupported(path.Child("mode"), p.Mode, []string{string(config.ModeEnforce), string(config.ModeAudit)}))
	}
	switch p.VerdictReuse {
	case "", config.VerdictReuseEnabled, config.VerdictReuseDisabled: // "" is Enabled
	default:
		errs = append(errs, field.NotSupported(path.Child("verdictReuse"), p.VerdictReuse, []string{string(config.VerdictReuseEnabled), string(config.VerdictReuseDisabled)}))
	}
	scopes := make([]string, len(fields.Scopes))
	for i, sc := range fields.Scopes {
		scopes[i] = string(sc)
	}
	seen := map[string]bool{}
	for i, r := range p.Reads {
		switch {
		case !slices.Contains(scopes, r):
			errs = append(errs, field.NotSupported(path.Child("reads").Index(i), r, scopes))
		case seen[r]:
			errs = append(errs, field.Duplicate(path.Child("reads").Index(i), r))
		}
		seen[r] = true
	}
	return errs
}

func sourceCount(s config.Source) int {
	n := 0
	for _, set := range []bool{s.File != "", s.ConfigMap != nil, s.OCI != nil} {
		if set {
			n++
		}
	}
	return n
}

func sourceString(s config.Source) string {
	var set []string
	for _, f := range []struct {
		name string
		set  bool
	}{{"file", s.File != ""}, {"configMap", s.ConfigMap != nil}, {"oci", s.OCI != nil}} {
		if f.set {
			set = append(set, f.name)
		}
	}
	return "{" + strings.Join(set, ", ") + "}"
}

// validateObjectRef checks the namespace and name of an object a source
// names (what: the object, for the messages).
func validateObjectRef(path *field.Path, namespace, name, what string) field.ErrorList {
	var errs field.ErrorList
	if namespace == "" {
		errs = append(errs, field.Required(path.Child("namespace"), "set the namespace of the "+what))
	} else if msgs := validation.IsDNS1123Label(namespace); len(msgs) > 0 {
		errs = append(errs, field.Invalid(path.Child("namespace"), namespace, strings.Join(msgs, "; ")))
	}
	if name == "" {
		errs = append(errs, field.Required(path.Child("name"), "set the name of the "+what))
	} else if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		errs = append(errs, field.Invalid(path.Child("name"), name, strings.Join(msgs, "; ")))
	}
	return errs
}

// Bounds of an oci source's fields.
const (
	MinOCIPollInterval = 5 * time.Second
	MaxOCIPollInterval = 24 * time.Hour
	MaxOCIMaxSize      = 32 << 20 // host.MaxModuleSize: a larger module would be refused after its download
	MaxOCITimeout      = 10 * time.Minute
)

// validateOCI checks an oci source; 0 in a duration or size (args built
// in Go without defaulting) means the default.
func validateOCI(path *field.Path, o *config.OCISource) field.ErrorList {
	var errs field.ErrorList
	rp := path.Child("ref")
	if o.Ref == "" {
		errs = append(errs, field.Required(rp, "set the artifact's reference, registry/repository:tag@sha256:<digest>, as wasmsched push prints it"))
	} else if ref, err := oci.ParseReference(o.Ref); err != nil {
		errs = append(errs, field.Invalid(rp, o.Ref, "not a registry reference ("+err.Error()+"); write registry.example.com/policies/name:tag@sha256:<digest>"))
	} else {
		_, pinned := oci.PinnedDigest(ref)
		switch {
		case strings.HasPrefix(o.Ref, "oci://"):
			errs = append(errs, field.Invalid(rp, o.Ref, "write the reference without oci://"))
		case !o.FollowTag && !pinned:
			errs = append(errs, field.Invalid(rp, o.Ref, "pins no digest: append @sha256:<manifest digest> (wasmsched push prints the reference with it), or set followTag: true to follow the tag"))
		case o.FollowTag && pinned:
			errs = append(errs, field.Invalid(rp, o.Ref, "followTag follows a tag: remove the digest, or unset followTag to pin it"))
		case o.FollowTag && !strings.Contains(o.Ref[strings.LastIndex(o.Ref, "/")+1:], ":"):
			errs = append(errs, field.Invalid(rp, o.Ref, "followTag needs a tag to follow, for example :stable"))
		}
	}
	if t := o.PollInterval; t != 0 && (t < MinOCIPollInterval || t > MaxOCIPollInterval) {
		errs = append(errs, field.Invalid(path.Child("pollInterval"), t.String(), fmt.Sprintf("must be between %s and %s, for example 1m", MinOCIPollInterval, MaxOCIPollInterval)))
	}
	if s := o.PullSecret; s != nil {
		errs = append(errs, validateObjectRef(path.Child("pullSecret"), s.Namespace, s.Name, "kubernetes.io/dockerconfigjson Secret")...)
	}
	if o.CABundle != "" && !x509.NewCertPool().AppendCertsFromPEM([]byte(o.CABundle)) {
		errs = append(errs, field.Invalid(path.Child("caBundle"), "(PEM)", "holds no PEM certificate; paste the registry CA's certificate, -----BEGIN CERTIFICATE----- included"))
	}
	if o.MaxSize < 0 || o.MaxSize > MaxOCIMaxSize {
		errs = append(errs, field.Invalid(path.Child("maxSize"), o.MaxSize, "must be greater than 0 and at most 32Mi, the largest module the scheduler loads, for example 8Mi"))
	}
	if o.Timeout < 0 || o.Timeout > MaxOCITimeout {
		errs = append(errs, field.Invalid(path.Child("timeout"), o.Timeout.String(), fmt.Sprintf("must be greater than 0 and at most %s, for example 60s", MaxOCITimeout)))
	}
	if v := o.Verify; v != nil {
		if _, err := oci.LoadVerifier([]byte(v.PublicKey)); err != nil {
			errs = append(errs, field.Invalid(path.Child("verify", "publicKey"), "(PEM)", err.Error()+"; paste the signer's public key (cosign.pub), -----BEGIN PUBLIC KEY----- included"))
		}
	}
	return errs
}

func validateScope(path *field.Path, sc *config.Scope) field.ErrorList {
	var errs field.ErrorList
	opts := metav1validation.LabelSelectorValidationOptions{}
	if sc.NamespaceSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(sc.NamespaceSelector, opts, path.Child("namespaceSelector"))...)
	}
	if sc.PodSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(sc.PodSelector, opts, path.Child("podSelector"))...)
	}
	seen := map[string]bool{}
	for i, pr := range sc.Profiles {
		switch msgs := validation.IsDNS1123Subdomain(pr); {
		case len(msgs) > 0:
			errs = append(errs, field.Invalid(path.Child("profiles").Index(i), pr, "must be a profile's schedulerName, for example default-scheduler: "+strings.Join(msgs, "; ")))
		case seen[pr]:
			errs = append(errs, field.Duplicate(path.Child("profiles").Index(i), pr))
		}
		seen[pr] = true
	}
	return errs
}
