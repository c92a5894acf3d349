package sdk

import "github.com/wasmsched/wasmsched/guest-sdk/model"

// The data a policy reads is defined once, in package model, with its wire
// encoding; these names keep the SDK's API. PodData and NodeData are what
// the native Run functions take and what a case table's pods and nodes are.
type (
	// PodData is a pod for running a policy natively (model.Pod).
	PodData = model.Pod
	// NodeData is a node for running a policy natively (model.Node).
	NodeData = model.Node
	// ClusterData is what Cluster reads natively (model.Cluster).
	ClusterData = model.Cluster
	// RawJSON is a JSON value kept as its bytes.
	RawJSON = model.RawJSON

	Container                = model.Container
	ContainerPort            = model.ContainerPort
	OwnerReference           = model.OwnerReference
	NodeCondition            = model.NodeCondition
	NodeImage                = model.NodeImage
	ImageState               = model.ImageState
	NodeAddress              = model.NodeAddress
	NodePod                  = model.NodePod
	HostPort                 = model.HostPort
	Taint                    = model.Taint
	Toleration               = model.Toleration
	LabelSelector            = model.LabelSelector
	LabelSelectorRequirement = model.LabelSelectorRequirement
	NodeSelectorRequirement  = model.NodeSelectorRequirement
	NodeSelectorTerm         = model.NodeSelectorTerm
	PreferredSchedulingTerm  = model.PreferredSchedulingTerm
	PodAffinityTerm          = model.PodAffinityTerm
	WeightedPodAffinityTerm  = model.WeightedPodAffinityTerm
	TopologySpreadConstraint = model.TopologySpreadConstraint
	Affinity                 = model.Affinity
	CountTerm                = model.CountTerm
	TopologySum              = model.TopologySum
)

// Node inclusion policies of a CountTerm (NodeAffinityPolicy,
// NodeTaintsPolicy), with a spread constraint's values.
const (
	NodeInclusionHonor  = model.NodeInclusionHonor
	NodeInclusionIgnore = model.NodeInclusionIgnore
)

// Container kinds.
const (
	ContainerInit = model.ContainerInit
	ContainerApp  = model.ContainerApp
)

// DefaultNonZeroRequests are what the scheduler's scoring counts for a
// container that does not request cpu or memory (100m, 200Mi): pass them to
// PodRequests to score as NodeResourcesFit and BalancedAllocation do.
var DefaultNonZeroRequests = model.DefaultNonZeroRequests

// PodRequests computes a pod's requests from its parts as the scheduler
// does; see model.PodRequests.
func PodRequests(containers []Container, podLevel, overhead, nonMissing map[string]int64) map[string]int64 {
	return model.SumRequests(containers, podLevel, overhead, nonMissing)
}

// ValidatePreferredSchedulingTerms reports whether the scheduler can parse
// every preferred node affinity term it scores: nil, or an error naming
// the first term and requirement it cannot, and why (a Gt value that is no
// integer, a value that is no label value). The API server does not check
// preferred terms, and upstream's NodeAffinity fails the pod's cycle with
// an Error for one it cannot parse, where NodeSelectorTermMatches only
// says the term matches no node: a policy that mirrors NodeAffinity
// returns Error(err.Error()) from PreScore. Terms with weight 0 or no
// requirements are skipped, as upstream skips them. NodeSelectorTerm's
// Validate checks one term.
func ValidatePreferredSchedulingTerms(terms []PreferredSchedulingTerm) error {
	return model.ValidatePreferredSchedulingTerms(terms)
}

// MatchNodeSelectorTerms reports whether any of the terms matches (terms
// are ORed), as requiredDuringSchedulingIgnoredDuringExecution evaluates
// them. No terms match nothing.
func MatchNodeSelectorTerms(terms []NodeSelectorTerm, nodeName string, labels map[string]string) bool {
	return model.MatchNodeSelectorTerms(terms, nodeName, labels)
}

// MatchNodeSelectorTermsOn is MatchNodeSelectorTerms on the node being
// evaluated, reading only what the terms name: each label by key (a
// column of the node table, so nodes that agree on those labels share a
// verdict, docs/abi.md §3.4) and the name only for matchFields. Prefer it
// to passing Node.Labels, which decodes every label of every node and
// cannot be shared.
func MatchNodeSelectorTermsOn(terms []NodeSelectorTerm, node Node) bool {
	return model.MatchNodeSelectorTermsOn(terms, node)
}

// NodeSelectorTermMatches is NodeSelectorTerm.Matches on the node being
// evaluated, reading it as MatchNodeSelectorTermsOn does: for a preferred
// term's Preference.
func NodeSelectorTermMatches(term NodeSelectorTerm, node Node) bool {
	return model.TermMatches(term, node)
}
