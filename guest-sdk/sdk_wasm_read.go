//go:build wasip1

package sdk

import (
	"unsafe"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

func podString(field int32) string {
	if p := podStrings[field]; p != nil {
		return *p
	}
	b, _ := read(opPodString, field, "")
	s := string(b)
	podStrings[field] = &s
	return s
}

func podLabel(key string) (string, bool) {
	for i := range podLabels {
		if Equal(podLabels[i].key, key) {
			return podLabels[i].value, podLabels[i].ok
		}
	}
	v, ok := keyed(opPodLabel, key)
	podLabels = append(podLabels, cachedValue{key, v, ok})
	return v, ok
}

func podAnnotation(key string) (string, bool) { return keyed(opPodAnnotation, key) }

func podList(kind int32) []byte {
	if b := podLists[kind]; b != nil {
		return b
	}
	b, _ := read(opPodList, kind, "")
	b = append([]byte{}, b...)
	podLists[kind] = b
	return b
}

func podRequest(name string) int64 {
	// A policy asks with the same strings on every node: their addresses
	// find the answer without comparing bytes.
	if c := &podReqCache[len(name)&7]; c.key == nameKey(name) {
		return c.value
	}
	return podRequestSlow(name)
}

// podRequestSlow is podRequest past its cache (out of line: see col).
//
//go:noinline
func podRequestSlow(name string) int64 {
	v, found := int64(0), false
	for i := range podRequests {
		if Equal(podRequests[i].key, name) {
			v, found = podRequests[i].value, true
			break
		}
	}
	if !found {
		v = hostPodRequest(strPtr(name), uint32(len(name)))
		podRequests = append(podRequests, cachedInt{name, v})
	}
	if p := unsafe.StringData(name); p != nil && len(name) < 1<<30 {
		podReqCache[len(name)&7] = keyedInt{nameKey(name), p, v}
	}
	return v
}

func podPriority() int64 { return hostPodPriority() }

// podObject and nodeObject call their host functions directly, like
// nodeTaint, so only guests that read whole objects import them. They ask
// for the size first (cap 0) and read into a buffer of exactly that size.
func podObject() []byte {
	if podObj != nil {
		return podObj
	}
	n := hostPodObject(abi.ObjectJSON, 0, 0)
	if n == abi.NotDeclared {
		notDeclared(abi.FnPodObject, abi.ObjectJSON)
	}
	if n <= 0 {
		return nil
	}
	b := make([]byte, n)
	if hostPodObject(abi.ObjectJSON, ptrOf(b), uint32(n)) != n {
		return nil
	}
	podObj = b
	return b
}

func nodeObject() []byte {
	if inTable {
		selectForHost()
	}
	n := hostNodeObject(abi.ObjectJSON, 0, 0)
	if n == abi.NotDeclared {
		notDeclared(abi.FnNodeObject, abi.ObjectJSON)
	}
	if n <= 0 {
		return nil
	}
	b := make([]byte, n)
	if hostNodeObject(abi.ObjectJSON, ptrOf(b), uint32(n)) != n {
		return nil
	}
	return b
}

func nodeName() string {
	if inTable || inBatch {
		if v, _, ok := tableKeyed(abi.ColName, ""); ok {
			return v
		}
	}
	b, _ := read(opNodeString, model.NodeName, "")
	return intern(b)
}

// nodeString reads node_string's other fields (no table column carries
// them).
func nodeString(field int32) string {
	if field == model.NodeName {
		return nodeName()
	}
	b, _ := read(opNodeString, field, "")
	return string(b)
}

func nodeLabel(key string) (string, bool) {
	if v, found, ok := tableKeyedFast(abi.ColLabel, key); ok {
		return v, found
	}
	return nodeKeyedSlow(abi.ColLabel, opNodeLabel, key)
}

func nodeAnnotation(key string) (string, bool) {
	if v, found, ok := tableKeyedFast(abi.ColAnnotation, key); ok {
		return v, found
	}
	return nodeKeyedSlow(abi.ColAnnotation, opNodeAnnotation, key)
}

// nodeKeyedSlow is nodeLabel and nodeAnnotation past tableKeyedFast (out
// of line: see col).
//
//go:noinline
func nodeKeyedSlow(kind string, op int, key string) (string, bool) {
	if inTable || inBatch {
		if v, found, ok := tableKeyed(kind, key); ok {
			return v, found
		}
	}
	return keyed(op, key)
}

func nodeList(kind int32) []byte {
	b, _ := read(opNodeList, kind, "")
	return b
}

// nodeTaint calls node_taint directly, not through hostRead: a function
// the switch there names is imported by every Go-built guest, and a guest
// that never reads a taint by key must still load on a host without
// node_taint (docs/abi.md §7). The linker keeps this import only in guests
// that call Node.Taint.
func nodeTaint(key string) []byte {
	if inTable {
		selectForHost()
	}
	kp, kl := strPtr(key), uint32(len(key))
	n := hostNodeTaint(kp, kl, ptrOf(scratch), uint32(len(scratch)))
	if n < 0 {
		return nil
	}
	if int(n) > len(scratch) {
		scratch = make([]byte, int(n)+256)
		if n = hostNodeTaint(kp, kl, ptrOf(scratch), uint32(len(scratch))); n < 0 || int(n) > len(scratch) {
			return nil
		}
	}
	return scratch[:n]
}

// resourceColumns are the table columns of node_resource's kinds.
var resourceColumns = [...]string{model.ResourceAllocatable: abi.ColAllocatable, model.ResourceCapacity: abi.ColCapacity, model.ResourceRequested: abi.ColRequested,
	model.ResourceNonZeroRequested: abi.ColNonZeroRequested}

func nodeResource(kind int32, name string) int64 {
	if v, ok := tableResource(kind, name); ok {
		return v
	}
	return nodeResourceSlow(kind, name)
}

// nodeResourceSlow is nodeResource without a cached column (out of line:
// see col).
//
//go:noinline
func nodeResourceSlow(kind int32, name string) int64 {
	if inTable || inBatch {
		if v, ok := tableResourceSlow(kind, name); ok {
			return v
		}
		selectForHost()
	}
	return hostNodeResource(kind, strPtr(name), uint32(len(name)))
}

func nodePodCount() int {
	if inTable || inBatch {
		if v, ok := tableInt(abi.ColPodCount, ""); ok {
			return int(v)
		}
		selectForHost()
	}
	return int(max(0, hostNodePodCount()))
}

func nodeTaintEffects() int64 {
	if inTable || inBatch {
		if v, ok := tableInt(abi.ColTaintEffects, ""); ok {
			return v
		}
	}
	var v int64
	r := abi.NewListReader(nodeList(model.NodeTaints))
	for r.Len() >= 3 {
		r.Next()
		r.Next()
		e, _ := r.Next()
		v |= int64(model.TaintBit(string(e)))
	}
	return v
}

func nodeImageSize(name string) int64 {
	if name == "" {
		return -1 // no image has an empty name; and an "image:" column would have the table refused
	}
	if inTable || inBatch {
		if v, ok := tableInt(abi.ColImage, name); ok {
			return v
		}
	}
	size := int64(-1)
	r := abi.NewListReader(nodeList(model.NodeImages))
	for r.Len() >= 2 {
		n, _ := r.Next()
		s, _ := r.Next()
		if bytesEqual(n, name) {
			size = parseInt(s)
		}
	}
	return size
}

func nodeUnschedulable() bool {
	if inTable || inBatch {
		if v, ok := tableInt(abi.ColUnschedulable, ""); ok {
			return v == 1
		}
		selectForHost()
	}
	return hostNodeUnschedulable() == 1
}

func config() string {
	if configValue != nil {
		return *configValue
	}
	return configSlow()
}

// configSlow reads the config once (out of line: see col).
//
//go:noinline
func configSlow() string {
	if configValue == nil {
		b, _ := read(opConfig, 0, "")
		s := string(b)
		configValue = &s
	}
	return *configValue
}

func setCycleState(b []byte) {
	hostCycleStateSet(ptrOf(b), uint32(len(b)))
	cycleData, cycleDataValid = append([]byte(nil), b...), true
}

func cycleState() []byte {
	if !cycleDataValid {
		b, ok := read(opCycleState, 0, "")
		if ok {
			cycleData = append([]byte{}, b...)
		}
		cycleDataValid = true
	}
	return cycleData
}

func logV(level int32, msg string, kv []string) {
	b := abi.AppendListHeader(nil, 1+len(kv))
	b = abi.AppendString(b, msg)
	for _, s := range kv {
		b = abi.AppendString(b, s)
	}
	hostLog(level, ptrOf(b), uint32(len(b)))
}

// cycleNodes is cluster_nodes' answer in this cycle, -1 before the first:
// the view is the cycle's snapshot, so the count cannot change within a
// cycle, and a policy that divides by it on every node (ImageLocality's
// port) saves a host call per node. The host has seen the first read, so
// its rules for verdicts of policies that read the cluster (docs/abi.md
// §3.4) hold as if every call read it.
var cycleNodes int32 = -1

func clusterNodes() int {
	if cycleNodes >= 0 {
		return int(cycleNodes)
	}
	n := hostClusterNodes()
	if n == abi.NotDeclared {
		notDeclared(abi.FnClusterNodes, -1)
	}
	if n >= 0 {
		cycleNodes = n
	}
	return int(max(0, n))
}

// clusterNode reads one field of node i into scratch (valid until the next
// read); nil on any error.
func clusterNode(i int, kind int32) []byte {
	if i < 0 || i >= 1<<31-1 {
		return nil
	}
	n := hostClusterNode(int32(i), kind, ptrOf(scratch), uint32(len(scratch)))
	if n == abi.NotDeclared {
		notDeclared(abi.FnClusterNode, kind)
	}
	if n < 0 {
		return nil
	}
	if int(n) > len(scratch) {
		scratch = make([]byte, int(n)+256)
		if n = hostClusterNode(int32(i), kind, ptrOf(scratch), uint32(len(scratch))); n < 0 || int(n) > len(scratch) {
			return nil
		}
	}
	return scratch[:n]
}

func countPods(t *CountTerm) map[string]int64 {
	e := countEntry(t)
	if e == nil {
		return nil
	}
	if e.value == nil {
		e.value = decodeInts(e.list)
	}
	return e.value
}

// countList is count_pods' encoded answer for t, kept for the cycle; nil
// on an error.
func countList(t *CountTerm) []byte {
	if e := countEntry(t); e != nil {
		return e.list
	}
	return nil
}

// countEntry reads count_pods for t once per cycle: the encoding, and the
// map once CountPods asked for it.
func countEntry(t *CountTerm) *cachedCount {
	term := t.AppendJSON(nil)
	for _, c := range counts {
		if Equal(c.term, string(term)) {
			return c
		}
	}
	tp, tl := ptrOf(term), uint32(len(term))
	n := hostCountPods(tp, tl, ptrOf(scratch), uint32(len(scratch)))
	if n >= 0 && int(n) > len(scratch) {
		scratch = make([]byte, int(n)+256)
		n = hostCountPods(tp, tl, ptrOf(scratch), uint32(len(scratch)))
	}
	switch {
	case n == abi.NotDeclared:
		notDeclared(abi.FnCountPods, -1)
		return nil
	case n == abi.BadArgs:
		msg := "count_pods refused the term (the scheduler's log says why)"
		hostSetStatus(int32(CodeError), strPtr(msg), uint32(len(msg)))
		return nil
	case n < 0 || int(n) > len(scratch):
		return nil
	}
	e := &cachedCount{term: string(term), list: append([]byte(nil), scratch[:n]...)}
	counts = append(counts, e)
	return e
}

// existingTerms reads existing_terms into scratch (valid until the next
// read); nil on any error.
func existingTerms(kind int32) []byte {
	n := hostExistingTerms(kind, ptrOf(scratch), uint32(len(scratch)))
	if n >= 0 && int(n) > len(scratch) {
		scratch = make([]byte, int(n)+256)
		n = hostExistingTerms(kind, ptrOf(scratch), uint32(len(scratch)))
	}
	if n == abi.NotDeclared {
		notDeclared(abi.FnExistingTerms, kind)
	}
	if n < 0 || int(n) > len(scratch) {
		return nil
	}
	return scratch[:n]
}

// volumeClaimsList reads volume_claims of kind, copied (a caller decodes
// several kinds in turn); nil on any error.
//
// It repeats existingTerms rather than share a helper: TinyGo cannot pass
// a //go:wasmimport function as a value, and a helper that switched on the
// function would import volume_claims into every guest that reads
// existing_terms (a guest must load on a host without the functions it
// never calls, docs/abi.md §7).
func volumeClaimsList(kind int32) []byte {
	n := hostVolumeClaims(kind, ptrOf(scratch), uint32(len(scratch)))
	if n >= 0 && int(n) > len(scratch) {
		scratch = make([]byte, int(n)+256)
		n = hostVolumeClaims(kind, ptrOf(scratch), uint32(len(scratch)))
	}
	if n == abi.NotDeclared {
		notDeclared(abi.FnVolumeClaims, kind)
	}
	if n < 0 || int(n) > len(scratch) {
		return nil
	}
	return append([]byte(nil), scratch[:n]...)
}

// resourceClaimsList reads resource_claims of kind, copied; nil on any
// error. It repeats volumeClaimsList for the reason given there.
func resourceClaimsList(kind int32) []byte {
	n := hostResourceClaims(kind, ptrOf(scratch), uint32(len(scratch)))
	if n >= 0 && int(n) > len(scratch) {
		scratch = make([]byte, int(n)+256)
		n = hostResourceClaims(kind, ptrOf(scratch), uint32(len(scratch)))
	}
	if n == abi.NotDeclared {
		notDeclared(abi.FnResourceClaims, kind)
	}
	if n < 0 || int(n) > len(scratch) {
		return nil
	}
	return append([]byte(nil), scratch[:n]...)
}

func namespaceLabels(ns string) (map[string]string, bool) {
	np, nl := strPtr(ns), uint32(len(ns))
	n := hostNamespaceLabels(np, nl, ptrOf(scratch), uint32(len(scratch)))
	if n >= 0 && int(n) > len(scratch) {
		scratch = make([]byte, int(n)+256)
		n = hostNamespaceLabels(np, nl, ptrOf(scratch), uint32(len(scratch)))
	}
	if n == abi.NotDeclared {
		notDeclared(abi.FnNamespaceLabels, -1)
	}
	if n < 0 || int(n) > len(scratch) {
		return nil, false
	}
	return decodeMap(scratch[:n]), true
}
