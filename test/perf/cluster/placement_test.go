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

// violations lists every hard constraint the placement breaks: a pod not
// scheduled (or bound to a node that does not exist), a node whose pods
// request more cpu, memory or pods than it has, a pod on a node its
// nodeSelector or required node affinity excludes, a DoNotSchedule
// topology spread constraint whose skew exceeds maxSkew, a required pod
// anti-affinity term with a matching pod in the domain, and a required pod
// affinity term without one. Empty means the placement is valid.
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
	}
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
		for _, c := range pod.Spec.TopologySpreadConstraints {
			if c.WhenUnsatisfiable != v1.DoNotSchedule {
				continue
			}
			if skew := p.skew(pod, c); skew > int(c.MaxSkew) {
				out = append(out, fmt.Sprintf("pod %s/%s: topology spread on %s has skew %d, more than maxSkew %d", pod.Namespace, pod.Name, c.TopologyKey, skew, c.MaxSkew))
			}
		}
		if a := pod.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
			for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				if other := p.inDomain(pod, node, t, true); other != nil {
					out = append(out, fmt.Sprintf("pod %s/%s on node %s: %s/%s matches its required anti-affinity term in the same %s domain", pod.Namespace, pod.Name, node.Name, other.Namespace, other.Name, t.TopologyKey))
				}
			}
		}
		if a := pod.Spec.Affinity; a != nil && a.PodAffinity != nil {
			for _, t := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				// The first pod of a group may satisfy its own term.
				if p.inDomain(pod, node, t, false) == nil {
					out = append(out, fmt.Sprintf("pod %s/%s on node %s: no pod matching its required affinity term in its %s domain", pod.Namespace, pod.Name, node.Name, t.TopologyKey))
				}
			}
		}
	}
	return out
}

// skew is the final skew of one of pod's spread constraints: the most
// matching pods in a domain minus the fewest, over the domains of the
// nodes that have the key and pass the pod's required node affinity
// (nodeAffinityPolicy Honor, the default), counting the non-terminating
// pods of the pod's namespace that match the selector. Fewer domains than
// minDomains count the minimum as 0, as the scheduler does.
func (p *placement) skew(pod *v1.Pod, c v1.TopologySpreadConstraint) int {
	sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
	if err != nil {
		return -1
	}
	required := nodeaffinity.GetRequiredNodeAffinity(pod)
	counts := map[string]int{}
	for _, node := range p.nodes {
		v, ok := node.Labels[c.TopologyKey]
		if ok {
			if m, _ := required.Match(node); m {
				counts[v] += 0
			}
		}
	}
	for _, q := range p.pods {
		node := p.nodes[q.Spec.NodeName]
		if node == nil || q.Namespace != pod.Namespace || q.DeletionTimestamp != nil || !sel.Matches(labels.Set(q.Labels)) {
			continue
		}
		if v, ok := node.Labels[c.TopologyKey]; ok {
			if _, eligible := counts[v]; eligible {
				counts[v]++
			}
		}
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
// on a node with the same value of the term's topology key as node; with
// others, pod itself does not count. A node without the key has no domain.
func (p *placement) inDomain(pod *v1.Pod, node *v1.Node, t v1.PodAffinityTerm, others bool) *v1.Pod {
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
		if others && q.UID == pod.UID {
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
		for _, c := range pod.Spec.TopologySpreadConstraints {
			if c.WhenUnsatisfiable == v1.ScheduleAnyway {
				skew = max(skew, p.skew(pod, c))
			}
		}
		if a := pod.Spec.Affinity; a != nil && a.PodAffinity != nil && len(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
			withTerms++
			for _, t := range a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
				if p.inDomain(pod, node, t.PodAffinityTerm, true) != nil {
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
