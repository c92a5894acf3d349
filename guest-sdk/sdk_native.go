//go:build !wasip1

package sdk

import (
	"fmt"
	"os"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/abi/fields"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

// The native backend runs a policy's registered functions against PodData
// and NodeData in the same process, for unit tests of policy logic. It is not
// safe for concurrent use: tests call the Run functions one at a time.

var (
	nativeCycle int64
	// nativeGiven is the pod a test passed (a new one starts a cycle);
	// nativePod and nativeNode are what the policy reads: the test's pod
	// and node with what the scheduler derives from them (model.DerivePod,
	// model.DeriveNode).
	nativeGiven      *PodData
	nativePod        *PodData
	nativeNode       *NodeData
	nativeConfig     string
	nativeCycleState []byte
)

// use makes pod and node (nil: none) what the policy reads. A pod or node
// the scheduler could not have (model.DerivePod, model.DeriveNode) fails
// the call with an Error that says why.
func use(pod *PodData, node *NodeData) (Status, bool) {
	nativeUndeclared = ""
	nativeGiven = pod
	p, err := model.DerivePod(pod)
	if err != nil {
		nativePod, nativeNode = nil, nil
		return Error("sdk: " + err.Error()), false
	}
	nativePod, nativeNode = p, nil
	if node != nil {
		n, err := model.DeriveNode(node, nativeCluster)
		if err != nil {
			return Error("sdk: " + err.Error()), false
		}
		nativeNode = n
	}
	return Success(), true
}

// SetConfig sets what Config returns when running natively.
func SetConfig(c string) { nativeConfig = c }

// configMayChange: natively a test sets configs in turn (PerConfig).
const configMayChange = true

// SetReads declares the reads a policy run natively may make, as
// policies[].reads declares them for the compiled policy in a scheduler:
// a read that needs a declaration not given then fails the call with the
// Error the host's SDK gives ("declare NodePods in policies[].reads to use
// Node.Pods"), whatever status the policy returns, so a native test
// catches a missing declaration as the scheduler would. An unknown name is
// an error listing the valid ones. Until SetReads is called every read
// answers; SetReads(nil) declares none. casetest.RunNative calls it with
// the case table's "reads".
func SetReads(reads []string) error {
	scopes, err := fields.ParseScopes(reads)
	if err != nil {
		return err
	}
	nativeReads = map[fields.Scope]bool{}
	for _, s := range scopes {
		nativeReads[s] = true
	}
	return nil
}

// AllowAllReads undoes SetReads: every read answers natively again.
func AllowAllReads() { nativeReads = nil }

var (
	// nativeReads are the declared reads (nil: every read answers).
	nativeReads map[fields.Scope]bool
	// nativeUndeclared is the Error of the current call's first
	// undeclared read ("" if none).
	nativeUndeclared string
)

// permitted reports whether a native read of fn (field or kind num) is
// declared, recording the call's Error when it is not.
func permitted(fn string, num int32) bool {
	if nativeReads == nil {
		return true
	}
	if s := fields.ScopeOf(fn, num); s == fields.ScopeNone || nativeReads[s] {
		return true
	}
	if nativeUndeclared == "" {
		nativeUndeclared = undeclaredReason(fn, num)
	}
	return false
}

// RunPreFilter runs the registered PreFilter natively and starts a new cycle
// (clearing the cycle state). It returns Success when none is registered.
func RunPreFilter(pod *PodData) Status {
	nativeCycle++
	nativeCycleState = nil
	nativePreFilterNodes, nativePreFilterNodesSet = nil, false
	if st, ok := use(pod, nil); !ok {
		return st
	}
	if preFilterFn == nil {
		return Success()
	}
	return asReported(preFilterFn(Pod{}))
}

// RunFilter runs the registered Filter natively. It panics when none is registered.
func RunFilter(pod *PodData, node *NodeData) Status {
	enterCycle(pod)
	if st, ok := use(pod, node); !ok {
		return st
	}
	return asReported(filterFn(Pod{}, Node{}))
}

// RunPreScore runs the registered PreScore natively, or returns Success.
func RunPreScore(pod *PodData) Status {
	enterCycle(pod)
	if st, ok := use(pod, nil); !ok {
		return st
	}
	if preScoreFn == nil {
		return Success()
	}
	return asReported(preScoreFn(Pod{}))
}

// RunScore runs the registered Score natively. It panics when none is registered.
func RunScore(pod *PodData, node *NodeData) (int64, Status) {
	enterCycle(pod)
	if st, ok := use(pod, node); !ok {
		return 0, st
	}
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
	n, err := model.DeriveNode(nativeScored[i], nativeCluster)
	if err != nil {
		return false
	}
	nativeNode = n
	return true
}

// RunNormalizeScore runs the registered NormalizeScore natively on scores in
// place, or returns Success when none is registered.
func RunNormalizeScore(pod *PodData, scores []int64) Status {
	enterCycle(pod)
	if st, ok := use(pod, nil); !ok {
		return st
	}
	if normalizeFn == nil {
		return Success()
	}
	return asReported(normalizeFn(Pod{}, scores))
}

// asReported is a status as the host reports it: the reason cut at
// abi.MaxReasonLength bytes, each invalid UTF-8 byte then U+FFFD.
func asReported(st Status) Status {
	if nativeUndeclared != "" { // as the compiled SDK reports it (notDeclared)
		st = Error(nativeUndeclared)
	}
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
	if p != nativeGiven || nativeCycle == 0 {
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
	s, _ := model.PodString(pod(), field)
	return s
}

func podLabel(key string) (string, bool) { v, ok := pod().Labels[key]; return v, ok }

func podAnnotation(key string) (string, bool) { v, ok := pod().Annotations[key]; return v, ok }

func podList(kind int32) []byte {
	if !permitted(abi.FnPodList, kind) {
		return nil
	}
	b, _ := model.PodList(pod(), kind)
	return b
}

func podRequest(name string) int64 { return model.PodRequest(pod(), name) }

func podPriority() int64 { return pod().Priority }

func podObject() []byte {
	if !permitted(abi.FnPodObject, abi.ObjectJSON) {
		return nil
	}
	return pod().Object
}

func nodeObject() []byte {
	if !permitted(abi.FnNodeObject, abi.ObjectJSON) {
		return nil
	}
	return node().Object
}

func nodeName() string { return nodeString(model.NodeName) }

func nodeString(field int32) string {
	s, _ := model.NodeString(node(), field)
	return s
}

func nodeLabel(key string) (string, bool) { v, ok := node().Labels[key]; return v, ok }

func nodeAnnotation(key string) (string, bool) { v, ok := node().Annotations[key]; return v, ok }

func nodeTaint(key string) []byte {
	b, ok := model.NodeTaint(nil, node(), key)
	if !ok {
		return nil
	}
	return b
}

func nodeList(kind int32) []byte {
	if !permitted(abi.FnNodeList, kind) {
		return nil
	}
	b, _ := model.NodeList(node(), kind)
	return b
}

func nodeResource(kind int32, name string) int64 {
	v, _ := model.NodeResource(node(), kind, name)
	return v
}

func nodePodCount() int { return model.NodePodCount(node()) }

func nodeUnschedulable() bool { return node().Unschedulable }

func nodeTaintEffects() int64 { return int64(model.TaintEffects(node().Taints)) }

func config() string { return nativeConfig }

func setCycleState(b []byte) { nativeCycleState = append([]byte(nil), b...) }

func cycleState() []byte { return nativeCycleState }

func logV(level int32, msg string, kv []string) {
	fmt.Fprintln(os.Stderr, "policy log", "level="+strconv.Itoa(int(level)), msg, kv)
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

// existingTerms computes existing_terms natively over the cluster's pods,
// with the model's selector matching; kubemodel's tests hold it to the
// host's computation.
func existingTerms(kind int32) []byte {
	if !permitted(abi.FnExistingTerms, kind) {
		return nil
	}
	return model.EncodeTopologySums(model.ExistingTerms(cluster(), pod(), kind))
}

// volumeClaimsList computes volume_claims natively from the cluster's
// claims, volumes and classes (none without SetCluster: every claim is
// then not found).
func volumeClaimsList(kind int32) []byte {
	if !permitted(abi.FnVolumeClaims, kind) {
		return nil
	}
	b, _ := model.EncodeVolumeClaims(model.VolumeClaims(nativeCluster, pod()), kind)
	return b
}

func clusterNodes() int {
	if !permitted(abi.FnClusterNodes, fields.NoNum) {
		return 0
	}
	return len(cluster().Nodes)
}

func clusterNode(i int, kind int32) []byte {
	if !permitted(abi.FnClusterNode, kind) {
		return nil
	}
	c := cluster()
	if i < 0 || i >= len(c.Nodes) {
		return nil
	}
	b, s, _ := model.ClusterNode(c.Nodes[i], kind)
	if kind == model.ClusterNodeName {
		return []byte(s)
	}
	return b
}

// countPods counts natively with the model's selector matching; the
// fields test policy checks it agrees with the host's count_pods.
func countPods(t *CountTerm) map[string]int64 {
	if !permitted(abi.FnCountPods, fields.NoNum) {
		return nil
	}
	return model.CountPods(cluster(), pod(), t)
}

func countList(t *CountTerm) []byte { return model.EncodeCounts(countPods(t)) }

func namespaceLabels(ns string) (map[string]string, bool) {
	if !permitted(abi.FnNamespaceLabels, fields.NoNum) {
		return nil, false
	}
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
	nativeCycleState = nil
	nativeRecheck = RecheckRequest{On: OnPodUpdate}
	if st, ok := use(pod, nil); !ok {
		return st, nativeRecheck
	}
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
	nativePatch = abi.Patch{}
	if st, ok := use(pod, node); !ok {
		return st, PodPatch{}
	}
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
	ps := make([][3]string, len(nativeCyclePolicies))
	for i, p := range nativeCyclePolicies {
		ps[i] = [3]string{p.Name, p.SHA256, p.Mode}
	}
	return model.EncodeCyclePolicies(ps)
}
