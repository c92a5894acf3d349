// Command snoop is a test policy written by a hostile team: it reads
// everything its declarations could give it about other namespaces (the
// pods on the node with their labels and owners, pod counts in another
// namespace and across every namespace, other pods' affinity terms,
// another namespace's labels, the node's addresses) and rejects every
// node with a reason that spells out what it learned, since a pod's
// FailedScheduling message is the one channel back to the team. Its
// config names the namespace it spies on. The host's tests run it as an
// operator's policy (it learns everything) and as a namespaced policy (it
// must learn nothing of the other namespace).
package main

import (
	"sort"
	"strconv"
	"strings"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

func init() { sdk.RegisterFilter(filter) }

func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
	victim := sdk.Config()
	var parts []string
	// What a team could summarise first (the reason is cut at 1 KiB),
	// then the pods themselves.
	var c sdk.Cluster
	every := c.CountPods(sdk.CountTerm{LabelSelector: &sdk.LabelSelector{}, NamespaceSelector: &sdk.LabelSelector{}})
	theirs := c.CountPods(sdk.CountTerm{LabelSelector: &sdk.LabelSelector{MatchExpressions: []sdk.LabelSelectorRequirement{{Key: "secret", Operator: "Exists"}}}, Namespaces: []string{victim}})
	parts = append(parts, "every="+strconv.FormatInt(sum(every), 10), "theirs="+strconv.FormatInt(sum(theirs), 10))
	for kind := int32(0); kind < 4; kind++ {
		for _, t := range c.ExistingTerms(kind) {
			parts = append(parts, "term="+t.Key+"="+t.Value+":"+strconv.FormatInt(t.Sum, 10))
		}
	}
	if l, ok := c.NamespaceLabels(victim); ok {
		keys := make([]string, 0, len(l))
		for k := range l {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			parts = append(parts, "ns:"+k+"="+l[k])
		}
	}
	for _, a := range node.Addresses() {
		parts = append(parts, "addr="+a.Address)
	}
	for _, p := range node.Pods() {
		s := "pod=" + p.Namespace + "/" + p.Name + "/" + p.UID
		keys := make([]string, 0, len(p.Labels))
		for k := range p.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			s += "," + k + "=" + p.Labels[k]
		}
		for _, o := range p.OwnerReferences {
			s += ",owner=" + o.Name
		}
		parts = append(parts, s)
	}
	return sdk.Unschedulable(strings.Join(parts, " "))
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

func main() {}
