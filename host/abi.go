package host

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	v1 "k8s.io/api/core/v1"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/abi/fields"
	"github.com/wasmsched/wasmsched/host/internal/hostabi"
	"github.com/wasmsched/wasmsched/internal/kubemodel"
)

// The host side of the ABI is package hostabi; these are the parts of it
// the runtime's callers use, under the names they always had.
type (
	// PodState is the pod of one scheduling cycle as policies see it.
	PodState = hostabi.PodState
	// ClusterView is what a cycle's policies see of the cluster.
	ClusterView = hostabi.ClusterView
	// VolumeLister is what volume_claims reads the pod's claims, their
	// volumes and classes from (ClusterView.Volumes).
	VolumeLister = kubemodel.VolumeLister
	// CountTerm is a parsed count_pods term.
	CountTerm = hostabi.CountTerm
	// NodeCountCache keeps count_pods' per-node counts across cycles.
	NodeCountCache = hostabi.NodeCountCache
	// Result is a guest's status: a code of abi.Code* and its reason.
	Result = hostabi.Result
	// Recheck is when a gated pod is checked again (recheck_on).
	Recheck = hostabi.Recheck
	// Patch is what a prebind call wrote on the pod.
	Patch = hostabi.Patch
	// Counters are a policy's counts (docs/abi.md §3.6), kept across its
	// versions by whoever makes the Policy.
	Counters = hostabi.Counters
	// Waiting are the pods waiting at a policy, as its permit, postfilter
	// and unreserve reach them (docs/abi.md §3.7).
	Waiting = hostabi.Waiting
	// ObjectReader reads one of a policy's declared objects (docs/abi.md
	// §4.10).
	ObjectReader = hostabi.ObjectReader
)

// SetObjects gives the policy's guests the readers of its declared
// objects, in the order of its declaration (objects[i] is read i).
func (p *Policy) SetObjects(readers []ObjectReader) { p.objects.Store(&readers) }

// objectsGen folds the change counts of the policy's declared kinds (1
// and up: 0 is a version that reads none).
func (p *Policy) objectsGen() uint64 {
	h := uint64(14695981039346656037)
	if r := p.objects.Load(); r != nil {
		for _, o := range *r {
			h = (h ^ o.Gen()) * 1099511628211
		}
	}
	return h | 1
}

// NewPodState wraps a cycle's pod for its policies (hostabi.NewPodState).
func NewPodState(pod *v1.Pod) *PodState { return hostabi.NewPodState(pod) }

// NewNodeCountCache returns an empty NodeCountCache for a scheduler
// profile's ClusterViews.
func NewNodeCountCache() *NodeCountCache { return hostabi.NewNodeCountCache() }

// ParseCountTerm parses a count_pods term (hostabi.ParseCountTerm).
func ParseCountTerm(b []byte) (*CountTerm, error) { return hostabi.ParseCountTerm(b) }

// EncodeCyclePolicies is cycle_policies' answer for the policies of a
// cycle, as (name, module sha256, mode) records.
func EncodeCyclePolicies(records [][3]string) []byte { return hostabi.EncodeCyclePolicies(records) }

// DefaultRecheck is when a gated pod whose gate asked nothing is checked
// again: on its own update.
var DefaultRecheck = hostabi.DefaultRecheck

// Limits of what one call may hand the host (docs/security.md).
const (
	// MaxCycleStateSize bounds what prefilter/prescore may store per cycle.
	MaxCycleStateSize = hostabi.MaxCycleStateSize
	// MaxLogSize bounds one log call from a guest.
	MaxLogSize = hostabi.MaxLogSize
)

// PolicyCycle is a policy's state in one scheduling cycle: what its guest
// calls share through the host (hostabi.Cycle: the bytes its guest keeps
// with cycle_state_set, prefilter_nodes, recheck_on, patches) and the
// budget that bounds the guest time the cycle may cost. The zero value has
// no budget: each call is bounded by the policy's timeout only.
type PolicyCycle struct {
	hostabi.Cycle
	// Budget, when set, bounds the policy's calls of this cycle together
	// and stops them all after one of them fails.
	Budget *Budget
	// memo is what the cycle's last batch took from its version's memo
	// (memoTableOf).
	memo atomic.Pointer[cycleMemo]
}

// abiCycle is the part of pc the host functions see (nil for no pc).
func abiCycle(pc *PolicyCycle) *hostabi.Cycle {
	if pc == nil {
		return nil
	}
	return &pc.Cycle
}

// abiPolicy is what host functions see of a Policy (hostabi.Policy).
type abiPolicy struct{ p *Policy }

func (a abiPolicy) Name() string            { return a.p.name }
func (a abiPolicy) Config() []byte          { return a.p.config }
func (a abiPolicy) BadTerm(term []byte)     { a.p.badTerm(term) }
func (a abiPolicy) Refused(fn, why string)  { a.p.refused(fn, why) }
func (a abiPolicy) LogPass(n int) int       { return a.p.pass(n) }
func (a abiPolicy) PatchPrefixes() []string { return a.p.patchPrefixes }
func (a abiPolicy) Objects() []ObjectReader {
	if r := a.p.objects.Load(); r != nil {
		return *r
	}
	return nil
}
func (a abiPolicy) Permits(scope fields.Scope, fn string, num int32) bool {
	return a.p.permits(scope, fn, num)
}

// NodeStarted implements hostabi.Runtime: select_node, or a table batch's
// progress, restarts the deadline for the next node.
func (in *instance) NodeStarted() { in.started.Store(monotonic()) }

// instantiateHostModule adds the ABI's host functions to a runtime, each
// counted toward the calling instance's deadline checks.
func instantiateHostModule(ctx context.Context, rt wazero.Runtime) error {
	b := rt.NewHostModuleBuilder(abi.HostModule)
	for _, f := range abi.HostFunctions {
		fn, ok := hostabi.Funcs[f.Name]
		if !ok {
			return fmt.Errorf("host function %q of the ABI table has no implementation", f.Name)
		}
		sig := hostFunctionSignatures[f.Name]
		b = b.NewFunctionBuilder().WithGoModuleFunction(countHostCalls(fn, lengthParams(f.Params)), sig.params, sig.results).Export(f.Name)
	}
	_, err := b.Instantiate(ctx)
	return err
}
