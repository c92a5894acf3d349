// Command podtopologyspread is kube-scheduler's PodTopologySpread plugin as
// a wasmsched policy, with the system default constraints (the default
// profile's defaultingType System: hostname maxSkew 3 and zone maxSkew 5,
// both ScheduleAnyway, for pods without constraints of their own).
//
// A constraint counts the pods in the pod's namespace, not terminating,
// that its selector matches (with matchLabelKeys' values from the pod
// merged in; an empty selector counts nothing), per value of its topology
// key, over the snapshot's nodes that carry every constraint's key and pass
// its nodeAffinityPolicy (Honor by default: the pod's nodeSelector and
// required node affinity) and nodeTaintsPolicy (Ignore by default).
//
// PreFilter (DoNotSchedule constraints; Skip without any) counts once per
// cycle and hands the counts to Filter in cycle state. Filter: a node
// without a constraint's key is UnschedulableAndUnresolvable; a node where
// count + 1 (if the pod matches its own selector) - the smallest count
// exceeds maxSkew is Unschedulable. The smallest count is 0 while there are
// fewer domains than minDomains.
//
// PreScore (ScheduleAnyway constraints; Skip without any), Score and
// NormalizeScore: upstream takes its domains from the nodes that passed
// Filter, which a policy first learns in NormalizeScore (ScoredNode), so
// Score returns 0 and NormalizeScore computes every node's score: per
// constraint whose key the node has, count × log(domains + 2) + maxSkew - 1
// (for the hostname key, the node's own count and the number of scored
// nodes), rounded; then 100 × (highest + lowest - score) / highest, and 0
// for a node missing a key of the pod's own constraints.
//
// It declares `reads: [Cluster]`: the cluster's nodes, pod counts, and the
// selector of the default constraints.
package main

import (
	"math"
	"strconv"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
	"github.com/wasmsched/wasmsched/guest-sdk/abi"
)

func init() {
	sdk.RegisterPreFilter(preFilter)
	sdk.RegisterFilter(filter)
	sdk.RegisterPreScore(preScore)
	sdk.RegisterScore(score)
	sdk.RegisterNormalizeScore(normalize)
}

const (
	hostnameKey = "kubernetes.io/hostname"
	zoneKey     = "topology.kubernetes.io/zone"

	reasonConstraints  = "node(s) didn't match pod topology spread constraints"
	reasonMissingLabel = reasonConstraints + " (missing required label)"
)

// systemDefaults are upstream's defaults for defaultingType System.
var systemDefaults = []sdk.TopologySpreadConstraint{
	{TopologyKey: hostnameKey, WhenUnsatisfiable: "ScheduleAnyway", MaxSkew: 3},
	{TopologyKey: zoneKey, WhenUnsatisfiable: "ScheduleAnyway", MaxSkew: 5},
}

// constraint is a spread constraint as upstream evaluates it.
type constraint struct {
	maxSkew    int32
	key        string
	selector   *sdk.LabelSelector // nil matches nothing
	minDomains int32
	// Node inclusion: honorAffinity (default true) counts only nodes the
	// pod's nodeSelector and required node affinity accept; honorTaints
	// (default false) only nodes whose NoSchedule/NoExecute taints the pod
	// tolerates.
	honorAffinity, honorTaints bool
}

// constraints are the pod's constraints with whenUnsatisfiable action, or,
// when the pod has none at all, the system defaults with that action and
// the default selector (none if nothing selects the pod). fromPod says
// which.
func constraints(pod sdk.Pod, action string) (cs []constraint, fromPod bool) {
	own := pod.TopologySpreadConstraints()
	if len(own) == 0 {
		sel := pod.DefaultSpreadSelector()
		if sel == nil {
			return nil, false
		}
		for _, d := range systemDefaults {
			if d.WhenUnsatisfiable == action {
				cs = append(cs, constraint{maxSkew: d.MaxSkew, key: d.TopologyKey, selector: sel, minDomains: 1, honorAffinity: true})
			}
		}
		return cs, false
	}
	labels := pod.Labels()
	for _, c := range own {
		if c.WhenUnsatisfiable != action {
			continue
		}
		cs = append(cs, constraint{
			maxSkew:       c.MaxSkew,
			key:           c.TopologyKey,
			selector:      mergeMatchLabelKeys(c.LabelSelector, c.MatchLabelKeys, labels),
			minDomains:    max(c.MinDomains, 1),
			honorAffinity: c.NodeAffinityPolicy != "Ignore",
			honorTaints:   c.NodeTaintsPolicy == "Honor",
		})
	}
	return cs, true
}

// mergeMatchLabelKeys adds "key In (the pod's value)" for each of keys the
// pod has a label for, as upstream merges matchLabelKeys. A nil selector
// stays nil: upstream's selector that matches nothing has no requirements
// to merge into.
func mergeMatchLabelKeys(sel *sdk.LabelSelector, keys []string, podLabels map[string]string) *sdk.LabelSelector {
	if sel == nil || len(keys) == 0 {
		return sel
	}
	out := &sdk.LabelSelector{MatchLabels: sel.MatchLabels, MatchExpressions: append([]sdk.LabelSelectorRequirement(nil), sel.MatchExpressions...)}
	for _, k := range keys {
		if v, ok := podLabels[k]; ok {
			out.MatchExpressions = append(out.MatchExpressions, sdk.LabelSelectorRequirement{Key: k, Operator: "In", Values: []string{v}})
		}
	}
	return out
}

// empty reports a selector without requirements: upstream counts no pod
// for it (though the pod still matches it itself).
func empty(s *sdk.LabelSelector) bool {
	return s != nil && len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0
}

// perNode is how many of the pods on each node (by name) a constraint
// counts; nil counts none.
func perNode(c constraint) map[string]int64 {
	if c.selector == nil || empty(c.selector) {
		return nil
	}
	return sdk.Cluster{}.CountPods(sdk.CountTerm{LabelSelector: c.selector})
}

// policy is a node inclusion policy's value in a count term.
func policy(honor bool) string {
	if honor {
		return sdk.NodeInclusionHonor
	}
	return sdk.NodeInclusionIgnore
}

// domainCounts is how many pods constraint c counts per value of its
// topology key, over the nodes that count for it: those that have every
// key in keys and pass c's node inclusion policies. Every such value is
// present, with 0 where nothing matches (an empty selector counts
// nothing). The host counts once per cycle: one read instead of every
// node's labels.
func domainCounts(c constraint, keys []string) map[string]int64 {
	sel := c.selector
	if empty(sel) {
		sel = nil
	}
	return sdk.Cluster{}.CountPods(sdk.CountTerm{LabelSelector: sel, TopologyKey: c.key, NodeKeys: keys,
		NodeAffinityPolicy: policy(c.honorAffinity), NodeTaintsPolicy: policy(c.honorTaints)})
}

// keysOf is the topology keys of cs.
func keysOf(cs []constraint) []string {
	keys := make([]string, len(cs))
	for i, c := range cs {
		keys[i] = c.key
	}
	return keys
}

// requiredAffinity is the pod's nodeSelector and required node affinity,
// as upstream's GetRequiredNodeAffinity matches them (a malformed term
// matches nothing).
type requiredAffinity struct {
	selector map[string]string
	terms    []sdk.NodeSelectorTerm
}

func (r requiredAffinity) matches(name string, labels map[string]string) bool {
	for k, v := range r.selector {
		if got, ok := labels[k]; !ok || !sdk.Equal(got, v) {
			return false
		}
	}
	return r.terms == nil || sdk.MatchNodeSelectorTerms(r.terms, name, labels)
}

// untolerated reports a NoSchedule or NoExecute taint no toleration tolerates.
func untolerated(taints []sdk.Taint, tolerations []sdk.Toleration) bool {
	for _, t := range taints {
		if t.Effect != "NoSchedule" && t.Effect != "NoExecute" {
			continue
		}
		ok := false
		for _, tol := range tolerations {
			if tol.Tolerates(t) {
				ok = true
				break
			}
		}
		if !ok {
			return true
		}
	}
	return false
}

// filterState is what PreFilter hands Filter, per constraint.
type filterState struct {
	key       string
	maxSkew   int64
	selfMatch int64
	minMatch  int64
	counts    map[string]int64
}

func preFilter(pod sdk.Pod) sdk.Status {
	cs, _ := constraints(pod, "DoNotSchedule")
	if len(cs) == 0 {
		return sdk.Skip()
	}
	keys := keysOf(cs)
	labels := pod.Labels()
	states := make([]filterState, len(cs))
	for i, c := range cs {
		states[i] = filterState{key: c.key, maxSkew: int64(c.maxSkew), counts: domainCounts(c, keys)}
		if c.selector.Matches(labels) {
			states[i].selfMatch = 1
		}
		m := int64(math.MaxInt32)
		for _, v := range states[i].counts {
			m = min(m, v)
		}
		if len(states[i].counts) < int(c.minDomains) {
			m = 0
		}
		states[i].minMatch = m
	}
	sdk.SetCycleState(encodeState(states))
	return sdk.Success()
}

// encodeState writes the states as a string list: per constraint key,
// maxSkew, selfMatch, minMatch, the number of domains, then (domain,
// count) pairs.
func encodeState(states []filterState) []byte {
	n := 0
	for _, s := range states {
		n += 5 + 2*len(s.counts)
	}
	b := abi.AppendListHeader(nil, n)
	for _, s := range states {
		b = abi.AppendString(b, s.key)
		for _, v := range []int64{s.maxSkew, s.selfMatch, s.minMatch, int64(len(s.counts))} {
			b = abi.AppendString(b, strconv.FormatInt(v, 10))
		}
		for d, c := range s.counts {
			b = abi.AppendString(abi.AppendString(b, d), strconv.FormatInt(c, 10))
		}
	}
	return b
}

func decodeState(b []byte) []filterState {
	r := abi.NewListReader(b)
	next := func() string { s, _ := r.Next(); return string(s) }
	num := func() int64 { v, _ := strconv.ParseInt(next(), 10, 64); return v }
	var out []filterState
	for r.Len() >= 5 {
		s := filterState{key: next(), maxSkew: num(), selfMatch: num(), minMatch: num()}
		n := int(num())
		s.counts = make(map[string]int64, n)
		for range n {
			d := next()
			s.counts[d] = num()
		}
		out = append(out, s)
	}
	return out
}

// state is PreFilter's result, decoded once per cycle per instance.
var state sdk.PerCycle[[]filterState]

func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
	states := state.Get(func() []filterState { return decodeState(sdk.CycleState()) })
	if len(states) == 0 {
		return sdk.Success()
	}
	// One label per constraint (Node.Label), not the whole map: a column
	// of the node table each, and nodes of one domain share a verdict
	// within the cycle (docs/abi.md §3.4).
	for _, s := range states {
		v, ok := node.Label(s.key)
		if !ok {
			return sdk.UnschedulableAndUnresolvable(reasonMissingLabel)
		}
		if s.counts[v]+s.selfMatch-s.minMatch > s.maxSkew {
			return sdk.Unschedulable(reasonConstraints)
		}
	}
	return sdk.Success()
}

func preScore(pod sdk.Pod) sdk.Status {
	if cs, _ := constraints(pod, "ScheduleAnyway"); len(cs) == 0 {
		return sdk.Skip()
	}
	return sdk.Success()
}

// score leaves the scoring to normalize, which knows the scored nodes.
func score(sdk.Pod, sdk.Node) (int64, sdk.Status) { return 0, sdk.Success() }

// scored is a node that passed Filter, as normalize reads it: per
// constraint, the value of its key and whether the node has it.
type scored struct {
	name    string
	values  []string
	has     []bool
	ignored bool
}

func normalize(pod sdk.Pod, scores []int64) sdk.Status {
	cs, fromPod := constraints(pod, "ScheduleAnyway")
	if len(cs) == 0 {
		return sdk.Success()
	}
	hostname := false
	for _, c := range cs {
		hostname = hostname || c.key == hostnameKey
	}
	// The scored nodes (those that passed Filter), one label per
	// constraint: a node without one of the pod's own keys is ignored.
	feasible := make([]scored, len(scores))
	ignored := 0
	for i := range scores {
		node, _ := sdk.ScoredNode(i)
		f := scored{values: make([]string, len(cs)), has: make([]bool, len(cs))}
		if hostname {
			f.name = node.Name()
		}
		for j, c := range cs {
			f.values[j], f.has[j] = node.Label(c.key)
			if fromPod && !f.has[j] {
				f.ignored = true
			}
		}
		if f.ignored {
			ignored++
		}
		feasible[i] = f
	}
	// Domains among the scored nodes, and each constraint's weight. As
	// upstream does, a node without the key (possible for the system
	// defaults, which do not require every key) adds the domain "".
	domains := make([]map[string]int64, len(cs))
	weights := make([]float64, len(cs))
	emptyValue := make([]bool, len(cs))
	for i, c := range cs {
		domains[i] = map[string]int64{}
		for _, f := range feasible {
			if !f.ignored && c.key != hostnameKey {
				domains[i][f.values[i]] = 0
				emptyValue[i] = emptyValue[i] || (f.has[i] && f.values[i] == "")
			}
		}
		size := len(domains[i])
		if c.key == hostnameKey {
			size = len(feasible) - ignored
		}
		weights[i] = math.Log(float64(size + 2))
	}
	// Counts per domain over every node of the snapshot that counts.
	var keys []string
	if fromPod {
		keys = keysOf(cs)
	}
	counts := make([]map[string]int64, len(cs))
	for i, c := range cs {
		if c.key == hostnameKey {
			counts[i] = perNode(c)
			continue
		}
		if emptyValue[i] {
			// A scored node has the key with the value "": upstream also
			// counts the nodes without the key into that domain, which
			// only a walk of the nodes reproduces.
			countEmptyDomain(pod, cs, i, fromPod, domains[i], perNode(c))
			continue
		}
		for d, n := range domainCounts(c, keys) {
			if _, ok := domains[i][d]; ok {
				domains[i][d] = n
			}
		}
	}
	// Raw scores, then upstream's normalization (fewer pods: higher score).
	lowest, highest := int64(math.MaxInt64), int64(0)
	for j, f := range feasible {
		if f.ignored {
			continue
		}
		var s float64
		for i, c := range cs {
			if !f.has[i] {
				continue
			}
			cnt := domains[i][f.values[i]]
			if c.key == hostnameKey {
				cnt = counts[i][f.name]
			}
			s += float64(cnt)*weights[i] + float64(c.maxSkew-1)
		}
		scores[j] = int64(math.Round(s))
		lowest, highest = min(lowest, scores[j]), max(highest, scores[j])
	}
	for j, f := range feasible {
		switch {
		case f.ignored:
			scores[j] = 0
		case highest == 0:
			scores[j] = 100
		default:
			scores[j] = 100 * (highest + lowest - scores[j]) / highest
		}
	}
	return sdk.Success()
}

// countEmptyDomain fills domains (constraint i's domains among the scored
// nodes) by walking the snapshot's nodes as upstream does: a node that
// counts and has no value for the key adds its pods to the domain "".
func countEmptyDomain(pod sdk.Pod, cs []constraint, i int, fromPod bool, domains, perNode map[string]int64) {
	c := cs[i]
	cl := sdk.Cluster{}
	affinity := requiredAffinity{selector: pod.NodeSelector(), terms: pod.NodeAffinityRequired()}
	var tolerations []sdk.Toleration
	if c.honorTaints {
		tolerations = pod.Tolerations()
	}
	for j := range cl.NodeCount() {
		name, labels := cl.NodeName(j), cl.NodeLabels(j)
		if fromPod {
			missing := false
			for _, o := range cs {
				if _, ok := labels[o.key]; !ok {
					missing = true
				}
			}
			if missing {
				continue
			}
		}
		if c.honorAffinity && !affinity.matches(name, labels) {
			continue
		}
		if c.honorTaints && untolerated(cl.NodeTaints(j), tolerations) {
			continue
		}
		d := labels[c.key]
		if _, ok := domains[d]; ok {
			domains[d] += perNode[name]
		}
	}
}

func main() {}
