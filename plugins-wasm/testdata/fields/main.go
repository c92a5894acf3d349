// Command fields is a test policy that reads every typed accessor added
// for issue #20 (containers with their own requests and ports, owner
// references, overhead, scheduling gates, nodeName; node conditions,
// images, addresses, the pods on the node and its used host ports) and rejects with a reason that spells out what it
// read. Its case table runs natively and against the TinyGo and Go builds,
// so the host's encoding and the native backend's must agree.
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
	parts = append(parts, "node="+pod.NodeName())
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
	return sdk.Unschedulable(strings.Join(parts, " "))
}

func main() {}
