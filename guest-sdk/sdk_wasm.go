//go:build wasip1

package sdk

import (
	"time"
	"unsafe"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

// Host imports. Pointers are offsets into this module's linear memory.

//go:wasmimport wasmsched set_status
func hostSetStatus(code int32, ptr, n uint32)

//go:wasmimport wasmsched config
func hostConfig(buf, capacity uint32) int32

//go:wasmimport wasmsched log
func hostLog(level int32, ptr, n uint32)

//go:wasmimport wasmsched pod_string
func hostPodString(field int32, buf, capacity uint32) int32

//go:wasmimport wasmsched pod_label
func hostPodLabel(kptr, klen, buf, capacity uint32) int32

//go:wasmimport wasmsched pod_annotation
func hostPodAnnotation(kptr, klen, buf, capacity uint32) int32

//go:wasmimport wasmsched pod_list
func hostPodList(kind int32, buf, capacity uint32) int32

//go:wasmimport wasmsched pod_request
func hostPodRequest(ptr, n uint32) int64

//go:wasmimport wasmsched pod_priority
func hostPodPriority() int64

//go:wasmimport wasmsched node_string
func hostNodeString(field int32, buf, capacity uint32) int32

//go:wasmimport wasmsched node_label
func hostNodeLabel(kptr, klen, buf, capacity uint32) int32

//go:wasmimport wasmsched node_annotation
func hostNodeAnnotation(kptr, klen, buf, capacity uint32) int32

//go:wasmimport wasmsched node_list
func hostNodeList(kind int32, buf, capacity uint32) int32

//go:wasmimport wasmsched node_resource
func hostNodeResource(kind int32, ptr, n uint32) int64

//go:wasmimport wasmsched node_pod_count
func hostNodePodCount() int32

//go:wasmimport wasmsched node_unschedulable
func hostNodeUnschedulable() int32

//go:wasmimport wasmsched node_taint
func hostNodeTaint(keyPtr, keyLen, buf, capacity uint32) int32

//go:wasmimport wasmsched cycle_state_set
func hostCycleStateSet(ptr, n uint32)

//go:wasmimport wasmsched cycle_state_get
func hostCycleStateGet(buf, capacity uint32) int32

//go:wasmimport wasmsched pod_object
func hostPodObject(format int32, buf, capacity uint32) int32

//go:wasmimport wasmsched node_object
func hostNodeObject(format int32, buf, capacity uint32) int32

//go:wasmimport wasmsched prefilter_nodes
func hostPreFilterNodes(ptr, n uint32) int32

//go:wasmimport wasmsched cluster_nodes
func hostClusterNodes() int32

//go:wasmimport wasmsched cluster_node
func hostClusterNode(i, kind int32, buf, capacity uint32) int32

//go:wasmimport wasmsched count_pods
func hostCountPods(tptr, tlen, buf, capacity uint32) int32

//go:wasmimport wasmsched namespace_labels
func hostNamespaceLabels(nptr, nlen, buf, capacity uint32) int32

//go:wasmimport wasmsched existing_terms
func hostExistingTerms(kind int32, buf, capacity uint32) int32

//go:wasmimport wasmsched volume_claims
func hostVolumeClaims(kind int32, buf, capacity uint32) int32

//go:wasmimport wasmsched select_node
func hostSelectNode(i int32) int32

//go:wasmimport wasmsched scores_get
func hostScoresGet(buf uint32, n int32) int32

//go:wasmimport wasmsched scores_set
func hostScoresSet(buf uint32, n int32) int32

//go:wasmimport wasmsched recheck_on
func hostRecheckOn(events, afterMillis int32) int32

//go:wasmimport wasmsched patch_label
func hostPatchLabel(kp, kl, vp, vl uint32) int32

//go:wasmimport wasmsched patch_annotation
func hostPatchAnnotation(kp, kl, vp, vl uint32) int32

//go:wasmimport wasmsched cycle_policies
func hostCyclePolicies(buf, capacity uint32) int32

// Exports.

//go:wasmexport abi_version
func exportAbiVersion() int32 { return sdkABIVersion }

//go:wasmexport capabilities
func exportCapabilities() int32 { return capabilities() }

//go:wasmexport prefilter
func exportPreFilter(cycle int64) {
	begin(cycle)
	if preFilterFn != nil {
		report(preFilterFn(Pod{}))
	}
}

//go:wasmexport filter
func exportFilter(cycle int64) {
	begin(cycle)
	if filterFn != nil {
		report(filterFn(Pod{}, Node{}))
	}
}

// filter_nodes runs Filter for a batch of nodes in one call, so the host's
// fixed cost per call is paid once per batch instead of once per node.
//
//go:wasmexport filter_nodes
func exportFilterNodes(cycle int64, n int32) {
	begin(cycle)
	if filterFn == nil {
		return
	}
	batchStart()
	if tableStart(n) {
		for i := int32(0); i < n; i++ {
			tableSelect(i)
			reportRow(filterFn(Pod{}, Node{}), 0)
		}
	} else {
		for i := int32(0); i < n; i++ {
			if hostSelectNode(i) != 0 {
				break
			}
			report(filterFn(Pod{}, Node{}))
		}
	}
	tableEnd()
}

// score_nodes runs Score for a batch of nodes and reports the scores at once.
//
//go:wasmexport score_nodes
func exportScoreNodes(cycle int64, n int32) {
	begin(cycle)
	if scoreFn == nil || n <= 0 {
		return
	}
	if cap(batchScores) < int(n) {
		batchScores = make([]int64, n)
	}
	batchStart()
	if tableStart(n) {
		for i := int32(0); i < n; i++ {
			tableSelect(i)
			s, st := scoreFn(Pod{}, Node{})
			reportRow(st, s)
		}
		tableEnd()
		return
	}
	scores := batchScores[:n]
	for i := int32(0); i < n; i++ {
		if hostSelectNode(i) != 0 {
			tableEnd()
			return
		}
		s, st := scoreFn(Pod{}, Node{})
		report(st)
		scores[i] = s
	}
	hostScoresSet(uint32(uintptr(unsafe.Pointer(unsafe.SliceData(scores)))), n)
	tableEnd()
}

var batchScores []int64

//go:wasmexport prescore
func exportPreScore(cycle int64) {
	begin(cycle)
	if preScoreFn != nil {
		report(preScoreFn(Pod{}))
	}
}

//go:wasmexport score
func exportScore(cycle int64) int64 {
	begin(cycle)
	if scoreFn == nil {
		return 0
	}
	s, st := scoreFn(Pod{}, Node{})
	report(st)
	return s
}

//go:wasmexport preenqueue
func exportPreEnqueue(cycle int64) {
	begin(cycle)
	if preEnqueueFn != nil {
		report(preEnqueueFn(Pod{}))
	}
}

//go:wasmexport prebind
func exportPreBind(cycle int64) {
	begin(cycle)
	cycleNodes = -1 // prebind has its scheduling cycle's id but no cluster
	if preBindFn != nil {
		report(preBindFn(Pod{}, Node{}))
	}
}

//go:wasmexport normalize_score
func exportNormalizeScore(cycle int64, n int32) {
	begin(cycle)
	if normalizeFn == nil || n <= 0 {
		return
	}
	scores := make([]int64, n)
	p := uint32(uintptr(unsafe.Pointer(unsafe.SliceData(scores))))
	hostScoresGet(p, n)
	st := normalizeFn(Pod{}, scores)
	hostScoresSet(p, n)
	report(st)
}

func ptrOf(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

func strPtr(s string) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.StringData(s)))) }

func report(st Status) {
	if undeclaredSet {
		undeclaredSet = false // the undeclared read's Error stands
		return
	}
	if st.Code != CodeSuccess {
		hostSetStatus(int32(st.Code), strPtr(st.Reason), uint32(len(st.Reason)))
	}
}

// preFilterNodes calls prefilter_nodes directly, so only guests that use
// it import it.
func preFilterNodes(names []string) {
	b := abi.AppendListHeader(nil, len(names))
	for _, n := range names {
		b = abi.AppendString(b, n)
	}
	hostPreFilterNodes(ptrOf(b), uint32(len(b)))
}

// recheck, patch and cyclePolicies call their host functions directly, so
// only the guests that use them import them.
func recheck(events int32, after time.Duration) {
	hostRecheckOn(events, recheckMillis(after))
}

func patch(label bool, key, value string) int32 {
	if label {
		return hostPatchLabel(strPtr(key), uint32(len(key)), strPtr(value), uint32(len(value)))
	}
	return hostPatchAnnotation(strPtr(key), uint32(len(key)), strPtr(value), uint32(len(value)))
}

func cyclePolicies() []byte {
	n := hostCyclePolicies(0, 0)
	if n <= 0 {
		return nil
	}
	b := make([]byte, n)
	if hostCyclePolicies(ptrOf(b), uint32(n)) != n {
		return nil
	}
	return b
}

// now is the WASI wall clock, which the host makes real or deterministic.
func now() time.Time { return time.Now() }

func selectScored(i int) bool { return i >= 0 && i < 1<<31-1 && hostSelectNode(int32(i)) == 0 }

// notDeclared is called when the host answered a read with NotDeclared (the
// policy's args do not declare it). It sets the current call's (or batch
// node's) status to an Error that names the declaration and the accessor at
// once, so the call fails closed: the verdict the policy reaches without
// the data, a Success or its own rejection, never replaces it (report and
// reportRowSlow keep it). Setting it here rather than checking after every
// verdict keeps the per-node path of a table batch as short as it was.
func notDeclared(fn string, num int32) {
	msg := undeclaredReason(fn, num)
	if inTable {
		rowError = msg
		return
	}
	if !undeclaredSet {
		undeclaredSet = true
		hostSetStatus(int32(CodeError), strPtr(msg), uint32(len(msg)))
	}
}

// undeclaredSet is set while the current call's (or node's) status is the
// Error of an undeclared read, which its verdict must not replace.
var undeclaredSet bool

// The pod is the same for every call of a cycle, and an instance serves many
// calls of a cycle, so pod reads are cached until the cycle id changes.
type cachedValue struct {
	key, value string
	ok         bool
}

var (
	curCycle       int64
	podStrings     [model.NumPodStrings]*string
	podLabels      []cachedValue
	podLists       [model.NumPodLists][]byte
	podRequests    []cachedInt
	cycleData      []byte
	cycleDataValid bool
	podObj         []byte
	scratch        = make([]byte, 512)
	configValue    *string
)

// counts are the cycle's Cluster.CountPods answers, by term.
var counts []*cachedCount

// cachedCount is one count_pods answer of the cycle: its term, the
// encoding, and the decoded map once CountPods asked for it.
type cachedCount struct {
	term  string
	list  []byte
	value map[string]int64
}

type cachedInt struct {
	key   string
	value int64
}

// podReqCache answers Pod.Request by the name's length and nameKey, the
// way resCache answers node reads: one compare, where podRequests is
// searched by content. Cleared with the cycle.
var podReqCache [8]keyedInt

// keyedInt is a cached answer to a read by name, keyed by nameKey; p
// keeps the name's bytes alive, so that their address cannot name
// another string while cached.
type keyedInt struct {
	key   uint64
	p     *byte
	value int64
}

// nameKey is a string's address and length in one word, with the top bit
// set so that no name's key is an empty slot's 0. Exact: wasm addresses
// are 32 bits, and callers cache only names shorter than 2^30 bytes.
func nameKey(name string) uint64 {
	return uint64(uintptr(unsafe.Pointer(unsafe.StringData(name)))) | uint64(len(name))<<32 | 1<<63
}

func currentCycle() int64 { return curCycle }

// configMayChange: an instance's config never changes (PerConfig).
const configMayChange = false

func begin(cycle int64) {
	undeclaredSet = false
	if cycle == curCycle {
		return
	}
	curCycle = cycle
	podStrings = [model.NumPodStrings]*string{}
	podLabels = podLabels[:0]
	podLists = [model.NumPodLists][]byte{}
	podRequests = podRequests[:0]
	podReqCache = [len(podReqCache)]keyedInt{}
	cycleData, cycleDataValid = nil, false
	podObj = nil
	counts = counts[:0]
	cycleNodes = -1
}

// Read operations: which host function fills a buffer.
const (
	opConfig = iota
	opPodString
	opPodList
	opNodeString
	opNodeList
	opCycleState
	opPodLabel
	opPodAnnotation
	opNodeLabel
	opNodeAnnotation
)

// opNames name the read operations' host functions, for errors.
var opNames = [...]string{opConfig: abi.FnConfig, opPodString: abi.FnPodString, opPodList: abi.FnPodList,
	opNodeString: abi.FnNodeString, opNodeList: abi.FnNodeList, opCycleState: abi.FnCycleStateGet,
	opPodLabel: abi.FnPodLabel, opPodAnnotation: abi.FnPodAnnotation, opNodeLabel: abi.FnNodeLabel, opNodeAnnotation: abi.FnNodeAnnotation}

// hostRead calls one host read function. TinyGo cannot take an imported
// function as a value, hence the switch.
func hostRead(op int, arg int32, kp, kl, buf, capacity uint32) int32 {
	if inTable {
		switch op {
		case opNodeString, opNodeList, opNodeLabel, opNodeAnnotation:
			selectForHost()
		}
	}
	switch op {
	case opConfig:
		return hostConfig(buf, capacity)
	case opPodString:
		return hostPodString(arg, buf, capacity)
	case opPodList:
		return hostPodList(arg, buf, capacity)
	case opNodeString:
		return hostNodeString(arg, buf, capacity)
	case opNodeList:
		return hostNodeList(arg, buf, capacity)
	case opCycleState:
		return hostCycleStateGet(buf, capacity)
	case opPodLabel:
		return hostPodLabel(kp, kl, buf, capacity)
	case opPodAnnotation:
		return hostPodAnnotation(kp, kl, buf, capacity)
	case opNodeLabel:
		return hostNodeLabel(kp, kl, buf, capacity)
	case opNodeAnnotation:
		return hostNodeAnnotation(kp, kl, buf, capacity)
	}
	return abi.BadArgs
}

// read fills the scratch buffer from a host read function, which returns the
// full length; when the buffer was too small it grows it and asks again.
// The result is a view of scratch, valid until the next read.
func read(op int, arg int32, key string) ([]byte, bool) {
	kp, kl := strPtr(key), uint32(len(key))
	n := hostRead(op, arg, kp, kl, ptrOf(scratch), uint32(len(scratch)))
	if n < 0 {
		if n == abi.NotDeclared {
			notDeclared(opNames[op], arg)
		}
		return nil, false
	}
	if int(n) > len(scratch) {
		scratch = make([]byte, int(n)+256)
		if n = hostRead(op, arg, kp, kl, ptrOf(scratch), uint32(len(scratch))); n < 0 || int(n) > len(scratch) {
			return nil, false
		}
	}
	return scratch[:n], true
}

func keyed(op int, key string) (string, bool) {
	b, ok := read(op, 0, key)
	return intern(b), ok
}

// internTab remembers recently returned short strings. Label values repeat
// across nodes (teams, zones, instance types), and a heap allocation per read
// is the most expensive part of a TinyGo policy's Filter; returning the
// remembered string avoids it while strings stay ordinary and immutable.
var internTab [256]string

func intern(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > 64 {
		return string(b)
	}
	// A loop-free hash (every loop iteration costs a deadline check, see
	// Equal): the length, the first four bytes, the middle and last bytes.
	n := len(b)
	h := uint32(n)*0x9e3779b1 ^ uint32(b[n/2])<<16 ^ uint32(b[n-1])<<8
	if n >= 4 {
		h ^= *(*uint32)(unsafe.Pointer(&b[0])) * 0x85ebca6b
	} else {
		h ^= uint32(b[0])
	}
	h ^= h >> 15
	slot := &internTab[(h^h>>8)&255]
	if Equal(*slot, unsafe.String(&b[0], n)) {
		return *slot
	}
	s := string(b)
	*slot = s
	return s
}

// The cluster functions call their imports directly, like nodeTaint, so a
// guest that never reads the cluster does not import them (docs/abi.md §7).
