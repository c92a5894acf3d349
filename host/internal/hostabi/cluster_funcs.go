package hostabi

import (
	"context"

	"github.com/tetratelabs/wazero/api"
	v1 "k8s.io/api/core/v1"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/abi/fields"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

// clusterFuncs read the cycle's cluster view (Cluster and Namespaces reads).
var clusterFuncs = map[string]api.GoModuleFunc{
	abi.FnClusterNodes: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		c := in.cluster()
		switch {
		case c == nil:
			s[0] = retNotAvailable
		case !in.Policy.Permits(fields.ScopeCluster, abi.FnClusterNodes, fields.NoNum):
			s[0] = retNotDeclared
		default:
			s[0] = uint64(uint32(len(c.Nodes)))
		}
	},
	abi.FnClusterNode: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		c := in.cluster()
		if c == nil {
			s[0] = retNotAvailable
			return
		}
		if !in.Policy.Permits(fields.ScopeCluster, abi.FnClusterNode, int32(s[1])) {
			s[0] = retNotDeclared
			return
		}
		b, str, ok := c.clusterNode(in.Caches.nodes, int32(s[0]), int32(s[1]))
		switch {
		case !ok:
			s[0] = retBadArgs
		case b != nil:
			s[0] = writeOut(m, s[2], s[3], b)
		default:
			s[0] = writeOutString(m, s[2], s[3], str)
		}
	},
	abi.FnCountPods: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		c := in.cluster()
		if c == nil {
			s[0] = retNotAvailable
			return
		}
		if !in.Policy.Permits(fields.ScopeCluster, abi.FnCountPods, fields.NoNum) {
			s[0] = retNotDeclared
			return
		}
		term, ok := m.Memory().Read(uint32(s[0]), uint32(s[1]))
		if !ok || uint32(s[1]) > MaxCycleStateSize {
			s[0] = retBadArgs
			return
		}
		if in.Tenant != "" {
			term = tenantTerm(term, in.Tenant)
		}
		b, ok := c.countPods(term, in.Pod.Pod)
		if !ok {
			in.Policy.BadTerm(term)
			s[0] = retBadArgs
			return
		}
		s[0] = writeOut(m, s[2], s[3], b)
	},
	abi.FnExistingTerms:  tenantKindRead(fields.ScopeCluster, abi.FnExistingTerms, (*ClusterView).existingTerms, (*ClusterView).tenantExistingTerms),
	abi.FnVolumeClaims:   kindRead(fields.ScopeVolumes, abi.FnVolumeClaims, (*ClusterView).volumeClaims),
	abi.FnResourceClaims: kindRead(fields.ScopeDevices, abi.FnResourceClaims, (*ClusterView).resourceClaims),
	abi.FnNamespaceLabels: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		c := in.cluster()
		if c == nil || c.NamespaceLabels == nil {
			s[0] = retNotAvailable
			return
		}
		if !in.Policy.Permits(fields.ScopeNamespaces, abi.FnNamespaceLabels, fields.NoNum) {
			s[0] = retNotDeclared
			return
		}
		name, ok := m.Memory().Read(uint32(s[0]), uint32(s[1]))
		if !ok {
			s[0] = retBadArgs
			return
		}
		if in.Tenant != "" && string(name) != in.Tenant {
			// A team sees its own namespace's labels only: others'
			// (cost centres, projects) are not its to read, and to it
			// they are as a namespace that does not exist.
			in.Policy.Refused(abi.FnNamespaceLabels, "a namespaced policy reads only the labels of its own namespace, "+in.Tenant)
			s[0] = retNotFound
			return
		}
		l, found := c.NamespaceLabels(string(name))
		if !found {
			s[0] = retNotFound
			return
		}
		s[0] = writeOut(m, s[2], s[3], model.EncodeMap(l))
	},
}

// kindRead is a cluster read of one kind for the pod being scheduled
// (existing_terms, volume_claims): `(kind, buf, cap) -> i32`, answered by
// read from the cycle's view once the policy's declaration permits it.
func kindRead(scope fields.Scope, fn string, read func(c *ClusterView, kind int32, pod *v1.Pod) ([]byte, bool)) func(context.Context, api.Module, []uint64) {
	return tenantKindRead(scope, fn, read, nil)
}

// tenantKindRead is kindRead with another read for namespaced policies
// (nil: the same).
func tenantKindRead(scope fields.Scope, fn string, read, tenantRead func(c *ClusterView, kind int32, pod *v1.Pod) ([]byte, bool)) func(context.Context, api.Module, []uint64) {
	return func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		c := in.cluster()
		if c == nil {
			s[0] = retNotAvailable
			return
		}
		kind := int32(s[0])
		if !in.Policy.Permits(scope, fn, kind) {
			s[0] = retNotDeclared
			return
		}
		r := read
		if in.Tenant != "" && tenantRead != nil {
			r = tenantRead
		}
		b, ok := r(c, kind, in.Pod.Pod)
		if !ok {
			s[0] = retBadArgs
			return
		}
		s[0] = writeOut(m, s[1], s[2], b)
	}
}
