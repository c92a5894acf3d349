//go:build wasip1

package sdk

import (
	"time"
	"unsafe"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
)

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
