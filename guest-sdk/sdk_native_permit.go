//go:build !wasip1

package sdk

import (
	"strings"
	"time"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

// Waiting pods, natively.

// WaitingPodData is a pod waiting at the policy in a native run: what
// WaitingPods lists, and its labels for the selector.
type WaitingPodData struct {
	UID, Namespace, Name, Node string
	Labels                     map[string]string
}

var (
	nativeWaiting  []WaitingPodData
	nativeAllowed  []string
	nativeRejected map[string]string
)

// SetWaiting sets the pods waiting at the policy natively, and clears
// what Allowed and Rejected report.
func SetWaiting(pods []WaitingPodData) {
	nativeWaiting, nativeAllowed, nativeRejected = pods, nil, nil
}

// Allowed are the UIDs the policy allowed since SetWaiting, in order.
func Allowed() []string { return nativeAllowed }

// Rejected are the UIDs the policy rejected since SetWaiting, with the
// messages.
func Rejected() map[string]string { return nativeRejected }

// RunPermit runs the registered Permit natively for pod on node, in the
// pod's current cycle, and returns its status (Success when none is
// registered); a Wait's Timeout is rounded up to whole milliseconds, as
// the host reads it.
func RunPermit(pod *PodData, node *NodeData) Status {
	enterCycle(pod)
	st, ok := use(pod, node)
	if !ok || permitFn == nil {
		return st
	}
	nativeKind = abi.Permit
	defer func() { nativeKind = abi.NumPoints }()
	st = asReported(permitFn(Pod{}, Node{}))
	if st.Code == CodeWait {
		// As the host reads a wait: whole milliseconds, more than 0 and
		// at most the policy's maxPermitWait (SetMaxPermitWait).
		ms := permitMillis(st)
		st.Timeout = time.Duration(ms) * time.Millisecond
		switch {
		case ms <= 0:
			return Error("permit returned Wait with a wait of 0 ms: return how long the pod may wait")
		case st.Timeout > nativeMaxPermitWait:
			return Error("permit asked to wait " + st.Timeout.String() + ", more than policies[].maxPermitWait (" + nativeMaxPermitWait.String() + ")")
		}
	}
	return st
}

// nativeMaxPermitWait is the policy's maxPermitWait natively.
var nativeMaxPermitWait = time.Minute

// SetMaxPermitWait sets the policy's maxPermitWait natively (default 1m,
// as in the scheduler): a Wait longer than it is the policy's error.
func SetMaxPermitWait(d time.Duration) { nativeMaxPermitWait = d }

func waitingAvailable() bool {
	return nativeKind == abi.Permit || nativeKind == abi.PostFilter || nativeKind == abi.Unreserve
}

func waitingPods(selector string) ([]byte, int32) {
	if !waitingAvailable() {
		return nil, abi.NotAvailable
	}
	match, ok := parseSelector(selector)
	if !ok {
		return nil, abi.BadArgs
	}
	var recs [][4]string
	for _, p := range nativeWaiting {
		if match(p.Labels) {
			recs = append(recs, [4]string{p.UID, p.Namespace, p.Name, p.Node})
		}
	}
	for i := 1; i < len(recs); i++ { // by namespace, then name
		for j := i; j > 0 && recs[j][1]+"/"+recs[j][2] < recs[j-1][1]+"/"+recs[j-1][2]; j-- {
			recs[j], recs[j-1] = recs[j-1], recs[j]
		}
	}
	return model.EncodeWaiting(recs), 0
}

// take removes the waiting pod uid, reporting whether it was waiting.
func take(uid string) bool {
	for i, p := range nativeWaiting {
		if p.UID == uid {
			nativeWaiting = append(nativeWaiting[:i:i], nativeWaiting[i+1:]...)
			return true
		}
	}
	return false
}

func permitAllow(uid string) int32 {
	switch {
	case !waitingAvailable():
		return abi.NotAvailable
	case !take(uid):
		return abi.NotFound
	}
	nativeAllowed = append(nativeAllowed, uid)
	return 0
}

func permitReject(uid, msg string) int32 {
	switch {
	case !waitingAvailable():
		return abi.NotAvailable
	case !take(uid):
		return abi.NotFound
	}
	if nativeRejected == nil {
		nativeRejected = map[string]string{}
	}
	nativeRejected[uid] = msg
	return 0
}

// parseSelector parses an equality-based label selector: requirements
// "k=v", "k==v", "k!=v", "k" and "!k", separated by commas.
func parseSelector(s string) (func(map[string]string) bool, bool) {
	type req struct {
		key, val string
		op       byte // '=', '!', 'e' (exists), 'n' (not exists)
	}
	var reqs []req
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		switch {
		case part == "":
			if s != "" && strings.TrimSpace(s) != "" {
				return nil, false
			}
		case strings.Contains(part, "!="):
			k, v, _ := strings.Cut(part, "!=")
			reqs = append(reqs, req{strings.TrimSpace(k), strings.TrimSpace(v), '!'})
		case strings.Contains(part, "="):
			k, v, _ := strings.Cut(part, "=")
			reqs = append(reqs, req{strings.TrimSpace(k), strings.TrimPrefix(strings.TrimSpace(v), "="), '='})
		case strings.HasPrefix(part, "!"):
			reqs = append(reqs, req{strings.TrimSpace(part[1:]), "", 'n'})
		case strings.ContainsAny(part, " ()"):
			return nil, false // set-based: the host's alone
		default:
			reqs = append(reqs, req{part, "", 'e'})
		}
	}
	for _, r := range reqs {
		if r.key == "" || !abi.QualifiedName(r.key) {
			return nil, false
		}
	}
	return func(labels map[string]string) bool {
		for _, r := range reqs {
			v, ok := labels[r.key]
			switch r.op {
			case '=':
				if !ok || v != r.val {
					return false
				}
			case '!':
				if ok && v == r.val {
					return false
				}
			case 'e':
				if !ok {
					return false
				}
			case 'n':
				if ok {
					return false
				}
			}
		}
		return true
	}, true
}
