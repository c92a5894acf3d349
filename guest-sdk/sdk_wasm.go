//go:build wasip1

package sdk

import (
	"unsafe"
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

//go:wasmimport wasmsched resource_claims
func hostResourceClaims(kind int32, buf, capacity uint32) int32

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

//go:wasmexport postfilter
func exportPostFilter(cycle int64) {
	begin(cycle)
	if postFilterFn != nil {
		report(postFilterFn(Pod{}))
	}
}

//go:wasmexport postbind
func exportPostBind(cycle int64) {
	begin(cycle)
	cycleNodes = -1 // postbind, as prebind, has its cycle's id but no cluster
	if postBindFn != nil {
		postBindFn(Pod{}, Node{})
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
