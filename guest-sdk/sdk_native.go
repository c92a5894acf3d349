//go:build !wasip1

package sdk

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
)

// The native backend runs a policy's registered functions against PodData
// and NodeData in the same process, for unit tests of policy logic. It is not
// safe for concurrent use: tests call the Run functions one at a time.

var (
	nativeCycle      int64
	nativePod        *PodData
	nativeNode       *NodeData
	nativeConfig     string
	nativeCycleState []byte
)

// SetConfig sets what Config returns when running natively.
func SetConfig(c string) { nativeConfig = c }

// RunPreFilter runs the registered PreFilter natively and starts a new cycle
// (clearing the cycle state). It returns Success when none is registered.
func RunPreFilter(pod *PodData) Status {
	nativeCycle++
	nativePod, nativeNode, nativeCycleState = pod, nil, nil
	nativePreFilterNodes, nativePreFilterNodesSet = nil, false
	if preFilterFn == nil {
		return Success()
	}
	return asReported(preFilterFn(Pod{}))
}

// RunFilter runs the registered Filter natively. It panics when none is registered.
func RunFilter(pod *PodData, node *NodeData) Status {
	enterCycle(pod)
	nativePod, nativeNode = pod, node
	return asReported(filterFn(Pod{}, Node{}))
}

// RunPreScore runs the registered PreScore natively, or returns Success.
func RunPreScore(pod *PodData) Status {
	enterCycle(pod)
	nativePod, nativeNode = pod, nil
	if preScoreFn == nil {
		return Success()
	}
	return asReported(preScoreFn(Pod{}))
}

// RunScore runs the registered Score natively. It panics when none is registered.
func RunScore(pod *PodData, node *NodeData) (int64, Status) {
	enterCycle(pod)
	nativePod, nativeNode = pod, node
	score, st := scoreFn(Pod{}, Node{})
	return score, asReported(st)
}

// RunNormalizeScoreOn is RunNormalizeScore with the node of each score, for
// a NormalizeScore that calls ScoredNode.
func RunNormalizeScoreOn(pod *PodData, nodes []*NodeData, scores []int64) Status {
	nativeScored = nodes
	defer func() { nativeScored = nil }()
	return RunNormalizeScore(pod, scores)
}

var nativeScored []*NodeData

func selectScored(i int) bool {
	if i < 0 || i >= len(nativeScored) {
		return false
	}
	nativeNode = nativeScored[i]
	return true
}

// RunNormalizeScore runs the registered NormalizeScore natively on scores in
// place, or returns Success when none is registered.
func RunNormalizeScore(pod *PodData, scores []int64) Status {
	enterCycle(pod)
	nativePod, nativeNode = pod, nil
	if normalizeFn == nil {
		return Success()
	}
	return asReported(normalizeFn(Pod{}, scores))
}

// asReported is a status as the host reports it: the reason cut at
// abi.MaxReasonLength bytes, each invalid UTF-8 byte then U+FFFD.
func asReported(st Status) Status {
	if len(st.Reason) > abi.MaxReasonLength {
		st.Reason = st.Reason[:abi.MaxReasonLength]
	}
	if !utf8.ValidString(st.Reason) {
		st.Reason = string([]rune(st.Reason))
	}
	return st
}

// enterCycle starts a new cycle when a Run function gets another pod.
func enterCycle(p *PodData) {
	if p != nativePod || nativeCycle == 0 {
		nativeCycle++
	}
}

func currentCycle() int64 { return nativeCycle }

// Capabilities reports which functions are registered, as the capabilities export does.
func Capabilities() int32 { return capabilities() }

func pod() *PodData {
	if nativePod == nil {
		panic("sdk: no pod; run the policy through RunFilter/RunScore")
	}
	return nativePod
}

func node() *NodeData {
	if nativeNode == nil {
		panic("sdk: node data is not available at this extension point")
	}
	return nativeNode
}

func podString(field int32) string {
	p := pod()
	switch field {
	case abi.PodName:
		return p.Name
	case abi.PodNamespace:
		return p.Namespace
	case abi.PodUID:
		return p.UID
	case abi.PodSchedulerName:
		return p.SchedulerName
	case abi.PodPriorityClassName:
		return p.PriorityClassName
	case abi.PodServiceAccount:
		return p.ServiceAccountName
	case abi.PodNodeName:
		return p.NodeName
	case abi.PodCreationTimestamp:
		return p.CreationTimestamp
	case abi.PodDeletionTimestamp:
		return p.DeletionTimestamp
	}
	return ""
}

func podLabel(key string) (string, bool) { v, ok := pod().Labels[key]; return v, ok }

func podAnnotation(key string) (string, bool) { v, ok := pod().Annotations[key]; return v, ok }

func podList(kind int32) []byte {
	p := pod()
	switch kind {
	case abi.PodLabels:
		return abi.EncodeMap(p.Labels)
	case abi.PodAnnotations:
		return abi.EncodeMap(p.Annotations)
	case abi.PodNodeSelector:
		return abi.EncodeMap(p.NodeSelector)
	case abi.PodTolerations:
		b := abi.AppendListHeader(nil, 5*len(p.Tolerations))
		for _, t := range p.Tolerations {
			for _, s := range []string{t.Key, t.Operator, t.Value, t.Effect, t.TolerationSeconds} {
				b = abi.AppendString(b, s)
			}
		}
		return b
	case abi.PodRequests:
		return abi.EncodeInts(p.Requests)
	case abi.PodContainers, abi.PodContainerRequests, abi.PodContainerPorts:
		cs := p.Containers
		if cs == nil && len(p.Requests) > 0 {
			// Effective requests without containers: one container "c"
			// that requests them, as case tables turn them into pods.
			cs = []Container{{Kind: ContainerApp, Name: "c", Requests: p.Requests}}
		}
		return encodeContainers(cs, kind)
	case abi.PodOwnerReferences:
		var rs [][]string
		for _, o := range p.OwnerReferences {
			c := "false"
			if o.Controller {
				c = "true"
			}
			rs = append(rs, []string{o.APIVersion, o.Kind, o.Name, o.UID, c})
		}
		return encodeRecords(rs)
	case abi.PodOverhead:
		return abi.EncodeInts(p.Overhead)
	case abi.PodNodeAffinityRequired, abi.PodNodeAffinityPreferred, abi.PodAffinityRequired, abi.PodAffinityPreferred,
		abi.PodAntiAffinityRequired, abi.PodAntiAffinityPreferred, abi.PodTopologySpread, abi.PodDefaultSpreadSelector:
		return encodeTerms(p, kind)
	case abi.PodResources:
		return abi.EncodeInts(p.PodResources)
	case abi.PodClaims:
		var rs [][]string
		for _, c := range p.ClaimNames {
			rs = append(rs, []string{c})
		}
		return encodeRecords(rs)
	case abi.PodImageVolumes:
		var rs [][]string
		for _, ref := range p.ImageVolumes {
			rs = append(rs, []string{ref})
		}
		return encodeRecords(rs)
	case abi.PodSchedulingGates:
		var rs [][]string
		for _, g := range p.SchedulingGates {
			rs = append(rs, []string{g})
		}
		return encodeRecords(rs)
	}
	return nil
}

func podRequest(name string) int64 { return pod().Requests[name] }

func podPriority() int64 { return pod().Priority }

func podObject() []byte { return pod().Object }

func nodeObject() []byte { return node().Object }

func nodeName() string { return node().Name }

func nodeLabel(key string) (string, bool) { v, ok := node().Labels[key]; return v, ok }

func nodeAnnotation(key string) (string, bool) { v, ok := node().Annotations[key]; return v, ok }

func nodeTaint(key string) []byte {
	var b []byte
	n := 0
	for _, t := range node().Taints {
		if t.Key == key {
			b = abi.AppendString(abi.AppendString(b, t.Value), t.Effect)
			n++
		}
	}
	if n == 0 {
		return nil
	}
	return append(abi.AppendListHeader(nil, 2*n), b...)
}

func nodeList(kind int32) []byte {
	n := node()
	switch kind {
	case abi.NodeLabels:
		return abi.EncodeMap(n.Labels)
	case abi.NodeAnnotations:
		return abi.EncodeMap(n.Annotations)
	case abi.NodeTaints:
		b := abi.AppendListHeader(nil, 3*len(n.Taints))
		for _, t := range n.Taints {
			b = abi.AppendString(b, t.Key)
			b = abi.AppendString(b, t.Value)
			b = abi.AppendString(b, t.Effect)
		}
		return b
	case abi.NodeAllocatable:
		return abi.EncodeInts(n.Allocatable)
	case abi.NodeCapacity:
		return abi.EncodeInts(n.Capacity)
	case abi.NodeRequested:
		return abi.EncodeInts(n.Requested)
	case abi.NodeConditions:
		var rs [][]string
		for _, c := range n.Conditions {
			rs = append(rs, []string{c.Type, c.Status, c.Reason})
		}
		return encodeRecords(rs)
	case abi.NodeImages:
		var rs [][]string
		for _, im := range n.Images {
			rs = append(rs, []string{im.Name, strconv.FormatInt(im.SizeBytes, 10)})
		}
		return encodeRecords(rs)
	case abi.NodeImageStates:
		return encodeImageStates(n)
	case abi.NodeAddresses:
		var rs [][]string
		for _, a := range n.Addresses {
			rs = append(rs, []string{a.Type, a.Address})
		}
		return encodeRecords(rs)
	case abi.NodePods, abi.NodePodLabels, abi.NodePodOwners:
		var rs [][]string
		for i, p := range nodePods(n) {
			idx := strconv.Itoa(i)
			switch kind {
			case abi.NodePods:
				rs = append(rs, []string{p.Namespace, p.Name, p.UID, strconv.FormatInt(p.Priority, 10), strconv.FormatBool(p.Terminating)})
			case abi.NodePodLabels:
				keys := make([]string, 0, len(p.Labels))
				for k := range p.Labels {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					rs = append(rs, []string{idx, k, p.Labels[k]})
				}
			case abi.NodePodOwners:
				for _, o := range p.OwnerReferences {
					rs = append(rs, []string{idx, o.APIVersion, o.Kind, o.Name, o.UID, strconv.FormatBool(o.Controller)})
				}
			}
		}
		return encodeRecords(rs)
	case abi.NodeNonZeroRequested:
		return abi.EncodeInts(n.NonZeroRequested)
	case abi.NodeUsedPorts:
		// As the scheduler's NodeInfo counts them: unset IP is 0.0.0.0,
		// unset protocol TCP, port 0 ignored, each (ip, protocol, port) once.
		seen := map[HostPort]bool{}
		var ps []HostPort
		for _, p := range nodePods(n) {
			for _, h := range p.HostPorts {
				if h.IP == "" {
					h.IP = "0.0.0.0"
				}
				if h.Protocol == "" {
					h.Protocol = "TCP"
				}
				if h.Port <= 0 || seen[h] {
					continue
				}
				seen[h] = true
				ps = append(ps, h)
			}
		}
		sort.Slice(ps, func(i, j int) bool {
			if ps[i].IP != ps[j].IP {
				return ps[i].IP < ps[j].IP
			}
			if ps[i].Protocol != ps[j].Protocol {
				return ps[i].Protocol < ps[j].Protocol
			}
			return ps[i].Port < ps[j].Port
		})
		var rs [][]string
		for _, p := range ps {
			rs = append(rs, []string{p.IP, p.Protocol, strconv.Itoa(int(p.Port))})
		}
		return encodeRecords(rs)
	}
	return nil
}

func nodeResource(kind int32, name string) int64 {
	n := node()
	var m map[string]int64
	switch kind {
	case abi.ResourceAllocatable:
		m = n.Allocatable
	case abi.ResourceCapacity:
		m = n.Capacity
	case abi.ResourceRequested:
		return n.Requested[name]
	}
	if v, ok := m[name]; ok {
		return v
	}
	return abi.MissingQuantity
}

func nodePodCount() int { return node().PodCount }

func nodeUnschedulable() bool { return node().Unschedulable }

func config() string { return nativeConfig }

func setCycleState(b []byte) { nativeCycleState = append([]byte(nil), b...) }

func cycleState() []byte { return nativeCycleState }

func logV(level int32, msg string, kv []string) {
	fmt.Fprintln(os.Stderr, "policy log", "level="+strconv.Itoa(int(level)), msg, kv)
}

// encodeRecords writes records as one string list, as the host does.
func encodeRecords(rs [][]string) []byte {
	n := 0
	for _, r := range rs {
		n += len(r)
	}
	b := abi.AppendListHeader(nil, n)
	for _, r := range rs {
		for _, s := range r {
			b = abi.AppendString(b, s)
		}
	}
	return b
}

// encodeContainers writes PodData.Containers as the host writes a pod's
// init containers and containers (pod_list kinds 5, 6 and 7): init
// containers first, requests sorted by name.
func encodeContainers(cs []Container, kind int32) []byte {
	ordered := make([]Container, 0, len(cs))
	for _, c := range cs {
		if c.Kind == ContainerInit {
			ordered = append(ordered, c)
		}
	}
	for _, c := range cs {
		if c.Kind != ContainerInit {
			ordered = append(ordered, c)
		}
	}
	var rs [][]string
	for i, c := range ordered {
		idx := strconv.Itoa(i)
		switch kind {
		case abi.PodContainers:
			k := ContainerApp
			if c.Kind == ContainerInit {
				k = ContainerInit
			}
			rs = append(rs, []string{k, c.Name, c.Image, c.RestartPolicy})
		case abi.PodContainerRequests:
			names := make([]string, 0, len(c.Requests))
			for name := range c.Requests {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				rs = append(rs, []string{idx, name, strconv.FormatInt(c.Requests[name], 10)})
			}
		case abi.PodContainerPorts:
			for _, p := range c.Ports {
				rs = append(rs, []string{idx, p.Name, strconv.Itoa(int(p.ContainerPort)), strconv.Itoa(int(p.HostPort)), p.Protocol, p.HostIP})
			}
		}
	}
	return encodeRecords(rs)
}

// nodePods is NodeData.Pods, or the pods case tables make from Requested
// and PodCount when there are none.
func nodePods(n *NodeData) []NodePod {
	if n.Pods != nil {
		return n.Pods
	}
	var ps []NodePod
	if len(n.Requested) > 0 {
		ps = append(ps, NodePod{Name: n.Name + "-load", UID: n.Name + "-load"})
	}
	for len(ps) < n.PodCount {
		name := n.Name + "-pod" + strconv.Itoa(len(ps))
		ps = append(ps, NodePod{Name: name, UID: name})
	}
	return ps
}

var (
	nativePreFilterNodes    []string
	nativePreFilterNodesSet bool
)

func preFilterNodes(names []string) {
	nativePreFilterNodes, nativePreFilterNodesSet = append([]string(nil), names...), true
}

// PreFilterResult returns the nodes the last RunPreFilter named with
// PreFilterNodes, and whether it named any.
func PreFilterResult() ([]string, bool) { return nativePreFilterNodes, nativePreFilterNodesSet }

var nativeCluster *ClusterData

// SetCluster sets what Cluster reads when running natively (nil: no
// cluster, as when a policy's args do not declare it; reads then panic).
func SetCluster(c *ClusterData) { nativeCluster = c }

func cluster() *ClusterData {
	if nativeCluster == nil {
		panic("sdk: no cluster; call SetCluster before running a policy that reads Cluster")
	}
	return nativeCluster
}

// encodeImageStates gives node_list kind NodeImageStates natively: the
// node's images, the first size seen for each name, and the number of the
// cluster's nodes (SetCluster) that list the name.
func encodeImageStates(n *NodeData) []byte {
	c := cluster()
	sizes := map[string]int64{}
	var names []string
	for _, im := range n.Images {
		if _, ok := sizes[im.Name]; !ok {
			sizes[im.Name] = im.SizeBytes
			names = append(names, im.Name)
		}
	}
	sort.Strings(names)
	var rs [][]string
	for _, name := range names {
		num := 0
		for _, cn := range c.Nodes {
			for _, im := range cn.Images {
				if im.Name == name {
					num++
					break
				}
			}
		}
		rs = append(rs, []string{name, strconv.FormatInt(sizes[name], 10), strconv.Itoa(num)})
	}
	return encodeRecords(rs)
}

// existingTerms computes existing_terms natively over the cluster's nodes'
// Pods, with the SDK's own selector matching; host.TestExistingTermsMatch
// holds the host's computation to upstream's.
func existingTerms(kind int32) []byte {
	c, p := cluster(), pod()
	nsLabels := c.Namespaces[p.Namespace]
	sums := map[[2]string]int64{}
	for _, n := range c.Nodes {
		for _, ep := range nodePods(n) {
			a := ep.Affinity
			if a == nil {
				continue
			}
			var terms []WeightedPodAffinityTerm
			switch kind {
			case abi.ExistingAntiAffinityRequired, abi.ExistingAffinityRequired:
				req := a.PodAntiAffinityRequired
				if kind == abi.ExistingAffinityRequired {
					req = a.PodAffinityRequired
				}
				for _, t := range req {
					terms = append(terms, WeightedPodAffinityTerm{Weight: 1, PodAffinityTerm: t})
				}
			case abi.ExistingAffinityPreferred:
				terms = a.PodAffinityPreferred
			case abi.ExistingAntiAffinityPreferred:
				terms = a.PodAntiAffinityPreferred
			}
			for _, t := range terms {
				v, ok := n.Labels[t.TopologyKey]
				if ok && termMatches(&t.PodAffinityTerm, ep.Namespace, p, nsLabels) {
					sums[[2]string{t.TopologyKey, v}] += int64(t.Weight)
				}
			}
		}
	}
	keys := make([][2]string, 0, len(sums))
	for k := range sums {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	var rs [][]string
	for _, k := range keys {
		rs = append(rs, []string{k[0], k[1], strconv.FormatInt(sums[k], 10)})
	}
	return encodeRecords(rs)
}

// termMatches is upstream's AffinityTerm.Matches for a term of a pod in
// namespace ownerNS: no namespaces and no namespace selector mean ownerNS.
func termMatches(t *PodAffinityTerm, ownerNS string, p *PodData, nsLabels map[string]string) bool {
	in := false
	if len(t.Namespaces) == 0 && t.NamespaceSelector == nil {
		in = p.Namespace == ownerNS
	} else {
		for _, ns := range t.Namespaces {
			in = in || ns == p.Namespace
		}
		in = in || t.NamespaceSelector.Matches(nsLabels)
	}
	return in && t.LabelSelector.Matches(p.Labels)
}

func clusterNodes() int { return len(cluster().Nodes) }

func clusterNode(i int, kind int32) []byte {
	c := cluster()
	if i < 0 || i >= len(c.Nodes) {
		return nil
	}
	n := c.Nodes[i]
	switch kind {
	case abi.ClusterNodeName:
		return []byte(n.Name)
	case abi.ClusterNodeLabels:
		return abi.EncodeMap(n.Labels)
	case abi.ClusterNodeTaints:
		b := abi.AppendListHeader(nil, 3*len(n.Taints))
		for _, t := range n.Taints {
			b = abi.AppendString(abi.AppendString(abi.AppendString(b, t.Key), t.Value), t.Effect)
		}
		return b
	}
	return nil
}

// countPods counts natively with the SDK's own selector matching; the
// fields test policy checks it agrees with the host's count_pods.
func countPods(t *CountTerm) map[string]int64 {
	c := cluster()
	podNS := pod().Namespace
	matches := func(t *CountTerm, p *NodePod) bool {
		in := false
		if len(t.Namespaces) == 0 && t.NamespaceSelector == nil {
			in = p.Namespace == podNS
		} else {
			// An unknown namespace has no labels.
			in = contains(t.Namespaces, p.Namespace) || t.NamespaceSelector.Matches(c.Namespaces[p.Namespace])
		}
		return in && t.LabelSelector.Matches(p.Labels)
	}
	out := map[string]int64{}
	for _, n := range c.Nodes {
		value := n.Name
		if t.TopologyKey != "" {
			v, ok := n.Labels[t.TopologyKey]
			if !ok {
				continue
			}
			value = v
		}
		count := out[value]
	pods:
		for i := range n.Pods {
			p := &n.Pods[i]
			if (p.Terminating && !t.IncludeTerminating) || !matches(t, p) {
				continue
			}
			for j := range t.AlsoMatching {
				if !matches(&t.AlsoMatching[j], p) {
					continue pods
				}
			}
			count++
		}
		out[value] = count
	}
	return out
}

func namespaceLabels(ns string) (map[string]string, bool) {
	l, ok := cluster().Namespaces[ns]
	return l, ok
}

// Gates and patches, natively.

var (
	nativePatchPrefixes []string
	nativeNow           time.Time
	nativeCyclePolicies []CyclePolicy
	// nativeKind is the entry point running (abi.NumPoints: none known).
	nativeKind    = abi.NumPoints
	nativeRecheck RecheckRequest
	nativePatch   abi.Patch
)

// SetPatchPrefixes sets the key prefixes SetPodLabel and SetPodAnnotation
// may write under natively, as policies[].patchPrefixes does in the
// scheduler; none (the default) refuses every key.
func SetPatchPrefixes(prefixes ...string) { nativePatchPrefixes = prefixes }

// SetNow fixes what Now returns natively; the zero Time restores the real clock.
func SetNow(t time.Time) { nativeNow = t }

// SetCyclePolicies sets what CyclePolicies returns in RunPreBind.
func SetCyclePolicies(ps []CyclePolicy) { nativeCyclePolicies = ps }

func now() time.Time {
	if nativeNow.IsZero() {
		return time.Now()
	}
	return nativeNow
}

// RecheckRequest is when a gated pod is to be checked again, as the
// PreEnqueue function asked with Recheck (the default when it did not:
// OnPodUpdate, no delay). The delay is clamped as the host clamps it.
type RecheckRequest struct {
	On    RecheckEvent
	After time.Duration
}

// RunPreEnqueue runs the registered PreEnqueue natively with a cycle of its
// own, as the host calls it, and returns its status and what it asked
// about rechecking. It returns Success when none is registered.
func RunPreEnqueue(pod *PodData) (Status, RecheckRequest) {
	nativeCycle++
	nativePod, nativeNode, nativeCycleState = pod, nil, nil
	nativeRecheck = RecheckRequest{On: OnPodUpdate}
	if preEnqueueFn == nil {
		return Success(), nativeRecheck
	}
	nativeKind = abi.PreEnqueue
	defer func() { nativeKind = abi.NumPoints }()
	return asReported(preEnqueueFn(Pod{})), nativeRecheck
}

// PodPatch is what a PreBind function wrote with SetPodLabel and
// SetPodAnnotation (nil maps when it wrote none).
type PodPatch struct {
	Labels      map[string]string
	Annotations map[string]string
}

// RunPreBind runs the registered PreBind natively for pod on node, in the
// pod's current cycle (the one its PreFilter started, if any), and returns
// its status and its patch. It returns Success when none is registered.
func RunPreBind(pod *PodData, node *NodeData) (Status, PodPatch) {
	enterCycle(pod)
	nativePod, nativeNode = pod, node
	nativePatch = abi.Patch{}
	if preBindFn == nil {
		return Success(), PodPatch{}
	}
	nativeKind = abi.PreBind
	defer func() { nativeKind = abi.NumPoints }()
	st := asReported(preBindFn(Pod{}, Node{}))
	return st, PodPatch{Labels: nativePatch.Labels, Annotations: nativePatch.Annotations}
}

func recheck(events int32, after time.Duration) {
	if nativeKind != abi.PreEnqueue || events&^abi.RecheckAll != 0 {
		return
	}
	// As the host sees it: whole milliseconds (rounded up), clamped.
	r := RecheckRequest{On: RecheckEvent(events)}
	if ms := recheckMillis(after); ms > 0 {
		r.After = time.Duration(max(ms, abi.MinRecheckAfterMillis)) * time.Millisecond
	}
	nativeRecheck = r
}

func patch(label bool, key, value string) int32 {
	if nativeKind != abi.PreBind {
		return abi.NotAvailable
	}
	return nativePatch.Set(label, key, value, nativePatchPrefixes)
}

func cyclePolicies() []byte {
	if nativeKind != abi.PreBind {
		return nil
	}
	rs := make([][]string, len(nativeCyclePolicies))
	for i, p := range nativeCyclePolicies {
		rs[i] = []string{p.Name, p.SHA256, p.Mode}
	}
	return encodeRecords(rs)
}
