package hostabi

import (
	"context"

	"github.com/tetratelabs/wazero/api"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/abi/fields"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
	"github.com/wasmsched/wasmsched/internal/kubemodel"
)

// podFuncs read the cycle's pod.
var podFuncs = map[string]api.GoModuleFunc{
	abi.FnPodString: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Pod == nil {
			s[0] = retNotAvailable
			return
		}
		v, ok := in.Pod.str(int32(s[0]))
		if !ok {
			s[0] = retBadArgs
			return
		}
		if podIdentity(int32(s[0])) {
			in.VariesByPod = true
		}
		s[0] = writeOutString(m, s[1], s[2], v)
	},
	abi.FnPodLabel: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Pod == nil {
			s[0] = retNotAvailable
			return
		}
		if key, ok := m.Memory().Read(uint32(s[0]), uint32(s[1])); ok {
			in.PodReads.label(key)
		}
		s[0] = lookup(m, s, in.Pod.model(kubemodel.PodLabels).Labels)
	},
	abi.FnPodAnnotation: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Pod == nil {
			s[0] = retNotAvailable
			return
		}
		if key, ok := m.Memory().Read(uint32(s[0]), uint32(s[1])); ok {
			in.PodReads.annotation(key)
		}
		s[0] = lookup(m, s, in.Pod.model(kubemodel.PodAnnotations).Annotations)
	},
	abi.FnPodList: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Pod == nil {
			s[0] = retNotAvailable
			return
		}
		b, ok := in.Pod.list(int32(s[0]))
		if !ok {
			s[0] = retBadArgs
			return
		}
		switch int32(s[0]) {
		case model.PodDefaultSpreadSelector:
			in.VariesByPod = true // from the cluster's Services and controllers
		case model.PodLabels:
			in.PodReads.all(false)
		case model.PodAnnotations:
			in.PodReads.all(true)
		}
		s[0] = writeOut(m, s[1], s[2], b)
	},
	abi.FnPodRequest: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		name, ok := m.Memory().Read(uint32(s[0]), uint32(s[1]))
		if !ok || in.Pod == nil {
			s[0] = retMissing
			return
		}
		s[0] = uint64(model.PodRequest(in.Pod.model(kubemodel.PodRequests), string(name)))
	},
	abi.FnPodPriority: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Pod == nil {
			s[0] = retMissing
			return
		}
		s[0] = uint64(in.Pod.priority())
	},
	abi.FnPodObject: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Pod == nil {
			s[0] = retNotAvailable
			return
		}
		if !in.Policy.Permits(fields.ScopeWholeObjects, abi.FnPodObject, int32(s[0])) {
			s[0] = retNotDeclared
			return
		}
		b, ok := in.Pod.object(int32(s[0]))
		if !ok {
			s[0] = retBadArgs
			return
		}
		in.VariesByPod = true
		s[0] = writeOut(m, s[1], s[2], b)
	},
}

// nodeFuncs read the current node.
var nodeFuncs = map[string]api.GoModuleFunc{
	abi.FnNodeObject: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Node == nil {
			s[0] = retNotAvailable
			return
		}
		if !in.Policy.Permits(fields.ScopeWholeObjects, abi.FnNodeObject, int32(s[0])) {
			s[0] = retNotDeclared
			return
		}
		b, ok := in.Caches.nodes.object(in.Node, int32(s[0]))
		if !ok {
			s[0] = retBadArgs
			return
		}
		s[0] = writeOut(m, s[1], s[2], b)
	},
	abi.FnNodeString: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Node == nil {
			s[0] = retNotAvailable
			return
		}
		v, ok := model.NodeString(in.NodeModel(kubemodel.NodeScalars), int32(s[0]))
		if !ok {
			s[0] = retBadArgs
			return
		}
		s[0] = writeOutString(m, s[1], s[2], v)
	},
	abi.FnNodeLabel: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Node == nil {
			s[0] = retNotAvailable
			return
		}
		s[0] = lookup(m, s, kubemodel.NodeLabelsOf(in.Node))
	},
	abi.FnNodeAnnotation: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Node == nil {
			s[0] = retNotAvailable
			return
		}
		s[0] = lookup(m, s, kubemodel.NodeAnnotationsOf(in.Node))
	},
	abi.FnNodeTaint: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Node == nil {
			s[0] = retNotAvailable
			return
		}
		key, ok := m.Memory().Read(uint32(s[0]), uint32(s[1]))
		if !ok {
			s[0] = retBadArgs
			return
		}
		// Encoded into the instance's scratch buffer: no allocation once it
		// has grown to the node's largest answer.
		b, found := model.NodeTaint(in.scratch[:0], in.NodeModel(kubemodel.NodeTaints), string(key))
		if !found {
			s[0] = retNotFound
			return
		}
		in.scratch = b
		s[0] = writeOut(m, s[2], s[3], b)
	},
	abi.FnNodeList: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Node == nil {
			s[0] = retNotAvailable
			return
		}
		kind := int32(s[0])
		if kind >= 0 && kind < model.NumNodeLists && !in.Policy.Permits(nodeListScopes[kind], abi.FnNodeList, kind) {
			s[0] = retNotDeclared
			return
		}
		var b []byte
		var ok bool
		if in.Tenant != "" && tenantFiltered(kind) {
			b, ok = in.Caches.nodes.tenantList(in.Node, kind, in.Tenant)
		} else {
			b, ok = in.Caches.nodes.list(in.Node, kind)
		}
		if !ok {
			s[0] = retBadArgs
			return
		}
		s[0] = writeOut(m, s[1], s[2], b)
	},
	abi.FnNodeResource: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		name, ok := m.Memory().Read(uint32(s[1]), uint32(s[2]))
		if in.Node == nil || !ok {
			s[0] = retMissing
			return
		}
		v, _ := kubemodel.NodeResource(in.Node, int32(s[0]), string(name))
		s[0] = api.EncodeI64(v)
	},
	abi.FnNodePodCount: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Node == nil {
			s[0] = retNotAvailable
			return
		}
		s[0] = uint64(uint32(model.NodePodCount(in.NodeModel(kubemodel.NodeScalars))))
	},
	abi.FnNodeUnschedulable: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Node == nil {
			s[0] = retNotAvailable
			return
		}
		if in.NodeModel(kubemodel.NodeScalars).Unschedulable {
			s[0] = 1
		} else {
			s[0] = 0
		}
	},
}
