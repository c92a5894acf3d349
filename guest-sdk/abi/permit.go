package abi

// Permit and waiting pods (ABI v4, docs/abi.md §3.7 and §4.9). A permit
// that returns status Wait makes its pod wait, for at most the returned
// milliseconds, until the policy allows it; a later call of the same
// policy (another pod's permit, a postfilter, an unreserve) lists the
// pods waiting at it and allows or rejects them.

// Host functions of waiting pods.
const (
	// FnPermitWaiting is `permit_waiting(sel_ptr, sel_len, buf, cap) -> i32`.
	FnPermitWaiting = "permit_waiting"
	// FnPermitAllow is `permit_allow(uid_ptr, uid_len) -> i32`.
	FnPermitAllow = "permit_allow"
	// FnPermitReject is `permit_reject(uid_ptr, uid_len, msg_ptr, msg_len) -> i32`.
	FnPermitReject = "permit_reject"
)

// WaitingColumns is how many strings each record of permit_waiting has:
// the pod's UID, namespace, name, and the node it waits on.
const WaitingColumns = 4

// Bounds of the waiting-pod functions' inputs: a longer selector or UID
// is refused unread (BadArgs).
const (
	MaxSelectorLen = 4096
	MaxUIDLen      = 128
)

// MaxPermitWaitMillis is the longest a pod can wait at Permit, as
// kube-scheduler bounds it (15 minutes); a policy's maxPermitWait is at
// most this.
const MaxPermitWaitMillis = 15 * 60 * 1000
