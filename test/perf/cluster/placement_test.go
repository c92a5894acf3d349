package cluster

import (
	"context"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/component-helpers/resource"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// placement is a cluster after a workload: every pod, node and namespace,
// read back from the apiserver. Its checks do not trust the scheduler that
// produced it: they recompute each constraint from the objects alone, so
// that a profile whose plugins are wasm ports is held to what the pods
// asked for, not to what another scheduler did.
type placement struct {
	pods       []*v1.Pod
	nodes      map[string]*v1.Node
	namespaces map[string]labels.Set
}

func readPlacement(ctx context.Context, c clientset.Interface) (*placement, error) {
	p := &placement{nodes: map[string]*v1.Node{}, namespaces: map[string]labels.Set{}}
	pods, err := c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range pods.Items {
		p.pods = append(p.pods, &pods.Items[i])
	}
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range nodes.Items {
		p.nodes[nodes.Items[i].Name] = &nodes.Items[i]
	}
	nss, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, ns := range nss.Items {
		p.namespaces[ns.Name] = labels.Set(ns.Labels)
	}
	return p, nil
}

// violations lists the hard constraints of the default plugins that the
// placement breaks: a pod not scheduled (or bound to a node that does not
// exist); a node whose pods request more cpu, memory or pods than it has,
// or hold the same host port; a pod on an unschedulable node, on a node
// with a NoSchedule or NoExecute taint it does not tolerate, or on a node
// its nodeSelector or required node affinity excludes; a DoNotSchedule
// topology spread constraint whose skew exceeds maxSkew or whose key the
// node lacks; a required pod anti-affinity term with a matching pod in the
// domain, and a required pod affinity term without one (unless, as
// upstream allows, no pod anywhere matches it and the pod matches all its
// terms). Empty means the placement is valid.
func (p *placement) violations() []string {
	var out []string
	used := map[string]v1.ResourceList{}
	count := map[string]int64{}
	for _, pod := range p.pods {
		node := p.nodes[pod.Spec.NodeName]
		if node == nil {
			out = append(out, fmt.Sprintf("pod %s/%s is not scheduled (nodeName %q)", pod.Namespace, pod.Name, pod.Spec.NodeName))
			continue
		}
		count[node.Name]++
		if used[node.Name] == nil {
			used[node.Name] = v1.ResourceList{}
		}
		for name, q := range resource.PodRequests(pod, resource.PodResourcesOptions{}) {
			sum := used[node.Name][name]
			sum.Add(q)
			used[node.Name][name] = sum
		}
		if ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); err != nil || !ok {
			out = append(out, fmt.Sprintf("pod %s/%s is on node %s, which its nodeSelector or required node affinity excludes (err %v)", pod.Namespace, pod.Name, node.Name, err))
		}
		if node.Spec.Unschedulable && !tolerates(pod, v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}) {
			out = append(out, fmt.Sprintf("pod %s/%s is on unschedulable node %s", pod.Namespace, pod.Name, node.Name))
		}
		for _, t := range node.Spec.Taints {
			if (t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute) && !tolerates(pod, t) {
				out = append(out, fmt.Sprintf("pod %s/%s is on node %s, whose taint %s it does not tolerate", pod.Namespace, pod.Name, node.Name, t.ToString()))
			}
		}
	}
	out = append(out, p.portConflicts()...)
	for _, name := range sortedKeys(p.nodes) {
		alloc := p.nodes[name].Status.Allocatable
		if len(alloc) == 0 {
			alloc = p.nodes[name].Status.Capacity
		}
		for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			u, a := used[name][r], alloc[r]
			if u.Cmp(a) > 0 {
				out = append(out, fmt.Sprintf("node %s: its pods request %s %s, more than its %s", name, u.String(), r, a.String()))
			}
		}
		if a := alloc[v1.ResourcePods]; count[name] > a.Value() {
			out = append(out, fmt.Sprintf("node %s holds %d pods, more than its %d", name, count[name], a.Value()))
		}
	}
	for _, pod := range p.pods {
		node := p.nodes[pod.Spec.NodeName]
		if node == nil {
			continue
		}
		hard := constraints(pod, v1.DoNotSchedule)
		for _, c := range hard {
			if _, ok := node.Labels[c.TopologyKey]; !ok {
				out = append(out, fmt.Sprintf("pod %s/%s is on node %s, which lacks its topology spread key %s", pod.Namespace, pod.Name, node.Name, c.TopologyKey))
			} else if skew := p.skew(pod, c, hard); skew > int(c.MaxSkew) {
				out = append(out, fmt.Sprintf("pod %s/%s: topology spread on %s has skew %d, more than maxSkew %d", pod.Namespace, pod.Name, c.TopologyKey, skew, c.MaxSkew))
			}
		}
		if a := pod.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
			for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				if other := p.inDomain(pod, node, t); other != nil {
					out = append(out, fmt.Sprintf("pod %s/%s on node %s: %s/%s matches its required anti-affinity term in the same %s domain", pod.Namespace, pod.Name, node.Name, other.Namespace, other.Name, t.TopologyKey))
				}
			}
		}
		if a := pod.Spec.Affinity; a != nil && a.PodAffinity != nil {
			terms := a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution
			for _, t := range terms {
				if _, ok := node.Labels[t.TopologyKey]; !ok {
					out = append(out, fmt.Sprintf("pod %s/%s is on node %s, which lacks its required affinity topology key %s", pod.Namespace, pod.Name, node.Name, t.TopologyKey))
				} else if p.inDomain(pod, node, t) == nil && !p.firstOfGroup(pod, terms) {
					out = append(out, fmt.Sprintf("pod %s/%s on node %s: no pod matching its required affinity term in its %s domain", pod.Namespace, pod.Name, node.Name, t.TopologyKey))
				}
			}
		}
	}
	return out
}

// firstOfGroup reports whether upstream's exception for the first pod of a
// group applies: no other pod anywhere matches all of the pod's required
// affinity terms, and the pod matches them itself.
func (p *placement) firstOfGroup(pod *v1.Pod, terms []v1.PodAffinityTerm) bool {
	matchesAll := func(q *v1.Pod) bool {
		for _, t := range terms {
			sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
			if err != nil || !p.termNamespaces(pod, t).Has(q.Namespace) || !sel.Matches(labels.Set(q.Labels)) {
				return false
			}
		}
		return true
	}
	// As upstream counts them: a matching pod counts only on a node that
	// has one of the terms' topology keys.
	hasAKey := func(n *v1.Node) bool {
		for _, t := range terms {
			if _, ok := n.Labels[t.TopologyKey]; ok {
				return true
			}
		}
		return false
	}
	for _, q := range p.pods {
		if n := p.nodes[q.Spec.NodeName]; q.UID != pod.UID && n != nil && hasAKey(n) && matchesAll(q) {
			return false
		}
	}
	return matchesAll(pod)
}

// tolerates reports whether one of the pod's tolerations tolerates the
// taint (operators Exists and Equal).
func tolerates(pod *v1.Pod, t v1.Taint) bool {
	for _, tol := range pod.Spec.Tolerations {
		if tol.Effect != "" && tol.Effect != t.Effect {
			continue
		}
		if tol.Key == "" && tol.Operator == v1.TolerationOpExists {
			return true
		}
		if tol.Key != t.Key {
			continue
		}
		if tol.Operator == v1.TolerationOpExists || ((tol.Operator == "" || tol.Operator == v1.TolerationOpEqual) && tol.Value == t.Value) {
			return true
		}
	}
	return false
}

// portConflicts reports the first node found on which two pods hold the
// same host port and protocol on overlapping IPs (0.0.0.0 overlaps every
// IP), counting containers and restartable init containers, as NodePorts
// does.
func (p *placement) portConflicts() []string {
	type use struct {
		ip, proto string
		port      int32
		pod       string
	}
	byNode := map[string][]use{}
	for _, pod := range p.pods {
		if p.nodes[pod.Spec.NodeName] == nil {
			continue
		}
		var cs []v1.Container
		for _, c := range pod.Spec.InitContainers {
			if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
				cs = append(cs, c)
			}
		}
		for _, c := range append(cs, pod.Spec.Containers...) {
			for _, cp := range c.Ports {
				if cp.HostPort <= 0 {
					continue
				}
				u := use{cp.HostIP, string(cp.Protocol), cp.HostPort, pod.Namespace + "/" + pod.Name}
				if u.ip == "" {
					u.ip = "0.0.0.0"
				}
				if u.proto == "" {
					u.proto = string(v1.ProtocolTCP)
				}
				for _, o := range byNode[pod.Spec.NodeName] {
					if o.port == u.port && o.proto == u.proto && (o.ip == u.ip || o.ip == "0.0.0.0" || u.ip == "0.0.0.0") && o.pod != u.pod {
						return []string{fmt.Sprintf("node %s: pods %s and %s both hold host port %s/%d on %s", pod.Spec.NodeName, o.pod, u.pod, u.proto, u.port, u.ip)}
					}
				}
				byNode[pod.Spec.NodeName] = append(byNode[pod.Spec.NodeName], u)
			}
		}
	}
	return nil
}

// constraints are the pod's spread constraints of one kind.
func constraints(pod *v1.Pod, kind v1.UnsatisfiableConstraintAction) []v1.TopologySpreadConstraint {
	var out []v1.TopologySpreadConstraint
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == kind {
			out = append(out, c)
		}
	}
	return out
}

// skew is the final skew of one of pod's spread constraints: the most
// matching pods in a domain minus the fewest, counting the non-terminating
// pods of the pod's namespace that match the selector (an empty selector
// matches none, as upstream counts), over the domains of the eligible
// nodes: those with the keys of all of the pod's constraints of that kind
// (same), passing the pod's required node affinity unless
// nodeAffinityPolicy is Ignore, and whose taints it tolerates when
// nodeTaintsPolicy is Honor. Fewer domains than minDomains count the
// minimum as 0, as the scheduler does.
//
// Checking the final skew assumes what holds in the workloads checked
// here: every pod the selector matches carries the same constraint, and
// none was deleted. The scheduler only keeps each placement within
// maxSkew of the minimum at that moment; matching pods placed without the
// constraint, or deletions, could leave a valid placement with more skew.
func (p *placement) skew(pod *v1.Pod, c v1.TopologySpreadConstraint, same []v1.TopologySpreadConstraint) int {
	sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
	if err != nil {
		return -1
	}
	required := nodeaffinity.GetRequiredNodeAffinity(pod)
	eligible := func(node *v1.Node) bool {
		for _, o := range same {
			if _, ok := node.Labels[o.TopologyKey]; !ok {
				return false
			}
		}
		if c.NodeAffinityPolicy == nil || *c.NodeAffinityPolicy == v1.NodeInclusionPolicyHonor {
			if m, _ := required.Match(node); !m {
				return false
			}
		}
		if c.NodeTaintsPolicy != nil && *c.NodeTaintsPolicy == v1.NodeInclusionPolicyHonor {
			for _, t := range node.Spec.Taints {
				if (t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute) && !tolerates(pod, t) {
					return false
				}
			}
		}
		return true
	}
	counts := map[string]int{}
	for _, node := range p.nodes {
		if eligible(node) {
			counts[node.Labels[c.TopologyKey]] += 0
		}
	}
	for _, q := range p.pods {
		node := p.nodes[q.Spec.NodeName]
		if node == nil || q.Namespace != pod.Namespace || q.DeletionTimestamp != nil || sel.Empty() || !sel.Matches(labels.Set(q.Labels)) || !eligible(node) {
			continue
		}
		counts[node.Labels[c.TopologyKey]]++
	}
	if len(counts) == 0 {
		return 0
	}
	lo, hi := -1, 0
	for _, n := range counts {
		if lo < 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	if c.MinDomains != nil && len(counts) < int(*c.MinDomains) {
		lo = 0
	}
	return hi - lo
}

// inDomain returns a pod in the term's namespaces, matching its selector,
// on a node with the same value of the term's topology key as node, other
// than pod itself. A node without the key has no domain.
func (p *placement) inDomain(pod *v1.Pod, node *v1.Node, t v1.PodAffinityTerm) *v1.Pod {
	v, ok := node.Labels[t.TopologyKey]
	if !ok {
		return nil
	}
	sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
	if err != nil {
		return nil
	}
	nss := p.termNamespaces(pod, t)
	for _, q := range p.pods {
		if q.UID == pod.UID {
			continue
		}
		qn := p.nodes[q.Spec.NodeName]
		if qn == nil || !nss.Has(q.Namespace) || !sel.Matches(labels.Set(q.Labels)) {
			continue
		}
		if qv, ok := qn.Labels[t.TopologyKey]; ok && qv == v {
			return q
		}
	}
	return nil
}

// termNamespaces are the namespaces a pod affinity term applies to: its
// list and those its namespace selector matches, or the pod's own
// namespace when it gives neither.
func (p *placement) termNamespaces(pod *v1.Pod, t v1.PodAffinityTerm) sets.Set[string] {
	nss := sets.New(t.Namespaces...)
	if t.NamespaceSelector == nil {
		if len(nss) == 0 {
			nss.Insert(pod.Namespace)
		}
		return nss
	}
	sel, err := metav1.LabelSelectorAsSelector(t.NamespaceSelector)
	if err != nil {
		return nss
	}
	for name, l := range p.namespaces {
		if sel.Matches(l) {
			nss.Insert(name)
		}
	}
	return nss
}

// preferred measures how well the placement meets the pods' preferred
// constraints, which the score plugins only aim for: the largest skew of
// any ScheduleAnyway spread constraint (-1: no pod has one), and the share
// of pods with preferred pod affinity terms for which some other pod
// matching a term shares its domain (-1: no pod has such terms).
func (p *placement) preferred() (skew int, affinityMet float64) {
	skew = -1
	withTerms, met := 0, 0
	for _, pod := range p.pods {
		node := p.nodes[pod.Spec.NodeName]
		if node == nil {
			continue
		}
		soft := constraints(pod, v1.ScheduleAnyway)
		for _, c := range soft {
			skew = max(skew, p.skew(pod, c, soft))
		}
		if a := pod.Spec.Affinity; a != nil && a.PodAffinity != nil && len(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
			withTerms++
			for _, t := range a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
				if p.inDomain(pod, node, t.PodAffinityTerm) != nil {
					met++
					break
				}
			}
		}
	}
	affinityMet = -1
	if withTerms > 0 {
		affinityMet = float64(met) / float64(withTerms)
	}
	return skew, affinityMet
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
