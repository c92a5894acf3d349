package hostabi

import (
	"context"

	"github.com/tetratelabs/wazero/api"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

// Waiting is what permit_waiting, permit_allow and permit_reject reach
// (docs/abi.md §3.7): the pods waiting at the calling policy. The plugin
// sets it on the Cycle of a permit, postfilter or unreserve call; it
// answers only for pods that this policy made wait, so a policy sees and
// frees no other policy's (or namespace's) pods.
type Waiting interface {
	// List returns UID, namespace, name and node of the pods waiting at
	// the policy whose labels sel matches, ordered by namespace and name.
	List(sel labels.Selector) [][4]string
	// Allow and Reject report false for a pod not waiting at the policy.
	Allow(uid string) bool
	Reject(uid, msg string) bool
}

// waitingOf is the call's waiting pods, or nil where they are not
// reachable (then the function answers NotAvailable).
func waitingOf(in *Call) Waiting {
	if in.Kind != abi.Permit && in.Kind != abi.PostFilter && in.Kind != abi.Unreserve || in.Cycle == nil {
		return nil
	}
	return in.Cycle.Waiting
}

// decision answers permit_allow or permit_reject: 0 when decide took the
// pod, NotFound when it is not waiting at the policy.
func decision(ok bool) uint64 {
	if ok {
		return 0
	}
	return retNotFound
}

// permitFuncs are the ABI v4 functions of waiting pods (abi.SectionPermit).
var permitFuncs = map[string]api.GoModuleFunc{
	abi.FnPermitWaiting: func(ctx context.Context, m api.Module, s []uint64) {
		w := waitingOf(CallOf(ctx))
		if w == nil {
			s[0] = retNotAvailable
			return
		}
		b, ok := m.Memory().Read(uint32(s[0]), uint32(s[1]))
		if !ok || len(b) > abi.MaxSelectorLen {
			s[0] = retBadArgs
			return
		}
		sel, err := labels.Parse(string(b))
		if err != nil {
			s[0] = retBadArgs
			return
		}
		s[0] = writeOut(m, s[2], s[3], model.EncodeWaiting(w.List(sel)))
	},
	abi.FnPermitAllow: func(ctx context.Context, m api.Module, s []uint64) {
		w := waitingOf(CallOf(ctx))
		if w == nil {
			s[0] = retNotAvailable
			return
		}
		uid, ok := m.Memory().Read(uint32(s[0]), uint32(s[1]))
		if !ok || len(uid) > abi.MaxUIDLen {
			s[0] = retBadArgs
			return
		}
		s[0] = decision(w.Allow(string(uid)))
	},
	abi.FnPermitReject: func(ctx context.Context, m api.Module, s []uint64) {
		w := waitingOf(CallOf(ctx))
		if w == nil {
			s[0] = retNotAvailable
			return
		}
		uid, ok := m.Memory().Read(uint32(s[0]), uint32(s[1]))
		msg, ok2 := m.Memory().Read(uint32(s[2]), min(uint32(s[3]), abi.MaxReasonLength))
		if !ok || !ok2 || len(uid) > abi.MaxUIDLen {
			s[0] = retBadArgs
			return
		}
		s[0] = decision(w.Reject(string(uid), SafeString(msg)))
	},
}
