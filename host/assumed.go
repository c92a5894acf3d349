package host

import (
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/host/internal/hostabi"
)

// NodeAssumed tells every engine's caches that a pod-group cycle has put
// the pod uid into ni without giving ni a new generation (the snapshot
// puts the old one back): until NodeForgotten, what was cached of ni is
// not taken for it, and what is cached while the pod is in it is found
// only while it is (hostabi.Generation).
func NodeAssumed(ni fwk.NodeInfo, uid types.UID) { hostabi.Assumed(ni, uid) }

// NodeForgotten undoes NodeAssumed, before the cycle takes the pod out of
// ni again; false when ni held no such mark.
func NodeForgotten(ni fwk.NodeInfo, uid types.UID) bool { return hostabi.Forgotten(ni, uid) }

// AssumedMarks is the number of NodeAssumed marks not yet taken off (0
// whenever no pod-group cycle is under way), and the number ever made in
// this process.
func AssumedMarks() (held, made int64) { return hostabi.AssumedMarks() }
