package wasmpolicy

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework"
)

// cycleData is the plugin's entry in the framework's CycleState: everything
// it knows about one scheduling cycle (one pod, from PreFilter to Reserve or
// PostFilter): what the cycle shares, and each policy's run of it (runs,
// one per policy, in the order of policies).
type cycleData struct {
	pod *host.PodState
	// policies are the policies this cycle runs: those of the set
	// published when it started whose scope takes the pod.
	policies []*policy
	runs     []policyRun
	// notEvaluated is set when a policy rejected a node (or the pod at
	// PreFilter) only because its call could not start in time: if no node
	// fits, PostFilter has the pod retried soon.
	notEvaluated atomic.Bool
	// batching is false when every node gets its own guest call (Explain).
	batching bool
	// shareWait is how long the pod waits for its namespace's share of
	// scheduling time (PreFilter turned it away; PostFilter retries it).
	shareWait time.Duration

	// Filter batches over nodes, "the PreFilter list" below: the node
	// list given to PreFilter, or in a pod-group cycle trying a placement
	// the placement's nodes, the ones Filter is asked about
	// (filteredNodes).
	nodes []fwk.NodeInfo
	index *nodeIndex

	// Score batches over the feasible nodes given to PreScore; scoring is
	// set once PreScore has started.
	scoring    bool
	scoreNodes []fwk.NodeInfo
	// scoreOf maps a node's position in the PreFilter list to 1 + its
	// position in scoreNodes (0: not scored); when some scored node is not
	// in that list, scorePos maps them by identity instead.
	scoreOf  []int32
	scorePos map[unsafe.Pointer]int
	// batchNodes are scoreNodes in the order of the PreFilter list, which
	// the score batches run over (batchOf: a PreFilter position to 1 + its
	// index there); nil when scoreOf is. The scheduler's list of feasible
	// nodes comes in the order its parallel Filter found them, another in
	// each cycle, so batches cut from it were other groups of nodes in
	// every cycle, and the memo's whole batches, which a batch's first
	// node finds, were never found again (BenchmarkManyPolicies: a quarter
	// of the batches stored anew each cycle, 1.6 MB).
	batchNodes []fwk.NodeInfo
	batchOf    []int32
	mu         sync.Mutex

	// canaries pair the cycle's canary policies with their primaries;
	// hasPrimaries says some run has a primary's pair.
	canaries     []*canaryPair
	hasPrimaries bool

	// bindNode is a copy of the chosen node, taken at Reserve for the
	// policies' prebind (under mu; nil when no policy has one).
	bindNode     fwk.NodeInfo
	bindNodeName string

	// record is set when a tool records the cycle (Explain): every policy
	// is then evaluated on every node, and each verdict written down.
	record *cycleRecord
}

// policyRun is one policy's part of a cycle.
type policyRun struct {
	// module is the module version the policy runs for this whole cycle.
	module module
	// pc is the policy's state for the cycle: what its guest stored with
	// cycle_state_set, and its cycle budget.
	pc host.PolicyCycle
	// stopped is why the policy is not called again in this cycle ("" while
	// it may be called): its open circuit breaker, or the first failed call
	// of the cycle. Under cycleData.mu; one reason per policy and cycle, so
	// that the nodes left get one status the scheduler can aggregate.
	stopped string
	// filterSkipped and scoreSkipped mark a policy that does not filter (or
	// score) this pod: no module, no such export, Skip, or an ignored failure.
	filterSkipped, scoreSkipped bool
	// rejectedBy is set when the policy rejected the pod on some node.
	rejectedBy atomic.Bool
	// filterBatches are its Filter batches of BatchSize nodes over the
	// PreFilter list; scoreBatches its Score batches (nil: single calls).
	filterBatches, scoreBatches []batch
	// rawScores are its raw scores, per node of scoreNodes;
	// rawScoresOffList those of nodes outside scoreNodes, by name (under
	// cycleData.mu).
	rawScores        []int64
	rawScoresOffList map[string]int64
	// audit holds its verdicts in Audit mode (under cycleData.mu).
	audit *auditState
	// primary is its canary pair when the policy is a primary.
	primary *canaryPair
}

// Clone implements fwk.StateData. The pinned modules, the pod and the batch
// results are shared: results are keyed by NodeInfo identity, and the
// preemption's cloned NodeInfos never match them, so they are evaluated anew.
func (c *cycleData) Clone() fwk.StateData { return c }

// newCycle pins every policy's serving module for a new cycle of pod.
func (w *WasmPolicy) newCycle(pod *v1.Pod, batching bool) *cycleData {
	policies := w.current().forPod(pod, w.nsLabels)
	c := &cycleData{
		pod:      host.NewPodState(pod),
		policies: policies,
		runs:     make([]policyRun, len(policies)),
		batching: batching,
	}
	c.pod.Cluster = w.clusterView(policies)
	for i, p := range policies {
		c.runs[i].module = p.runtime.Current()
		c.runs[i].pc.Budget = host.NewBudget(p.budget)
		w.chargeTo(p, &c.runs[i].pc)
		if c.runs[i].module == nil {
			continue
		}
		// A quarantined pod is answered without a call, and never takes
		// the breaker's half-open probe.
		if why, _ := p.quarantine.holds(pod); why != "" {
			c.runs[i].pc.Budget.Stop(&host.CallError{Outcome: host.OutcomeStopped, Err: errors.New(why)})
			c.runs[i].stopped = why + "; fix the policy for pods like this one, or raise its timeout; the pod is retried when the quarantine ends or a new module loads"
			p.m.stoppedCycle(reasonQuarantined)
			continue
		}
		if why := p.breaker.admit(pod); why != "" {
			c.runs[i].pc.Budget.Stop(&host.CallError{Outcome: host.OutcomeStopped, Err: errors.New(why)})
			c.runs[i].stopped = why + "; fix the policy and push a new module (a new version closes the breaker)"
			p.m.stoppedCycle(reasonBreakerOpen)
		}
	}
	for _, p := range policies {
		if p.canary != nil {
			c.pairCanaries()
			break
		}
	}
	return c
}

// stopReason returns why policy i is not called again in this cycle, or "".
func (c *cycleData) stopReason(i int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[i].stopped
}

// cycleFor returns the pod's cycle from CycleState, starting one when there
// is none (or it belongs to another pod).
func (w *WasmPolicy) cycleFor(state fwk.CycleState, pod *v1.Pod) *cycleData {
	if state != nil {
		if l := w.last.Load(); l != nil && sameState(l.state, state) && l.c.pod.Pod.UID == pod.UID {
			return l.c
		}
		if d, err := state.Read(stateKey); err == nil {
			if c, ok := d.(*cycleData); ok && c.pod.Pod.UID == pod.UID {
				w.last.Store(&lastCycle{state, c})
				return c
			}
		}
	}
	c := w.newCycle(pod, true)
	if state != nil {
		if pg := framework.PodGroupState(state); pg != nil {
			memberKeys(pg).take(c.pod)
		}
		if r := readRecord(state); r != nil {
			r.start(c)
		}
		state.Write(stateKey, c)
		w.last.Store(&lastCycle{state, c})
	}
	return c
}

// podGroupMembers are the PodStates of the last cycle of each member a
// pod-group cycle tried, by pod object. The cycle tries every member once
// per placement (five racks: five cycles of each pod), against a pod
// object that does not change meanwhile, so a member's next cycle takes
// the pod keys its last one computed (PodState.TakeKeys) instead of
// converting and hashing every part of the pod again.
type podGroupMembers struct {
	mu   sync.Mutex
	last map[*v1.Pod]*host.PodState
}

const podGroupMembersKey fwk.StateKey = Name + "/members"

// Clone implements fwk.StateData: the members are the pod-group cycle's.
func (m *podGroupMembers) Clone() fwk.StateData { return m }

// memberKeys returns the pod-group cycle's podGroupMembers, adding them
// to pg if they are not there yet.
func memberKeys(pg framework.StateStore) *podGroupMembers {
	if d, err := pg.Read(podGroupMembersKey); err == nil {
		if m, ok := d.(*podGroupMembers); ok {
			return m
		}
	}
	m := &podGroupMembers{last: map[*v1.Pod]*host.PodState{}}
	pg.Write(podGroupMembersKey, m)
	return m
}

// take gives ps the keys the pod's last cycle computed, and makes ps the
// pod's last cycle.
func (m *podGroupMembers) take(ps *host.PodState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps.TakeKeys(m.last[ps.Pod])
	m.last[ps.Pod] = ps
}

// lastCycle is the cycle cycleFor found last and the CycleState it is in:
// the Filter and Score calls of one cycle ask for it about 1300 times in a
// 1000-node cycle, and CycleState.Read hashes its key's interface each time
// (5% of the cycle, BenchmarkCycle). Holding state keeps it alive, so its
// address cannot be taken by another CycleState while it is cached; only
// this plugin writes stateKey, and it replaces the entry when it does.
type lastCycle struct {
	state fwk.CycleState
	c     *cycleData
}

// sameState reports whether two CycleStates are the same object (type and
// pointer), without comparing values: == on interfaces panics for dynamic
// types that are not comparable.
func sameState(a, b fwk.CycleState) bool {
	return *(*[2]unsafe.Pointer)(unsafe.Pointer(&a)) == *(*[2]unsafe.Pointer)(unsafe.Pointer(&b))
}

// identity is the pointer a NodeInfo holds, as a map key: a map keyed by
// the interface hashes its dynamic type on every lookup, which cost a fifth
// of a remembered Filter (BenchmarkCycle). Lookups check the value they
// find against the NodeInfo itself.
func identity(ni fwk.NodeInfo) unsafe.Pointer {
	return (*[2]unsafe.Pointer)(unsafe.Pointer(&ni))[1]
}

// readCycle returns the cycle stored in CycleState, or nil.
func readCycle(state fwk.CycleState) *cycleData {
	d, err := state.Read(stateKey)
	if err != nil {
		return nil
	}
	c, _ := d.(*cycleData)
	return c
}

// nodeIndex maps the NodeInfos of a PreFilter node list to their positions.
type nodeIndex struct {
	first fwk.NodeInfo
	n     int
	pos   map[unsafe.Pointer]int // by identity
}

// position returns the node's index in the PreFilter list, or -1 when it is
// not there (a clone made by preemption or for nominated pods).
func (c *cycleData) position(ni fwk.NodeInfo) int {
	if c.index != nil {
		if p, ok := c.index.pos[identity(ni)]; ok && p < len(c.nodes) && c.nodes[p] == ni {
			return p
		}
	}
	return -1
}

// filteredNodes is the list the cycle's batches are laid out on: the nodes
// the scheduler will filter. In a pod-group cycle trying a placement
// (TopologyAwareWorkloadScheduling), PreFilter is given every node but
// Filter and Score are asked about the placement's only; batches over the
// whole list would each evaluate mostly nodes never asked about (the
// snapshot interleaves zones, so a rack's nodes are spread over every
// batch). The placement's list holds the snapshot's own NodeInfos, so
// positions in it are found by identity as in the whole list.
// Placements exist only in pod-group cycles, so other cycles (among them
// a tool's, which may run over a snapshot of its own) never ask.
func (w *WasmPolicy) filteredNodes(state fwk.CycleState, nodes []fwk.NodeInfo) []fwk.NodeInfo {
	if w.handle == nil || !framework.InPodGroupCycle(state) {
		return nodes
	}
	l := w.handle.SnapshotSharedLister()
	if l == nil {
		return nodes
	}
	if in := framework.PlacementNodes(l); len(in) > 0 && len(in) < len(nodes) {
		return in
	}
	return nodes
}

// indexFor returns the position index of the node list, rebuilding it when
// the list changed.
func (w *WasmPolicy) indexFor(nodes []fwk.NodeInfo) *nodeIndex {
	if len(nodes) == 0 {
		return nil
	}
	if idx := w.index.Load(); idx != nil && idx.n == len(nodes) && idx.first == nodes[0] && idx.pos[identity(nodes[len(nodes)-1])] == len(nodes)-1 {
		return idx
	}
	idx := &nodeIndex{first: nodes[0], n: len(nodes), pos: make(map[unsafe.Pointer]int, len(nodes))}
	for i, ni := range nodes {
		idx.pos[identity(ni)] = i
	}
	w.index.Store(idx)
	return idx
}

// auditFor returns policy i's audit state for the cycle.
func (c *cycleData) auditFor(i int) *auditState {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs[i].audit == nil {
		c.runs[i].audit = &auditState{}
	}
	return c.runs[i].audit
}
