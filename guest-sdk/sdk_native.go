//go:build !wasip1

package sdk

import (
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

// RunFilter runs the registered Filter natively, or returns Success (as
// the scheduler treats a policy without one: its PreFilter judges the pod).
func RunFilter(pod *PodData, node *NodeData) Status {
	enterCycle(pod)
	if st, ok := use(pod, node); !ok || filterFn == nil {
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
