//go:build wasip1

package sdk

import "github.com/wasmsched/wasmsched/guest-sdk/abi"

//go:wasmimport wasmsched permit_waiting
func hostPermitWaiting(sp, sl, buf, capacity uint32) int32

//go:wasmimport wasmsched permit_allow
func hostPermitAllow(up, ul uint32) int32

//go:wasmimport wasmsched permit_reject
func hostPermitReject(up, ul, mp, ml uint32) int32

//go:wasmexport permit
func exportPermit(cycle int64) int64 {
	begin(cycle)
	if permitFn == nil {
		return 0
	}
	st := permitFn(Pod{}, Node{})
	report(st)
	return permitMillis(st)
}

// waitingPods calls permit_waiting directly, so only guests that use
// waiting pods import it; code is 0 or the host's error code.
func waitingPods(selector string) ([]byte, int32) {
	n := hostPermitWaiting(strPtr(selector), uint32(len(selector)), 0, 0)
	for n > 0 {
		b := make([]byte, n)
		m := hostPermitWaiting(strPtr(selector), uint32(len(selector)), ptrOf(b), uint32(n))
		if m <= n {
			return b[:max(m, 0)], min(m, 0)
		}
		n = m // more pods began waiting in between: never, within one call
	}
	if n < 0 {
		return nil, n
	}
	return nil, 0
}

func permitAllow(uid string) int32 { return hostPermitAllow(strPtr(uid), uint32(len(uid))) }

func permitReject(uid, msg string) int32 {
	if len(msg) > abi.MaxReasonLength {
		msg = msg[:abi.MaxReasonLength]
	}
	return hostPermitReject(strPtr(uid), uint32(len(uid)), strPtr(msg), uint32(len(msg)))
}
