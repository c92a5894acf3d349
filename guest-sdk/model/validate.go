package model

import (
	"errors"
	"strconv"
)

// Validate reports whether the scheduler can parse the term into a node
// selector (k8s.io/component-helpers nodeaffinity, newNodeSelectorTerm):
// nil, or an error naming the first requirement it cannot parse and why.
// The API server validates required terms, so this matters for preferred
// ones, which it accepts unchecked: upstream's NodeAffinity PreScore
// returns an Error for such a pod (its cycle fails), where Matches only
// says the term matches nothing.
func (t NodeSelectorTerm) Validate() error {
	for i, r := range t.MatchExpressions {
		if why := r.problem(); why != "" {
			return errors.New("matchExpressions[" + strconv.Itoa(i) + "] (key " + strconv.Quote(r.Key) + ", operator " + strconv.Quote(r.Operator) + "): " + why)
		}
	}
	for i, r := range t.MatchFields {
		var why string
		switch {
		case r.Operator != "In" && r.Operator != "NotIn":
			why = "a field requirement's operator must be In or NotIn"
		case len(r.Values) != 1:
			why = "a field requirement must have exactly one value, it has " + strconv.Itoa(len(r.Values))
		}
		if why != "" {
			return errors.New("matchFields[" + strconv.Itoa(i) + "] (key " + strconv.Quote(r.Key) + ", operator " + strconv.Quote(r.Operator) + "): " + why)
		}
	}
	return nil
}

// ValidatePreferredSchedulingTerms reports whether the scheduler can parse
// every preferred term it scores (nodeaffinity.NewPreferredSchedulingTerms):
// a term with weight 0 or no requirements is skipped unchecked, as upstream
// skips it; the error names the first term that fails.
func ValidatePreferredSchedulingTerms(terms []PreferredSchedulingTerm) error {
	for i, t := range terms {
		if t.Weight == 0 || (len(t.Preference.MatchExpressions) == 0 && len(t.Preference.MatchFields) == 0) {
			continue
		}
		if err := t.Preference.Validate(); err != nil {
			return errors.New("preferredDuringSchedulingIgnoredDuringExecution[" + strconv.Itoa(i) + "].preference." + err.Error())
		}
	}
	return nil
}

// problem says why labels.NewRequirement (with NodeAffinity's operator
// mapping) refuses the requirement, "" when it accepts it; its checks are
// matchesLabel's, in upstream's order.
func (r NodeSelectorRequirement) problem() string {
	if !validLabelKey(r.Key) {
		return "the key is not a valid label key"
	}
	switch r.Operator {
	case "In", "NotIn":
		if len(r.Values) == 0 {
			return r.Operator + " needs at least one value"
		}
	case "Exists", "DoesNotExist":
		if len(r.Values) != 0 {
			return r.Operator + " takes no values"
		}
	case "Gt", "Lt":
		if len(r.Values) != 1 {
			return r.Operator + " needs exactly one value, it has " + strconv.Itoa(len(r.Values))
		}
		if _, ok := parseInt64(r.Values[0]); !ok {
			return r.Operator + " needs an integer, " + strconv.Quote(r.Values[0]) + " is not one"
		}
	default:
		return "the operator is not In, NotIn, Exists, DoesNotExist, Gt or Lt"
	}
	for _, v := range r.Values {
		if !validLabelValue(v) {
			return strconv.Quote(v) + " is not a valid label value"
		}
	}
	return ""
}
