// Command interpodaffinity is kube-scheduler's InterPodAffinity plugin as a
// wasmsched policy (default args: hardPodAffinityWeight 1, preferred terms
// of existing pods honoured).
//
// Filter, in upstream's order:
//   - required pod affinity: the node must carry every term's topology key,
//     and in each term's domain some pod must match all the terms; a pod
//     that matches its own terms may start a domain while no such pod runs
//     anywhere. Else UnschedulableAndUnresolvable.
//   - required pod anti-affinity: no pod matching a term in the term's
//     domain. Else Unschedulable.
//   - the placed pods' required anti-affinity: no placed pod whose term
//     the pod matches in any of the node's domains. Else Unschedulable.
//
// PreFilter is Skip when none of the three can reject. Counts come from
// count_pods (terminating pods included, as upstream counts them) and
// existing_terms, both computed by the host once per cycle.
//
// Score: per topology pair, the weights of the pod's preferred affinity
// terms times the pods they match, minus the same for its preferred
// anti-affinity terms, plus the placed pods' required affinity (× 1) and
// preferred affinity terms the pod matches, minus their preferred
// anti-affinity ones; a node scores the sum over its labels. PreScore is
// Skip when nothing matched at all. NormalizeScore: 100 × (score - lowest)
// / (highest - lowest), 0 for all when they are equal.
//
// It declares `reads: [Cluster, Namespaces]`: the counts, and the labels of
// the pod's own namespace (whether its terms' namespace selectors take in
// the pod itself).
package main

import (
	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

func init() {
	sdk.RegisterPreFilter(preFilter)
	sdk.RegisterFilter(filter)
	sdk.RegisterPreScore(preScore)
	sdk.RegisterScore(score)
	sdk.RegisterNormalizeScore(normalize)
}

const (
	reasonAffinity     = "node(s) didn't match pod affinity rules"
	reasonAntiAffinity = "node(s) didn't match pod anti-affinity rules"
	reasonExistingAnti = "node(s) didn't satisfy existing pods anti-affinity rules"

	hardPodAffinityWeight = 1
)

// countTerm is a pod affinity term as count_pods takes it.
func countTerm(t sdk.PodAffinityTerm) sdk.CountTerm {
	return sdk.CountTerm{LabelSelector: t.LabelSelector, Namespaces: t.Namespaces, NamespaceSelector: t.NamespaceSelector,
		TopologyKey: t.TopologyKey, IncludeTerminating: true}
}

// filterState is what Filter checks each node against, computed once per
// cycle per instance (the host computes the counts once per cycle). The
// counts stay as the host encoded them (DomainCounts, ExistingSums): a
// node looks up its own domains, and an instance that serves a Filter
// call builds no map of every domain first.
type filterState struct {
	affinity []sdk.PodAffinityTerm
	// affinityCounts[i]: per value of term i's key, the pods that match
	// all the affinity terms; anyMatch: some count is above 0.
	affinityCounts []sdk.DomainCounts
	anyMatch       bool
	// selfMatch: the pod matches all its own affinity terms.
	selfMatch  bool
	anti       []sdk.PodAffinityTerm
	antiCounts []sdk.DomainCounts
	// existing: the placed pods' required anti-affinity terms that match
	// the pod, per topology key and value.
	existing sdk.ExistingSums
}

var filterStates sdk.PerCycle[*filterState]

func stateOf(pod sdk.Pod) *filterState {
	return filterStates.Get(func() *filterState {
		c := sdk.Cluster{}
		s := &filterState{affinity: pod.PodAffinityRequired(), anti: pod.PodAntiAffinityRequired()}
		for i, t := range s.affinity {
			ct := countTerm(t)
			for j, o := range s.affinity {
				if j != i {
					ct.AlsoMatching = append(ct.AlsoMatching, sdk.CountTerm{LabelSelector: o.LabelSelector, Namespaces: o.Namespaces, NamespaceSelector: o.NamespaceSelector})
				}
			}
			counts := c.DomainCounts(ct)
			for k := 0; k < counts.Len() && !s.anyMatch; k++ {
				_, n := counts.At(k)
				s.anyMatch = n > 0
			}
			s.affinityCounts = append(s.affinityCounts, counts)
		}
		s.selfMatch = len(s.affinity) > 0 && matchesOwnTerms(pod, s.affinity)
		for _, t := range s.anti {
			s.antiCounts = append(s.antiCounts, c.DomainCounts(countTerm(t)))
		}
		s.existing = c.ExistingSums(sdk.ExistingAntiAffinityRequired)
		return s
	})
}

// matchesOwnTerms reports whether the pod matches all of its own terms:
// its namespace is named, or taken in by an empty namespace selector, or
// by a selector its (known) namespace's labels match; and its labels
// match the term's selector.
func matchesOwnTerms(pod sdk.Pod, terms []sdk.PodAffinityTerm) bool {
	ns, labels := pod.Namespace(), pod.Labels()
	for _, t := range terms {
		in := len(t.Namespaces) == 0 && t.NamespaceSelector == nil
		for _, n := range t.Namespaces {
			in = in || n == ns
		}
		if !in && t.NamespaceSelector != nil {
			s := t.NamespaceSelector
			if len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0 {
				in = true
			} else if l, known := (sdk.Cluster{}).NamespaceLabels(ns); known {
				in = s.Matches(l)
			}
		}
		if !in || !t.LabelSelector.Matches(labels) {
			return false
		}
	}
	return true
}

func preFilter(pod sdk.Pod) sdk.Status {
	s := stateOf(pod)
	if s.existing.Len() == 0 && len(s.affinity) == 0 && len(s.anti) == 0 {
		return sdk.Skip()
	}
	return sdk.Success()
}

func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
	s := stateOf(pod)
	// One label at a time (Node.Label), not the whole map: each is a column
	// of the node table, so a node costs a few loads, and nodes that agree
	// on these labels share a verdict within the cycle (docs/abi.md §3.4).
	if len(s.affinity) > 0 {
		podsExist := true
		for i, t := range s.affinity {
			v, ok := node.Label(t.TopologyKey)
			if !ok {
				return sdk.UnschedulableAndUnresolvable(reasonAffinity)
			}
			if s.affinityCounts[i].Get(v) <= 0 {
				podsExist = false
			}
		}
		if !podsExist && (s.anyMatch || !s.selfMatch) {
			return sdk.UnschedulableAndUnresolvable(reasonAffinity)
		}
	}
	for i, t := range s.anti {
		if v, ok := node.Label(t.TopologyKey); ok && s.antiCounts[i].Get(v) > 0 {
			return sdk.Unschedulable(reasonAntiAffinity)
		}
	}
	for _, key := range s.existing.Keys() {
		if v, ok := node.Label(key); ok && s.existing.Get(key, v) > 0 {
			return sdk.Unschedulable(reasonExistingAnti)
		}
	}
	return sdk.Success()
}

// scoreState is what Score sums per node: each preferred term's counts
// (weighted, negative for anti-affinity) and the placed pods' sums of
// three kinds, all read in place (DomainCounts, ExistingSums) so that an
// instance builds no map of every domain; matched says whether anything
// matched at all (else PreScore skips).
type scoreState struct {
	terms    []weightedCounts
	existing [3]existingWeighted
	matched  bool
}

// weightedCounts is one preferred term's counts and its signed weight.
type weightedCounts struct {
	key    string
	weight int64
	counts sdk.DomainCounts
}

// existingWeighted is one kind of existing_terms' sums and its sign.
type existingWeighted struct {
	sign int64
	sums sdk.ExistingSums
}

var scoreStates sdk.PerCycle[*scoreState]

func scoresOf(pod sdk.Pod) *scoreState {
	return scoreStates.Get(func() *scoreState {
		c := sdk.Cluster{}
		s := &scoreState{}
		add := func(t sdk.WeightedPodAffinityTerm, sign int64) {
			counts := c.DomainCounts(countTerm(t.PodAffinityTerm))
			for k := 0; k < counts.Len() && !s.matched; k++ {
				_, n := counts.At(k)
				s.matched = n > 0
			}
			s.terms = append(s.terms, weightedCounts{t.TopologyKey, sign * int64(t.Weight), counts})
		}
		for _, t := range pod.PodAffinityPreferred() {
			add(t, 1)
		}
		for _, t := range pod.PodAntiAffinityPreferred() {
			add(t, -1)
		}
		for i, k := range []struct {
			kind int32
			sign int64
		}{{sdk.ExistingAffinityRequired, hardPodAffinityWeight}, {sdk.ExistingAffinityPreferred, 1}, {sdk.ExistingAntiAffinityPreferred, -1}} {
			s.existing[i] = existingWeighted{k.sign, c.ExistingSums(k.kind)}
			s.matched = s.matched || s.existing[i].sums.Len() > 0
		}
		return s
	})
}

func preScore(pod sdk.Pod) sdk.Status {
	if !scoresOf(pod).matched {
		return sdk.Skip()
	}
	return sdk.Success()
}

func score(pod sdk.Pod, node sdk.Node) (int64, sdk.Status) {
	s := scoresOf(pod)
	var sum int64
	for _, t := range s.terms {
		if v, ok := node.Label(t.key); ok {
			sum += t.weight * t.counts.Get(v)
		}
	}
	for _, e := range s.existing {
		for _, key := range e.sums.Keys() {
			if v, ok := node.Label(key); ok {
				sum += e.sign * e.sums.Get(key, v)
			}
		}
	}
	return sum, sdk.Success()
}

func normalize(_ sdk.Pod, scores []int64) sdk.Status {
	if len(scores) == 0 {
		return sdk.Success()
	}
	lowest, highest := scores[0], scores[0]
	for _, s := range scores {
		lowest, highest = min(lowest, s), max(highest, s)
	}
	for i, s := range scores {
		f := 0.0
		if highest > lowest {
			f = 100 * (float64(s-lowest) / float64(highest-lowest))
		}
		scores[i] = int64(f)
	}
	return sdk.Success()
}

func main() {}
