package wasmpolicy

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/schedcycle"
	"github.com/wasmsched/wasmsched/internal/verdict"
)

// recordKey is where a tool's CycleState holds a cycleRecord: the plugin
// then records the cycle for the tool (Explain) as it runs it.
const recordKey fwk.StateKey = Name + "/record"

// cycleRecord is a cycle run for a tool, written by the plugin's own
// PreFilter, Filter, PreScore, Score and NormalizeScore. In a recorded
// cycle every policy is evaluated on every node it is asked about, also
// after another policy rejected the node, and a policy in Audit mode as if
// it enforced: its verdicts are recorded, and only enforced verdicts make
// the statuses the framework gets, as in the scheduler.
type cycleRecord struct {
	// singleCalls gives every node its own guest call; cluster replaces
	// the cycle's cluster view (nil: the plugin's).
	singleCalls bool
	cluster     *host.ClusterView
	// c is the recorded cycle (set when it starts).
	c *cycleData

	mu sync.Mutex
	// pre is each policy's PreFilter verdict; named the nodes its
	// prefilter_nodes named (nil: it named none).
	pre   []verdict.Verdict
	named []sets.Set[string]
	// nodes holds each node's verdicts by name, one per policy.
	nodes map[string][]PolicyVerdict
}

// Clone implements fwk.StateData: the record is one for the whole cycle.
func (r *cycleRecord) Clone() fwk.StateData { return r }

// outsidePreFilterResult is what a policy's own prefilter_nodes make of a
// node they leave out: kube-scheduler's status for a node outside the
// plugin's PreFilter result (the plugin's result is its enforced
// policies' lists intersected).
var outsidePreFilterResult = schedcycle.OutsidePreFilterResult(sets.New(Name)).Message()

// readRecord returns the record state asks for, or nil.
func readRecord(state fwk.CycleState) *cycleRecord {
	d, err := state.Read(recordKey)
	if err != nil {
		return nil
	}
	r, _ := d.(*cycleRecord)
	return r
}

// start ties the record to the cycle it records.
func (r *cycleRecord) start(c *cycleData) {
	r.c = c
	c.record = r
	c.batching = !r.singleCalls
	if r.cluster != nil {
		c.pod.Cluster = r.cluster
	}
	r.pre = make([]verdict.Verdict, len(c.policies))
	r.named = make([]sets.Set[string], len(c.policies))
	r.nodes = map[string][]PolicyVerdict{}
}

// preFilter records policy i's PreFilter verdict and the nodes it named.
func (r *cycleRecord) preFilter(i int, v verdict.Verdict) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pre[i] = v
	if pc := &r.c.runs[i].pc; pc.NodeNamesSet {
		r.named[i] = sets.New(pc.NodeNames...)
	}
}

// outside reports whether policy i's prefilter_nodes leave node out.
func (r *cycleRecord) outside(i int, node string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.named[i] != nil && !r.named[i].Has(node)
}

// on returns policy i's verdict on node for writing (under r.mu).
func (r *cycleRecord) on(node string, i int) *PolicyVerdict {
	vs := r.nodes[node]
	if vs == nil {
		vs = make([]PolicyVerdict, len(r.c.policies))
		for j, p := range r.c.policies {
			vs[j].Policy, vs[j].Mode = p.cfg.Name, string(p.mode())
		}
		r.nodes[node] = vs
	}
	return &vs[i]
}

// filtered records policy i's Filter verdict on node: its code (Pass,
// Skip, or the rejection's) and reason.
func (r *cycleRecord) filtered(node string, i int, code, reason string, took time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pv := r.on(node, i)
	pv.Verdict, pv.Reason, pv.FilterTime = code, reason, took
}

// scored records policy i's raw score on node, and why it failed if it did.
func (r *cycleRecord) scored(node string, i int, raw int64, why string, took time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pv := r.on(node, i)
	pv.RawScore, pv.ScoreTime = &raw, took
	if why != "" {
		pv.Reason = why
	}
}

// normalized records policy i's final scores (vals, in the order of
// names), or why they do not count.
func (r *cycleRecord) normalized(names []string, i int, vals []int64, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for j, n := range names {
		pv := r.on(n, i)
		if why != "" {
			pv.Reason = why
			continue
		}
		if vals != nil {
			s := vals[j]
			pv.Score = &s
		}
	}
}

// verdictsOn returns every policy's verdict on node. A node the framework
// did not filter (a PreFilter rejection, or outside the PreFilter result)
// gets the verdicts PreFilter gave; a policy with none is NotRun.
func (r *cycleRecord) verdictsOn(node string) []PolicyVerdict {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]PolicyVerdict, len(r.c.policies))
	copy(out, r.nodes[node])
	for i, p := range r.c.policies {
		pv := &out[i]
		pv.Policy, pv.Mode = p.cfg.Name, string(p.mode())
		if pv.Verdict != "" {
			continue
		}
		switch v := r.pre[i]; {
		case v.Rejects():
			pv.Verdict, pv.Reason = v.Code.String(), v.Reason
			if pv.Reason == "" {
				pv.Reason = p.status(host.CallPreFilter, v).Message()
			}
		case r.named[i] != nil && !r.named[i].Has(node):
			pv.Verdict, pv.Reason = fwk.UnschedulableAndUnresolvable.String(), outsidePreFilterResult
		case r.c.runs[i].module != nil && !r.c.runs[i].module.Exports().Has(host.CallFilter):
			pv.Verdict, pv.Reason = "Pass", "(the policy does not filter)"
		case r.c.runs[i].filterSkipped: // and the framework skipped Filter
			pv.Verdict = "Skip"
		default:
			pv.Verdict = "NotRun"
		}
	}
	return out
}
