// Command fields is a test policy that reads every typed accessor added
// for issue #20 (containers with their own requests and ports, owner
// references, overhead, scheduling gates, nodeName; node conditions,
// images, addresses, the pods on the node and its used host ports; the
// pod's affinity and spread terms; the cluster view) and rejects with a
// reason that spells out what it read: the pod, node and node-pod fields,
// or, for a pod labelled fields=terms, the terms and the cluster view (one
// reason holding both would pass the host's 1024-byte reason limit). Its
// case table runs natively and against the TinyGo and Go builds, so the
// host's encoding and the native backend's must agree.
package main

import (
	"sort"
	"strconv"
	"strings"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

func init() { sdk.RegisterFilter(filter) }

// sorted writes a map as {k=v,...} in key order.
func sorted[V any](m map[string]V, format func(V) string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("{")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(k + "=" + format(m[k]))
	}
	b.WriteString("}")
	return b.String()
}

func ints(m map[string]int64) string {
	return sorted(m, func(v int64) string { return strconv.FormatInt(v, 10) })
}

func strs(m map[string]string) string { return sorted(m, func(v string) string { return v }) }

func filter(pod sdk.Pod, node sdk.Node) sdk.Status {
	var parts []string
	parts = append(parts, "node="+pod.NodeName(), "kubelet="+node.KubeletVersion(),
		"sys="+node.KernelVersion()+"/"+node.OSImage()+"/"+node.OperatingSystem()+"/"+node.Architecture()+"/"+node.ContainerRuntimeVersion())
	var cs []string
	for _, c := range pod.Containers() {
		s := c.Kind + "/" + c.Name + "/" + c.Image + "/" + c.RestartPolicy + ints(c.Requests)
		for _, p := range c.Ports {
			s += ":" + p.Name + "/" + strconv.Itoa(int(p.ContainerPort)) + "/" + strconv.Itoa(int(p.HostPort)) + "/" + p.Protocol + "/" + p.HostIP
		}
		cs = append(cs, s)
	}
	parts = append(parts, "ctrs=["+strings.Join(cs, " ")+"]")
	var os []string
	for _, o := range pod.OwnerReferences() {
		os = append(os, o.APIVersion+"/"+o.Kind+"/"+o.Name+"/"+o.UID+"/"+strconv.FormatBool(o.Controller))
	}
	parts = append(parts, "owners=["+strings.Join(os, " ")+"]", "overhead="+ints(pod.Overhead()), "gates=["+strings.Join(pod.SchedulingGates(), " ")+"]")
	var conds []string
	for _, c := range node.Conditions() {
		conds = append(conds, c.Type+"/"+c.Status+"/"+c.Reason)
	}
	ready, _ := node.Condition("Ready")
	var ims []string
	for _, im := range node.Images() {
		ims = append(ims, im.Name+"="+strconv.FormatInt(im.SizeBytes, 10))
	}
	var as []string
	for _, a := range node.Addresses() {
		as = append(as, a.Type+"/"+a.Address)
	}
	parts = append(parts, "conds=["+strings.Join(conds, " ")+"]", "ready="+ready, "images=["+strings.Join(ims, " ")+"]", "addrs=["+strings.Join(as, " ")+"]")
	var ps []string
	for _, p := range node.Pods() {
		s := p.Namespace + "/" + p.Name + "/" + p.UID + "/" + strconv.FormatInt(p.Priority, 10) + "/" + strconv.FormatBool(p.Terminating) + strs(p.Labels)
		for _, o := range p.OwnerReferences {
			s += "<" + o.Kind + "/" + o.Name + "/" + strconv.FormatBool(o.Controller) + ">"
		}
		ps = append(ps, s)
	}
	var hs []string
	for _, h := range node.UsedPorts() {
		hs = append(hs, h.IP+"/"+h.Protocol+"/"+strconv.Itoa(int(h.Port)))
	}
	parts = append(parts, "pods=["+strings.Join(ps, " ")+"]", "ports=["+strings.Join(hs, " ")+"]",
		"created="+pod.CreationTimestamp(), "deleted="+pod.DeletionTimestamp(), "podres="+ints(pod.PodResources()),
		"claims=["+strings.Join(pod.ClaimNames(), " ")+"]", "nonzero="+ints(node.NonZeroRequested()))
	if v, _ := pod.Label("fields"); v != "terms" {
		return sdk.Unschedulable(strings.Join(parts, " "))
	}
	parts = append(parts[:0], "naff="+nodeTerms(pod.NodeAffinityRequired()), "npref=[")
	for _, t := range pod.NodeAffinityPreferred() {
		parts[len(parts)-1] += strconv.Itoa(int(t.Weight)) + nodeTerms([]sdk.NodeSelectorTerm{t.Preference})
	}
	parts[len(parts)-1] += "]"
	parts = append(parts, "paff="+podTerms(pod.PodAffinityRequired()), "anti="+podTerms(pod.PodAntiAffinityRequired()),
		"ppref="+weighted(pod.PodAffinityPreferred()), "apref="+weighted(pod.PodAntiAffinityPreferred()))
	var sc []string
	for _, c := range pod.TopologySpreadConstraints() {
		sc = append(sc, strconv.Itoa(int(c.MaxSkew))+"/"+c.TopologyKey+"/"+c.WhenUnsatisfiable+"/"+selector(c.LabelSelector)+"/"+strconv.Itoa(int(c.MinDomains))+"/"+c.NodeAffinityPolicy+"/"+c.NodeTaintsPolicy+"/"+strings.Join(c.MatchLabelKeys, "+"))
	}
	parts = append(parts, "spread=["+strings.Join(sc, " ")+"]")
	// The cluster: every node's name, labels and taints, a count per zone
	// and per node, and a namespace's labels.
	var cl sdk.Cluster
	var ns []string
	for i := 0; i < cl.NodeCount(); i++ {
		n := cl.NodeName(i) + strs(cl.NodeLabels(i))
		for _, t := range cl.NodeTaints(i) {
			n += "<" + t.Key + "=" + t.Value + ":" + t.Effect + ">"
		}
		ns = append(ns, n)
	}
	team := sdk.CountTerm{LabelSelector: &sdk.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, NamespaceSelector: &sdk.LabelSelector{}, TopologyKey: "zone"}
	perNode := sdk.CountTerm{LabelSelector: &sdk.LabelSelector{MatchExpressions: []sdk.LabelSelectorRequirement{{Key: "app", Operator: "Exists"}}}, IncludeTerminating: true}
	nsl, found := cl.NamespaceLabels("team-a")
	parts = append(parts, "cluster=["+strings.Join(ns, " ")+"]", "zones="+ints(cl.CountPods(team)), "nodes="+ints(cl.CountPods(perNode)),
		"ns="+strs(nsl)+strconv.FormatBool(found))
	return sdk.Unschedulable(strings.Join(parts, " "))
}

func nodeTerms(ts []sdk.NodeSelectorTerm) string {
	var out []string
	for _, t := range ts {
		var rs []string
		for _, r := range t.MatchExpressions {
			rs = append(rs, r.Key+" "+r.Operator+" "+strings.Join(r.Values, "+"))
		}
		for _, r := range t.MatchFields {
			rs = append(rs, "field:"+r.Key+" "+r.Operator+" "+strings.Join(r.Values, "+"))
		}
		out = append(out, "("+strings.Join(rs, ";")+")")
	}
	return "[" + strings.Join(out, "|") + "]"
}

func selector(s *sdk.LabelSelector) string {
	if s == nil {
		return "nil"
	}
	var rs []string
	for _, r := range s.MatchExpressions {
		rs = append(rs, r.Key+" "+r.Operator+" "+strings.Join(r.Values, "+"))
	}
	return strs(s.MatchLabels) + "(" + strings.Join(rs, ";") + ")"
}

func podTerms(ts []sdk.PodAffinityTerm) string {
	var out []string
	for _, t := range ts {
		out = append(out, t.TopologyKey+"/"+selector(t.LabelSelector)+"/"+strings.Join(t.Namespaces, "+")+"/"+selector(t.NamespaceSelector)+"/"+
			strings.Join(t.MatchLabelKeys, "+")+"/"+strings.Join(t.MismatchLabelKeys, "+"))
	}
	return "[" + strings.Join(out, " ") + "]"
}

func weighted(ts []sdk.WeightedPodAffinityTerm) string {
	var out []string
	for _, t := range ts {
		out = append(out, strconv.Itoa(int(t.Weight))+podTerms([]sdk.PodAffinityTerm{t.PodAffinityTerm}))
	}
	return "[" + strings.Join(out, " ") + "]"
}

func main() {}
