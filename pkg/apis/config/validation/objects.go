package validation

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
	"github.com/wasmsched/wasmsched/pkg/objectpath"
)

// Bounds of object grants and reads (docs/security.md).
const (
	MaxObjectGrants    = 32
	MaxObjectReads     = 16
	MaxObjectFields    = 32
	MaxGrantNamespaces = 64
)

// versionPattern is an API version's spelling: v1, v1beta2, v2alpha1.
var versionPattern = regexp.MustCompile(`^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$`)

// kindPattern is a Kind's spelling: UpperCamelCase, up to 63 bytes.
var kindPattern = regexp.MustCompile(`^[A-Z][A-Za-z0-9]{0,62}$`)

// deniedKinds are kinds no grant may name: what a policy reads can reach
// pods' events and conditions through its reasons, and these hold
// credentials.
var deniedKinds = map[schema.GroupKind]string{
	{Group: "", Kind: "Secret"}:                                       "Secrets hold credentials, and a policy's reasons reach pods' events",
	{Group: "", Kind: "ServiceAccount"}:                               "ServiceAccounts name the credentials of workloads",
	{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}: "CertificateSigningRequests carry credentials",
}

// deniedResources are the resources of deniedKinds, by group: a grant
// names the resource RBAC and the watch use, which need not be its kind's.
var deniedResources = map[schema.GroupResource]string{
	{Group: "", Resource: "secrets"}:                                       "Secrets hold credentials, and a policy's reasons reach pods' events",
	{Group: "", Resource: "serviceaccounts"}:                               "ServiceAccounts name the credentials of workloads",
	{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}: "CertificateSigningRequests carry credentials",
}

// grantString is a grant as the args would spell it, for the fixes the
// messages suggest.
func grantString(apiVersion, kind, resource string) string {
	if resource == "" {
		resource = "<plural>"
	}
	return fmt.Sprintf("{apiVersion: %s, kind: %s, resource: %s}", apiVersion, kind, resource)
}

// validateObjectGrants checks the args' objects.
func validateObjectGrants(path *field.Path, grants []config.ObjectGrant) field.ErrorList {
	var errs field.ErrorList
	if len(grants) > MaxObjectGrants {
		errs = append(errs, field.TooMany(path, len(grants), MaxObjectGrants))
	}
	seen := map[schema.GroupKind]int{}
	for i := range grants {
		g := &grants[i]
		ip := path.Index(i)
		gv, err := schema.ParseGroupVersion(g.APIVersion)
		if err != nil || !versionPattern.MatchString(gv.Version) {
			errs = append(errs, field.Invalid(ip.Child("apiVersion"), g.APIVersion, "must be group/version, such as coordination.k8s.io/v1, or v1 for the core group"))
		}
		if !kindPattern.MatchString(g.Kind) {
			errs = append(errs, field.Invalid(ip.Child("kind"), g.Kind, "must be a kind as the API spells it, such as Lease"))
		}
		if msgs := validation.IsDNS1123Label(g.Resource); len(msgs) > 0 {
			errs = append(errs, field.Invalid(ip.Child("resource"), g.Resource, fmt.Sprintf("must be the kind's plural as RBAC names it, such as leases (kubectl api-resources lists it): %s", strings.Join(msgs, "; "))))
		}
		gk := schema.GroupKind{Group: gv.Group, Kind: g.Kind}
		why, denied := deniedKinds[gk]
		if !denied {
			why, denied = deniedResources[schema.GroupResource{Group: gv.Group, Resource: g.Resource}]
		}
		if denied {
			errs = append(errs, field.Forbidden(ip, fmt.Sprintf("%s (%s) may not be granted: %s; give policies what they need in another kind (a ConfigMap, a custom resource)", g.Kind, g.Resource, why)))
		}
		if j, dup := seen[gk]; dup {
			errs = append(errs, field.Duplicate(ip, fmt.Sprintf("%s %s (also objects[%d]): grant each kind once, with the namespaces and fields of every policy that reads it", g.APIVersion, g.Kind, j)))
		}
		seen[gk] = i
		errs = append(errs, validateNamespaces(ip.Child("namespaces"), g.Namespaces)...)
		for j, f := range g.Fields {
			if _, err := objectpath.Parse(f); err != nil {
				errs = append(errs, field.Invalid(ip.Child("fields").Index(j), f, "not a field path: "+err.Error()))
			}
		}
	}
	return errs
}

// validateNamespaces checks a list of namespace names.
func validateNamespaces(path *field.Path, names []string) field.ErrorList {
	var errs field.ErrorList
	if len(names) > MaxGrantNamespaces {
		errs = append(errs, field.TooMany(path, len(names), MaxGrantNamespaces))
	}
	for i, ns := range names {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, field.Invalid(path.Index(i), ns, "must be a namespace name: "+strings.Join(msgs, "; ")))
		} else if slices.Index(names, ns) != i {
			errs = append(errs, field.Duplicate(path.Index(i), ns))
		}
	}
	return errs
}

// FindGrant returns the grant of apiVersion and kind, or nil.
func FindGrant(grants []config.ObjectGrant, apiVersion, kind string) *config.ObjectGrant {
	for i := range grants {
		if grants[i].APIVersion == apiVersion && grants[i].Kind == kind {
			return &grants[i]
		}
	}
	return nil
}

// ValidateObjectReads checks a policy's objects against the grants: each
// read names a granted kind once, with parsable fields that the grant
// allows.
func ValidateObjectReads(path *field.Path, reads []config.ObjectRead, grants []config.ObjectGrant) field.ErrorList {
	var errs field.ErrorList
	if len(reads) > MaxObjectReads {
		errs = append(errs, field.TooMany(path, len(reads), MaxObjectReads))
	}
	for i := range reads {
		r := &reads[i]
		ip := path.Index(i)
		g := FindGrant(grants, r.APIVersion, r.Kind)
		if g == nil {
			errs = append(errs, field.Invalid(ip, r.APIVersion+" "+r.Kind, fmt.Sprintf("not granted: the operator grants the kinds policies may read in WasmPolicy's args; add %s to objects there, or remove this read", grantString(r.APIVersion, r.Kind, ""))))
		}
		if slices.IndexFunc(reads[:i], func(o config.ObjectRead) bool { return o.APIVersion == r.APIVersion && o.Kind == r.Kind }) >= 0 {
			errs = append(errs, field.Duplicate(ip, r.APIVersion+" "+r.Kind+": declare each kind once, with all the fields the policy reads"))
		}
		fp := ip.Child("fields")
		if len(r.Fields) == 0 {
			errs = append(errs, field.Required(fp, "list the field paths the policy reads, such as spec.renewTime"))
		}
		if len(r.Fields) > MaxObjectFields {
			errs = append(errs, field.TooMany(fp, len(r.Fields), MaxObjectFields))
		}
		for j, f := range r.Fields {
			p, err := objectpath.Parse(f)
			if err != nil {
				errs = append(errs, field.Invalid(fp.Index(j), f, "not a field path: "+err.Error()))
				continue
			}
			if g != nil && len(g.Fields) > 0 && !slices.ContainsFunc(g.Fields, func(allowed string) bool {
				q, err := objectpath.Parse(allowed)
				return err == nil && p.Under(q)
			}) {
				errs = append(errs, field.Forbidden(fp.Index(j), fmt.Sprintf("%s %s grants only the fields %s (objects in WasmPolicy's args): read one of them, or ask the operator to add this one", r.APIVersion, r.Kind, strings.Join(g.Fields, ", "))))
			}
		}
	}
	return errs
}
