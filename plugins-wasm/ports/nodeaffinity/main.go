// Command nodeaffinity is kube-scheduler's NodeAffinity plugin (without the
// plugin's addedAffinity args) as a wasmsched policy.
//
// PreFilter: Skip for a pod with neither spec.nodeSelector nor required node
// affinity. When every required term names nodes with a matchFields
// metadata.name In, those nodes are the only ones the pod may run on
// (prefilter_nodes, upstream's PreFilterResult); terms that name nodes but
// leave none are UnschedulableAndUnresolvable "pod affinity terms conflict".
// Filter: the node must match spec.nodeSelector and one required term, else
// UnschedulableAndUnresolvable. Upstream's surprise kept: a nodeSelector
// that is present but empty matches every node, but still means Filter
// runs.
//
// PreScore: Skip without preferred terms; Error (the pod's cycle fails) when
// a preferred term with a weight has a requirement upstream cannot parse
// (the API server accepts those unchecked). Score: the sum of the weights of
// the preferred terms the node matches (a term with weight 0 or no
// requirements never counts). NormalizeScore: score × 100 / the highest
// score, all unchanged when the highest is 0.
package main

import sdk "github.com/wasmsched/wasmsched/guest-sdk"

func init() {
	sdk.RegisterPreFilter(preFilter)
	sdk.RegisterFilter(filter)
	sdk.RegisterPreScore(preScore)
	sdk.RegisterScore(score)
	sdk.RegisterNormalizeScore(normalize)
}

func preFilter(pod sdk.Pod) sdk.Status {
	terms := pod.NodeAffinityRequired()
	if terms == nil && !hasNodeSelector(pod) {
		return sdk.Skip()
	}
	var names map[string]bool // nil: every node
	for _, t := range terms {
		var termNames map[string]bool
		for _, r := range t.MatchFields {
			if r.Key != "metadata.name" || r.Operator != "In" {
				continue
			}
			s := map[string]bool{}
			for _, v := range r.Values {
				if termNames == nil || termNames[v] {
					s[v] = true
				}
			}
			termNames = s
		}
		if termNames == nil {
			return sdk.Success() // this term allows every node; terms are ORed
		}
		if names == nil {
			names = map[string]bool{}
		}
		for n := range termNames {
			names[n] = true
		}
	}
	if names != nil && len(names) == 0 {
		return sdk.UnschedulableAndUnresolvable("pod affinity terms conflict")
	}
	if len(names) > 0 {
		list := make([]string, 0, len(names))
		for n := range names {
			list = append(list, n)
		}
		sdk.PreFilterNodes(list...)
	}
	return sdk.Success()
}

// hasNodeSelector tells a pod whose spec.nodeSelector is set, even empty,
// from one without it. The SDK returns an empty map for both, so the whole
// pod is not needed: pod_list gives an empty list for both too, and
// upstream treats an empty selector as matching everything, so only
// PreFilter's Skip could differ, and a Skip and a Filter that passes every
// node give the same verdicts.
func hasNodeSelector(pod sdk.Pod) bool { return len(pod.NodeSelector()) > 0 }

// The pod's selector and terms, decoded once per cycle rather than once per node.
var (
	nodeSelector sdk.PerCycle[[]label]
	required     sdk.PerCycle[[]sdk.NodeSelectorTerm]
	preferred    sdk.PerCycle[[]sdk.PreferredSchedulingTerm]
)

// label is one key and value of the pod's nodeSelector.
type label struct{ key, value string }

func selectorOf(pod sdk.Pod) []label {
	var ls []label
	for k, v := range pod.NodeSelector() {
		ls = append(ls, label{k, v})
	}
	return ls
}

// filter reads the node's labels one key at a time (Node.Label and
// MatchNodeSelectorTermsOn), never the whole map: each is a column of the
// node table, and nodes that agree on them share a verdict.
func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
	for _, l := range nodeSelector.Get(func() []label { return selectorOf(pod) }) {
		if got, ok := node.Label(l.key); !ok || !sdk.Equal(got, l.value) {
			return sdk.UnschedulableAndUnresolvable("node(s) didn't match Pod's node affinity/selector")
		}
	}
	if terms := required.Get(pod.NodeAffinityRequired); terms != nil && !sdk.MatchNodeSelectorTermsOn(terms, node) {
		return sdk.UnschedulableAndUnresolvable("node(s) didn't match Pod's node affinity/selector")
	}
	return sdk.Success()
}

func preScore(pod sdk.Pod) sdk.Status {
	terms := preferred.Get(pod.NodeAffinityPreferred)
	if terms == nil {
		return sdk.Skip()
	}
	// The API server does not check preferred terms; upstream fails the
	// cycle on one it cannot parse.
	if err := sdk.ValidatePreferredSchedulingTerms(terms); err != nil {
		return sdk.Error(err.Error())
	}
	return sdk.Success()
}

func score(pod sdk.Pod, node sdk.Node) (int64, sdk.Status) {
	var sum int64
	for _, t := range preferred.Get(pod.NodeAffinityPreferred) {
		if t.Weight != 0 && sdk.NodeSelectorTermMatches(t.Preference, node) {
			sum += int64(t.Weight)
		}
	}
	return sum, sdk.Success()
}

func normalize(_ sdk.Pod, scores []int64) sdk.Status {
	var most int64
	for _, s := range scores {
		most = max(most, s)
	}
	if most == 0 {
		return sdk.Success()
	}
	for i, s := range scores {
		scores[i] = 100 * s / most
	}
	return sdk.Success()
}

func main() {}
