package hostabi

import fwk "k8s.io/kube-scheduler/framework"

// Limits of what one call may hand the host.
const (
	// MaxCycleStateSize bounds what prefilter/prescore may store per cycle.
	MaxCycleStateSize = 1 << 20
	// MaxLogSize bounds one log call from a guest.
	MaxLogSize = 16 << 10
)

// Cycle is what a policy's guest calls of one cycle share through the
// host: the guest's cycle state, and what its calls asked of the host
// (prefilter_nodes, recheck_on, patches). The runtime's PolicyCycle adds
// the cycle's budget.
type Cycle struct {
	// State is the guest's cycle state (cycle_state_set, cycle_state_get).
	State []byte
	// Scored are the nodes of normalize_score's scores, in score order:
	// there select_node(i) makes node i current. Ignored unless there is
	// one node per score.
	Scored []fwk.NodeInfo
	// NodeNames, when NodeNamesSet, are the only nodes the pod may run on,
	// as the policy's prefilter named them (prefilter_nodes).
	NodeNames    []string
	NodeNamesSet bool
	// Recheck is what a preenqueue call asked with recheck_on, when
	// RecheckSet (otherwise DefaultRecheck applies).
	Recheck    Recheck
	RecheckSet bool
	// Patch collects what a prebind call wrote with patch_label and
	// patch_annotation.
	Patch Patch
	// Policies is cycle_policies' answer in prebind (EncodeCyclePolicies);
	// nil elsewhere.
	Policies []byte
	// Waiting are the pods waiting at the policy, in permit, postfilter
	// and unreserve (nil elsewhere, or outside a scheduler).
	Waiting Waiting
}
