package sdk

import "github.com/wasmsched/wasmsched/guest-sdk/abi"

// NodeSelectorRequirement is one requirement of a NodeSelectorTerm.
// Operator is In, NotIn, Exists, DoesNotExist, Gt or Lt.
type NodeSelectorRequirement struct {
	Key      string
	Operator string
	Values   []string
}

// NodeSelectorTerm is v1.NodeSelectorTerm: every requirement must hold.
// MatchFields may only name metadata.name.
type NodeSelectorTerm struct {
	MatchExpressions []NodeSelectorRequirement
	MatchFields      []NodeSelectorRequirement
}

// PreferredSchedulingTerm is a weighted node selector term of
// preferredDuringSchedulingIgnoredDuringExecution.
type PreferredSchedulingTerm struct {
	Weight     int32
	Preference NodeSelectorTerm
}

// PodAffinityTerm is v1.PodAffinityTerm. Its LabelSelector,
// NamespaceSelector and TopologyKey can go straight into a CountTerm
// (CountTerm of a term), which counts with upstream's namespace rules.
type PodAffinityTerm struct {
	LabelSelector     *LabelSelector
	Namespaces        []string
	NamespaceSelector *LabelSelector
	TopologyKey       string
	MatchLabelKeys    []string
	MismatchLabelKeys []string
}

// WeightedPodAffinityTerm is a preferred pod (anti-)affinity term.
type WeightedPodAffinityTerm struct {
	Weight int32
	PodAffinityTerm
}

// TopologySpreadConstraint is v1.TopologySpreadConstraint. MinDomains is 0
// when unset; NodeAffinityPolicy and NodeTaintsPolicy are "" when unset
// (the scheduler then uses Honor and Ignore).
type TopologySpreadConstraint struct {
	MaxSkew            int32
	TopologyKey        string
	WhenUnsatisfiable  string
	LabelSelector      *LabelSelector
	MinDomains         int32
	NodeAffinityPolicy string
	NodeTaintsPolicy   string
	MatchLabelKeys     []string
}

// NodeAffinityRequired returns the node selector terms of
// spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
// (ORed), nil when the pod has none.
func (Pod) NodeAffinityRequired() []NodeSelectorTerm {
	var out []NodeSelectorTerm
	eachTermRow(podList(abi.PodNodeAffinityRequired), func(i int, weight string, row []string) {
		out = growTo(out, i)
		out[i].add(row)
	})
	return out
}

// NodeAffinityPreferred returns spec.affinity.nodeAffinity's preferred
// terms.
func (Pod) NodeAffinityPreferred() []PreferredSchedulingTerm {
	var out []PreferredSchedulingTerm
	eachTermRow(podList(abi.PodNodeAffinityPreferred), func(i int, weight string, row []string) {
		out = growTo(out, i)
		if row[0] == abi.TermStart {
			out[i].Weight = int32(parseInt([]byte(weight)))
			return
		}
		out[i].Preference.add(row)
	})
	return out
}

// PodAffinityRequired returns spec.affinity.podAffinity's required terms.
func (Pod) PodAffinityRequired() []PodAffinityTerm { return podTerms(abi.PodAffinityRequired) }

// PodAffinityPreferred returns spec.affinity.podAffinity's preferred terms.
func (Pod) PodAffinityPreferred() []WeightedPodAffinityTerm {
	return weightedPodTerms(abi.PodAffinityPreferred)
}

// PodAntiAffinityRequired returns spec.affinity.podAntiAffinity's required terms.
func (Pod) PodAntiAffinityRequired() []PodAffinityTerm {
	return podTerms(abi.PodAntiAffinityRequired)
}

// PodAntiAffinityPreferred returns spec.affinity.podAntiAffinity's
// preferred terms.
func (Pod) PodAntiAffinityPreferred() []WeightedPodAffinityTerm {
	return weightedPodTerms(abi.PodAntiAffinityPreferred)
}

// TopologySpreadConstraints returns spec.topologySpreadConstraints (not the
// scheduler's default constraints, which apply when the pod has none).
func (Pod) TopologySpreadConstraints() []TopologySpreadConstraint {
	var out []TopologySpreadConstraint
	eachTermRow(podList(abi.PodTopologySpread), func(i int, weight string, row []string) {
		out = growTo(out, i)
		c := &out[i]
		switch row[0] {
		case abi.TermStart:
			c.TopologyKey, c.WhenUnsatisfiable, c.MaxSkew = row[1], row[2], int32(parseInt([]byte(row[3])))
		case abi.TermMinDomains:
			c.MinDomains = int32(parseInt([]byte(row[1])))
		case abi.TermNodeAffinityPolicy:
			c.NodeAffinityPolicy = row[1]
		case abi.TermNodeTaintsPolicy:
			c.NodeTaintsPolicy = row[1]
		case abi.TermMatchLabelKeys:
			c.MatchLabelKeys = append(c.MatchLabelKeys, row[1])
		case abi.TermLabelSelector:
			c.LabelSelector = addSelectorRow(c.LabelSelector, row)
		}
	})
	return out
}

// DefaultSpreadSelector returns the label selector PodTopologySpread's
// default constraints count the pod's peers with: what the Services that
// select the pod and its controlling ReplicationController, ReplicaSet or
// StatefulSet select. nil when nothing selects the pod, and then the
// default constraints do not apply. Needs `reads: [Cluster]`; natively it
// is PodData.DefaultSpreadSelector.
func (Pod) DefaultSpreadSelector() *LabelSelector {
	ts := podTerms(abi.PodDefaultSpreadSelector)
	if len(ts) == 0 {
		return nil
	}
	return ts[0].LabelSelector
}

func podTerms(kind int32) []PodAffinityTerm {
	var out []PodAffinityTerm
	eachTermRow(podList(kind), func(i int, weight string, row []string) {
		out = growTo(out, i)
		out[i].add(row)
	})
	return out
}

func weightedPodTerms(kind int32) []WeightedPodAffinityTerm {
	var out []WeightedPodAffinityTerm
	eachTermRow(podList(kind), func(i int, weight string, row []string) {
		out = growTo(out, i)
		if row[0] == abi.TermStart {
			out[i].Weight = int32(parseInt([]byte(weight)))
		}
		out[i].PodAffinityTerm.add(row)
	})
	return out
}

func (t *NodeSelectorTerm) add(row []string) {
	r := NodeSelectorRequirement{Key: row[1], Operator: row[2], Values: splitValues(row[3])}
	switch row[0] {
	case abi.TermMatchExpressions:
		t.MatchExpressions = append(t.MatchExpressions, r)
	case abi.TermMatchFields:
		t.MatchFields = append(t.MatchFields, r)
	}
}

func (t *PodAffinityTerm) add(row []string) {
	switch row[0] {
	case abi.TermStart:
		t.TopologyKey = row[1]
	case abi.TermLabelSelector:
		t.LabelSelector = addSelectorRow(t.LabelSelector, row)
	case abi.TermNamespaceSelector:
		t.NamespaceSelector = addSelectorRow(t.NamespaceSelector, row)
	case abi.TermNamespaces:
		t.Namespaces = append(t.Namespaces, row[1])
	case abi.TermMatchLabelKeys:
		t.MatchLabelKeys = append(t.MatchLabelKeys, row[1])
	case abi.TermMismatchLabelKeys:
		t.MismatchLabelKeys = append(t.MismatchLabelKeys, row[1])
	}
}

// addSelectorRow applies one selector row (part, key, operator, values).
func addSelectorRow(s *LabelSelector, row []string) *LabelSelector {
	if s == nil {
		s = &LabelSelector{}
	}
	switch {
	case row[1] == "" && row[2] == "": // the selector is present
	case row[2] == "=":
		if s.MatchLabels == nil {
			s.MatchLabels = map[string]string{}
		}
		s.MatchLabels[row[1]] = row[3]
	default:
		s.MatchExpressions = append(s.MatchExpressions, LabelSelectorRequirement{Key: row[1], Operator: row[2], Values: splitValues(row[3])})
	}
	return s
}

// eachTermRow walks a term list: 6 strings per row (term, weight, part,
// key, operator, values); f gets the term index, the weight and the row
// from part on.
func eachTermRow(b []byte, f func(i int, weight string, row []string)) {
	r := abi.NewListReader(b)
	for r.Len() >= 6 {
		fs := next(&r, 6)
		i := int(parseInt([]byte(fs[0])))
		if i < 0 || i > 1<<16 {
			return
		}
		f(i, fs[1], fs[2:])
	}
}

// growTo makes s long enough to hold index i.
func growTo[T any](s []T, i int) []T {
	for len(s) <= i {
		var zero T
		s = append(s, zero)
	}
	return s
}

// splitValues splits a requirement's values as term rows carry them: each
// value followed by a comma ("" is no values, "," one empty value). Label
// values and node names cannot contain a comma.
func splitValues(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == ',' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

func joinValues(vs []string) string {
	n := 0
	for _, v := range vs {
		n += len(v) + 1
	}
	b := make([]byte, 0, n)
	for _, v := range vs {
		b = append(b, v...)
		b = append(b, ',')
	}
	return string(b)
}

// itoaInt formats a non-negative int without strconv.
func itoaInt(n int) string {
	if n <= 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

// Affinity is spec.affinity as PodData gives it natively (and case tables
// spell it).
type Affinity struct {
	NodeAffinityRequired     []NodeSelectorTerm
	NodeAffinityPreferred    []PreferredSchedulingTerm
	PodAffinityRequired      []PodAffinityTerm
	PodAffinityPreferred     []WeightedPodAffinityTerm
	PodAntiAffinityRequired  []PodAffinityTerm
	PodAntiAffinityPreferred []WeightedPodAffinityTerm
}

// encodeTerms encodes one of the pod's term kinds as term rows, as the host
// does from the Pod object: what the native backend's pod_list answers.
func encodeTerms(p *PodData, kind int32) []byte {
	var rows [][]string // term, weight, part, key, op, values
	add := func(term int, weight, part, key, op string, values string) {
		rows = append(rows, []string{itoaInt(term), weight, part, key, op, values})
	}
	nodeTerm := func(i int, weight string, t NodeSelectorTerm) {
		add(i, weight, abi.TermStart, "", "", "")
		for _, r := range t.MatchExpressions {
			add(i, "", abi.TermMatchExpressions, r.Key, r.Operator, joinValues(r.Values))
		}
		for _, r := range t.MatchFields {
			add(i, "", abi.TermMatchFields, r.Key, r.Operator, joinValues(r.Values))
		}
	}
	selector := func(i int, part string, s *LabelSelector) {
		if s == nil {
			return
		}
		add(i, "", part, "", "", "")
		for _, k := range sortedKeys(s.MatchLabels) {
			add(i, "", part, k, "=", s.MatchLabels[k])
		}
		for _, r := range s.MatchExpressions {
			add(i, "", part, r.Key, r.Operator, joinValues(r.Values))
		}
	}
	podTerm := func(i int, weight string, t PodAffinityTerm) {
		add(i, weight, abi.TermStart, t.TopologyKey, "", "")
		selector(i, abi.TermLabelSelector, t.LabelSelector)
		for _, ns := range t.Namespaces {
			add(i, "", abi.TermNamespaces, ns, "", "")
		}
		selector(i, abi.TermNamespaceSelector, t.NamespaceSelector)
		for _, k := range t.MatchLabelKeys {
			add(i, "", abi.TermMatchLabelKeys, k, "", "")
		}
		for _, k := range t.MismatchLabelKeys {
			add(i, "", abi.TermMismatchLabelKeys, k, "", "")
		}
	}
	a := p.Affinity
	if a == nil {
		a = &Affinity{}
	}
	switch kind {
	case abi.PodNodeAffinityRequired:
		for i, t := range a.NodeAffinityRequired {
			nodeTerm(i, "", t)
		}
	case abi.PodNodeAffinityPreferred:
		for i, t := range a.NodeAffinityPreferred {
			nodeTerm(i, itoaInt(int(t.Weight)), t.Preference)
		}
	case abi.PodAffinityRequired, abi.PodAntiAffinityRequired:
		ts := a.PodAffinityRequired
		if kind == abi.PodAntiAffinityRequired {
			ts = a.PodAntiAffinityRequired
		}
		for i, t := range ts {
			podTerm(i, "", t)
		}
	case abi.PodAffinityPreferred, abi.PodAntiAffinityPreferred:
		ts := a.PodAffinityPreferred
		if kind == abi.PodAntiAffinityPreferred {
			ts = a.PodAntiAffinityPreferred
		}
		for i, t := range ts {
			podTerm(i, itoaInt(int(t.Weight)), t.PodAffinityTerm)
		}
	case abi.PodTopologySpread:
		for i, c := range p.TopologySpreadConstraints {
			add(i, "", abi.TermStart, c.TopologyKey, c.WhenUnsatisfiable, itoaInt(int(c.MaxSkew)))
			selector(i, abi.TermLabelSelector, c.LabelSelector)
			if c.MinDomains != 0 {
				add(i, "", abi.TermMinDomains, itoaInt(int(c.MinDomains)), "", "")
			}
			if c.NodeAffinityPolicy != "" {
				add(i, "", abi.TermNodeAffinityPolicy, c.NodeAffinityPolicy, "", "")
			}
			if c.NodeTaintsPolicy != "" {
				add(i, "", abi.TermNodeTaintsPolicy, c.NodeTaintsPolicy, "", "")
			}
			for _, k := range c.MatchLabelKeys {
				add(i, "", abi.TermMatchLabelKeys, k, "", "")
			}
		}
	case abi.PodDefaultSpreadSelector:
		if s := p.DefaultSpreadSelector; s != nil && (len(s.MatchLabels) > 0 || len(s.MatchExpressions) > 0) {
			add(0, "", abi.TermStart, "", "", "")
			selector(0, abi.TermLabelSelector, s)
		}
	}
	b := abi.AppendListHeader(nil, 6*len(rows))
	for _, r := range rows {
		for _, s := range r {
			b = abi.AppendString(b, s)
		}
	}
	return b
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

// Matches reports whether a node with this name and these labels satisfies
// the term, as the scheduler's NodeAffinity evaluates a required term
// (k8s.io/component-helpers nodeaffinity.LazyErrorNodeSelector): every
// requirement holds. A term without requirements matches nothing, and so
// does a term upstream cannot parse (In or NotIn without values, Exists or
// DoesNotExist with values, Gt or Lt without exactly one integer, a
// matchFields requirement other than In or NotIn with one value, an
// unknown operator, a key or value that is not a valid label key or value:
// so Gt and Lt cannot take a negative number). Gt and Lt compare the
// label's value as a decimal int64 and fail when it is not one.
func (t NodeSelectorTerm) Matches(nodeName string, labels map[string]string) bool {
	if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
		return false
	}
	ok := true
	for _, r := range t.MatchExpressions {
		m, valid := r.matchesLabels(labels)
		if !valid {
			return false
		}
		ok = ok && m
	}
	for _, r := range t.MatchFields {
		if (r.Operator != "In" && r.Operator != "NotIn") || len(r.Values) != 1 {
			return false
		}
		v := ""
		if r.Key == "metadata.name" {
			v = nodeName
		}
		ok = ok && (v == r.Values[0]) == (r.Operator == "In")
	}
	return ok
}

// MatchNodeSelectorTerms reports whether any of the terms matches (terms
// are ORed), as requiredDuringSchedulingIgnoredDuringExecution evaluates
// them. No terms match nothing.
func MatchNodeSelectorTerms(terms []NodeSelectorTerm, nodeName string, labels map[string]string) bool {
	for _, t := range terms {
		if t.Matches(nodeName, labels) {
			return true
		}
	}
	return false
}

// matchesLabels evaluates one requirement; valid is false when upstream
// would refuse it.
func (r NodeSelectorRequirement) matchesLabels(labels map[string]string) (match, valid bool) {
	if !validRequirement(r.Key, r.Values) {
		return false, false
	}
	v, has := labels[r.Key]
	switch r.Operator {
	case "In":
		return has && contains(r.Values, v), len(r.Values) > 0
	case "NotIn":
		return !has || !contains(r.Values, v), len(r.Values) > 0
	case "Exists":
		return has, len(r.Values) == 0
	case "DoesNotExist":
		return !has, len(r.Values) == 0
	case "Gt", "Lt":
		if len(r.Values) != 1 {
			return false, false
		}
		want, ok := parseInt64(r.Values[0])
		if !ok {
			return false, false
		}
		got, ok := parseInt64(v)
		if !has || !ok {
			return false, true
		}
		if r.Operator == "Gt" {
			return got > want, true
		}
		return got < want, true
	}
	return false, false
}

// parseInt64 parses a decimal int64 as strconv.ParseInt(s, 10, 64) does:
// an optional sign, then digits, no overflow.
func parseInt64(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	neg := false
	if s[0] == '+' || s[0] == '-' {
		neg = s[0] == '-'
		s = s[1:]
		if s == "" {
			return 0, false
		}
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > (1<<63)/10 {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
		if n > 1<<63 {
			return 0, false
		}
	}
	if neg {
		return -int64(n), true // -(1<<63) wraps to itself, which is right
	}
	if n > 1<<63-1 {
		return 0, false
	}
	return int64(n), true
}

// validLabelValue is apimachinery's IsValidLabelValue and validLabelKey
// its IsQualifiedName, as the ABI package checks them (the host's patch
// checks use the same functions).
func validLabelValue(v string) bool { return abi.CheckLabelValue(v) }

func validLabelKey(k string) bool { return abi.QualifiedName(k) }

// validRequirement is what labels.NewRequirement checks besides the
// operator: the key, and every value as a label value.
func validRequirement(key string, values []string) bool {
	if !validLabelKey(key) {
		return false
	}
	for _, v := range values {
		if !validLabelValue(v) {
			return false
		}
	}
	return true
}

// DefaultNonZeroRequests are what the scheduler's scoring counts for a
// container that does not request cpu or memory (100m, 200Mi): pass them to
// PodRequests to score as NodeResourcesFit and BalancedAllocation do.
var DefaultNonZeroRequests = map[string]int64{"cpu": 100, "memory": 200 << 20}

// PodRequests computes a pod's requests from its parts as the scheduler
// does (k8s.io/component-helpers resource.PodRequests, pod-level resources
// enabled): the app containers and sidecars (init containers with
// restartPolicy Always) summed; each other init container with the sidecars
// started before it, and the pod's total is the larger of that peak and the
// sum; pod-level requests replace cpu, memory and hugepages-* when the pod
// sets any of them; then overhead is added. With nonMissing, a container
// (app or init) that does not request one of its resources counts it at that
// amount; an explicit 0 stays 0. Units are the SDK's (cpu in millicores).
// Pass pod.Containers(), pod.PodResources() and pod.Overhead().
func PodRequests(containers []Container, podLevel, overhead, nonMissing map[string]int64) map[string]int64 {
	reqs := func(c Container) map[string]int64 {
		out := make(map[string]int64, len(c.Requests)+len(nonMissing))
		for k, v := range c.Requests {
			out[k] = v
		}
		for k, v := range nonMissing {
			if _, ok := c.Requests[k]; !ok {
				out[k] = v
			}
		}
		return out
	}
	add := func(dst, src map[string]int64) {
		for k, v := range src {
			dst[k] += v
		}
	}
	total := map[string]int64{}
	for _, c := range containers {
		if c.Kind != ContainerInit {
			add(total, reqs(c))
		}
	}
	sidecars, peak := map[string]int64{}, map[string]int64{}
	for _, c := range containers {
		if c.Kind != ContainerInit {
			continue
		}
		r := reqs(c)
		var use map[string]int64
		if c.RestartPolicy == "Always" {
			add(total, r)
			add(sidecars, r)
			use = sidecars
		} else {
			use = map[string]int64{}
			add(use, r)
			add(use, sidecars)
		}
		for k, v := range use {
			if cur, ok := peak[k]; !ok || v > cur {
				peak[k] = v
			}
		}
	}
	for k, v := range peak {
		if cur, ok := total[k]; !ok || v > cur {
			total[k] = v
		}
	}
	podLevelSet := false
	for k := range podLevel {
		podLevelSet = podLevelSet || podLevelResource(k)
	}
	if podLevelSet {
		for k, v := range podLevel {
			if podLevelResource(k) {
				total[k] = v
			}
		}
	}
	add(total, overhead)
	return total
}

func podLevelResource(name string) bool {
	return name == "cpu" || name == "memory" || (len(name) >= 10 && name[:10] == "hugepages-")
}
