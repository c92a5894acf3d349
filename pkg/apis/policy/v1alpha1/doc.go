// +kubebuilder:object:generate=true
// +groupName=policy.wasmsched.io

// Package v1alpha1 is the policy.wasmsched.io API: scheduling policies as
// Kubernetes objects. A ClusterSchedulingPolicy (cluster-scoped) or a
// SchedulingPolicy (namespaced, for a team's own pods) names a wasm module
// and how to run it, with the same settings as a policy in the WasmPolicy
// plugin's args plus a scope. The plugin watches them when its args set
// policyObjects.enabled and writes their status.
//
// The CRDs in manifests/crds and zz_generated.deepcopy.go are generated from
// these types by controller-gen (`make generate`); hack/verify.sh fails when
// they are stale.
package v1alpha1
