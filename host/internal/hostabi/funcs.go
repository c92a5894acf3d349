package hostabi

import (
	"context"
	"encoding/binary"
	"unicode/utf8"

	"github.com/tetratelabs/wazero/api"
	"k8s.io/klog/v2"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/abi/fields"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
	"github.com/wasmsched/wasmsched/internal/kubemodel"
)

// Funcs implements abi.HostFunctions, which gives their signatures: the
// functions here, the node table's (table.go) and the gates' and patches'
// (gates.go), put together once; nothing adds to it later. Every host
// function validates its pointers and lengths against guest memory and
// answers abi.BadArgs instead of trapping; none of them can make the host
// read or write outside the calling instance's memory. The runtime adds
// them to each wazero runtime (wrapped to count toward deadline checks).
var Funcs = mergeFuncs(coreFuncs, tableFuncs, gateFuncs)

// mergeFuncs puts tables of host functions together; a name in two of
// them is a bug, caught at start.
func mergeFuncs(tables ...map[string]api.GoModuleFunc) map[string]api.GoModuleFunc {
	out := map[string]api.GoModuleFunc{}
	for _, t := range tables {
		for name, fn := range t {
			if _, dup := out[name]; dup {
				panic("host function " + name + " is implemented twice")
			}
			out[name] = fn
		}
	}
	return out
}

// coreFuncs are the host functions of the pod, the node, the cluster and
// the call's status, state and log.
var coreFuncs = map[string]api.GoModuleFunc{
	abi.FnSetStatus: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		code := int32(s[0])
		ptr, n := uint32(s[1]), uint32(s[2])
		if n > abi.MaxReasonLength {
			n = abi.MaxReasonLength
		}
		reason, ok := m.Memory().Read(ptr, n)
		if !ok {
			reason = []byte("(reason pointer out of range)")
		}
		in.SetStatus(code, reason)
	},
	abi.FnPreFilterNodes: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Kind != abi.PreFilter || in.Cycle == nil {
			s[0] = retNotAvailable
			return
		}
		b, ok := m.Memory().Read(uint32(s[0]), uint32(s[1]))
		if !ok {
			s[0] = retBadArgs
			return
		}
		r := abi.NewListReader(b)
		names := make([]string, 0, min(r.Len(), len(b)/4)) // each name takes 4 bytes at least: a count cannot size the slice
		for r.Len() > 0 {
			n, ok := r.Next()
			if !ok {
				s[0] = retBadArgs
				return
			}
			names = append(names, string(n))
		}
		if r.Err() {
			s[0] = retBadArgs
			return
		}
		in.Cycle.NodeNames, in.Cycle.NodeNamesSet = names, true
		s[0] = 0
	},
	abi.FnConfig: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		s[0] = writeOut(m, s[0], s[1], in.Policy.Config())
	},
	abi.FnLog: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		level := klog.Level(int32(s[0]))
		if level < 0 {
			level = 0
		}
		if !klog.V(level).Enabled() || uint32(s[2]) > MaxLogSize || in.Policy.LogPass(1) == 0 {
			return
		}
		b, ok := m.Memory().Read(uint32(s[1]), uint32(s[2]))
		if !ok {
			return
		}
		r := abi.NewListReader(b)
		msg, _ := r.Next()
		kv := []any{"policy", in.Policy.Name()}
		for {
			k, ok := r.Next()
			if !ok {
				break
			}
			v, _ := r.Next()
			kv = append(kv, SafeString(k), SafeString(v))
		}
		klog.V(level).InfoS(SafeString(msg), kv...)
	},
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
		s[0] = writeOutString(m, s[1], s[2], v)
	},
	abi.FnPodLabel: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Pod == nil {
			s[0] = retNotAvailable
			return
		}
		s[0] = lookup(m, s, in.Pod.model(kubemodel.PodLabels).Labels)
	},
	abi.FnPodAnnotation: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Pod == nil {
			s[0] = retNotAvailable
			return
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
		s[0] = writeOut(m, s[1], s[2], b)
	},
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
		b, ok := in.Caches.nodes.list(in.Node, kind)
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
	abi.FnCycleStateSet: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Cycle == nil || uint32(s[1]) > MaxCycleStateSize {
			return
		}
		b, ok := m.Memory().Read(uint32(s[0]), uint32(s[1]))
		if !ok {
			return
		}
		in.Cycle.State = append([]byte(nil), b...)
	},
	abi.FnCycleStateGet: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Cycle == nil || in.Cycle.State == nil {
			s[0] = retNotFound
			return
		}
		s[0] = writeOut(m, s[0], s[1], in.Cycle.State)
	},
	abi.FnSelectNode: func(ctx context.Context, m api.Module, s []uint64) {
		if CallOf(ctx).selectNode(int32(s[0])) {
			s[0] = 0
		} else {
			s[0] = retBadArgs
		}
	},
	abi.FnScoresGet: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Scores == nil {
			s[0] = retNotAvailable
			return
		}
		n := uint32(s[1])
		if n > uint32(len(in.Scores)) {
			n = uint32(len(in.Scores))
		}
		buf, ok := m.Memory().Read(uint32(s[0]), n*8)
		if !ok {
			s[0] = retBadArgs
			return
		}
		for i := uint32(0); i < n; i++ {
			binary.LittleEndian.PutUint64(buf[i*8:], uint64(in.Scores[i]))
		}
		s[0] = uint64(uint32(len(in.Scores)))
	},
	abi.FnScoresSet: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Scores == nil {
			s[0] = retNotAvailable
			return
		}
		n := uint32(s[1])
		if n != uint32(len(in.Scores)) {
			s[0] = retBadArgs
			return
		}
		buf, ok := m.Memory().Read(uint32(s[0]), n*8)
		if !ok {
			s[0] = retBadArgs
			return
		}
		for i := uint32(0); i < n; i++ {
			in.Scores[i] = int64(binary.LittleEndian.Uint64(buf[i*8:]))
		}
		in.ScoresSet = true
		s[0] = uint64(n)
	},
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
		b, ok := c.countPods(term, in.Pod.Pod.Namespace)
		if !ok {
			in.Policy.BadTerm(term)
			s[0] = retBadArgs
			return
		}
		s[0] = writeOut(m, s[2], s[3], b)
	},
	abi.FnExistingTerms: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		c := in.cluster()
		if c == nil {
			s[0] = retNotAvailable
			return
		}
		kind := int32(s[0])
		if !in.Policy.Permits(fields.ScopeCluster, abi.FnExistingTerms, kind) {
			s[0] = retNotDeclared
			return
		}
		b, ok := c.existingTerms(kind, in.Pod.Pod)
		if !ok {
			s[0] = retBadArgs
			return
		}
		s[0] = writeOut(m, s[1], s[2], b)
	},
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
		l, found := c.NamespaceLabels(string(name))
		if !found {
			s[0] = retNotFound
			return
		}
		s[0] = writeOut(m, s[2], s[3], model.EncodeMap(l))
	},
}

// Encoded sentinel results (negative values do not convert to uint64 as constants).
var (
	retBadArgs      = api.EncodeI32(abi.BadArgs)
	retNotFound     = api.EncodeI32(abi.NotFound)
	retNotAvailable = api.EncodeI32(abi.NotAvailable)
	retNotDeclared  = api.EncodeI32(abi.NotDeclared)
	retMissing      = api.EncodeI64(abi.MissingQuantity)
)

// lookup implements the (key_ptr, key_len, buf, cap) -> len functions.
func lookup(m api.Module, s []uint64, kv map[string]string) uint64 {
	key, ok := m.Memory().Read(uint32(s[0]), uint32(s[1]))
	if !ok {
		return retBadArgs
	}
	v, found := kv[string(key)] // no allocation: the compiler keys the map with the bytes
	if !found {
		return retNotFound
	}
	return writeOutString(m, s[2], s[3], v)
}

// writeOut copies data to guest memory at buf if it fits in capacity and
// returns its length either way, so a guest with a small buffer can retry.
func writeOut(m api.Module, buf, capacity uint64, data []byte) uint64 {
	if uint64(len(data)) > uint64(uint32(capacity)) {
		return uint64(uint32(len(data)))
	}
	if len(data) > 0 && !m.Memory().Write(uint32(buf), data) {
		return retBadArgs
	}
	return uint64(uint32(len(data)))
}

func writeOutString(m api.Module, buf, capacity uint64, data string) uint64 {
	if uint64(len(data)) > uint64(uint32(capacity)) {
		return uint64(uint32(len(data)))
	}
	if len(data) > 0 && !m.Memory().WriteString(uint32(buf), data) {
		return retBadArgs
	}
	return uint64(uint32(len(data)))
}

// SafeString converts guest bytes for logs and events, replacing invalid UTF-8.
func SafeString(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return string([]rune(string(b)))
}

// nodeListScopes is the declaration each node_list kind needs, from the
// fields table.
var nodeListScopes = func() (out [model.NumNodeLists]fields.Scope) {
	for k := range out {
		out[k] = fields.ScopeOf(abi.FnNodeList, int32(k))
	}
	return out
}()
