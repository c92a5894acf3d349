package kubemodel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

// From the model to Kubernetes objects: what case tables and policytest
// run through the real host.

// ToPod converts a model pod (a case table's) into a real Pod: its Object,
// if any, then the fields that are set, over it. Requests become the
// requests of one container named "c" (cpu in millicores, everything else
// in base units).
func ToPod(d *model.Pod) (*v1.Pod, error) {
	pod := &v1.Pod{}
	if len(d.Object) > 0 {
		if err := decodeObject(d.Object, pod); err != nil {
			return nil, fmt.Errorf("pod Object: %w", err)
		}
	}
	if len(d.Containers) > 0 && len(d.Requests) > 0 {
		return nil, fmt.Errorf("pod %s: give Requests (one container's) or Containers, not both: with Containers, set each container's Requests", d.Name)
	}
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&pod.Name, d.Name)
	set(&pod.Namespace, d.Namespace)
	if d.UID != "" {
		pod.UID = types.UID(d.UID)
	}
	set(&pod.Spec.SchedulerName, d.SchedulerName)
	set(&pod.Spec.PriorityClassName, d.PriorityClassName)
	set(&pod.Spec.ServiceAccountName, d.ServiceAccountName)
	if d.Labels != nil {
		pod.Labels = d.Labels
	}
	if d.Annotations != nil {
		pod.Annotations = d.Annotations
	}
	if d.NodeSelector != nil {
		pod.Spec.NodeSelector = d.NodeSelector
	}
	if cs := model.ContainersOf(d); len(cs) > 0 {
		pod.Spec.InitContainers, pod.Spec.Containers = nil, nil
		for _, c := range cs {
			ctr := v1.Container{Name: c.Name, Image: c.Image, Resources: v1.ResourceRequirements{Requests: resourceList(c.Requests)}}
			if c.RestartPolicy != "" {
				p := v1.ContainerRestartPolicy(c.RestartPolicy)
				ctr.RestartPolicy = &p
			}
			for _, p := range c.Ports {
				ctr.Ports = append(ctr.Ports, v1.ContainerPort{Name: p.Name, ContainerPort: p.ContainerPort, HostPort: p.HostPort, Protocol: v1.Protocol(p.Protocol), HostIP: p.HostIP})
			}
			if c.Kind == model.ContainerInit {
				pod.Spec.InitContainers = append(pod.Spec.InitContainers, ctr)
			} else {
				pod.Spec.Containers = append(pod.Spec.Containers, ctr)
			}
		}
	}
	set(&pod.Spec.NodeName, d.NodeName)
	for _, o := range d.OwnerReferences {
		controller := o.Controller
		pod.OwnerReferences = append(pod.OwnerReferences, metav1.OwnerReference{APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name, UID: types.UID(o.UID), Controller: &controller})
	}
	if d.Overhead != nil {
		pod.Spec.Overhead = resourceList(d.Overhead)
	}
	if d.PodResources != nil {
		pod.Spec.Resources = &v1.ResourceRequirements{Requests: resourceList(d.PodResources)}
	}
	for _, c := range d.ClaimNames {
		pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: c, VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
	}
	for i, ref := range d.ImageVolumes {
		pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: fmt.Sprintf("image-%d", i), VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: ref}}})
	}
	for _, ts := range []struct {
		s   string
		dst **metav1.Time
	}{{d.CreationTimestamp, nil}, {d.DeletionTimestamp, &pod.DeletionTimestamp}} {
		if ts.s == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, ts.s)
		if err != nil {
			return nil, fmt.Errorf("pod timestamp %q: %w (want RFC 3339, e.g. 2026-11-23T10:00:00Z)", ts.s, err)
		}
		mt := metav1.NewTime(t)
		if ts.dst == nil {
			pod.CreationTimestamp = mt
		} else {
			*ts.dst = &mt
		}
	}
	if d.Affinity != nil {
		pod.Spec.Affinity = affinity(d.Affinity)
	}
	if d.TopologySpreadConstraints != nil {
		pod.Spec.TopologySpreadConstraints = nil
	}
	for _, c := range d.TopologySpreadConstraints {
		tc := v1.TopologySpreadConstraint{MaxSkew: c.MaxSkew, TopologyKey: c.TopologyKey, WhenUnsatisfiable: v1.UnsatisfiableConstraintAction(c.WhenUnsatisfiable),
			LabelSelector: labelSelector(c.LabelSelector), MatchLabelKeys: c.MatchLabelKeys}
		if c.MinDomains != 0 {
			tc.MinDomains = &c.MinDomains
		}
		if c.NodeAffinityPolicy != "" {
			p := v1.NodeInclusionPolicy(c.NodeAffinityPolicy)
			tc.NodeAffinityPolicy = &p
		}
		if c.NodeTaintsPolicy != "" {
			p := v1.NodeInclusionPolicy(c.NodeTaintsPolicy)
			tc.NodeTaintsPolicy = &p
		}
		pod.Spec.TopologySpreadConstraints = append(pod.Spec.TopologySpreadConstraints, tc)
	}
	for _, g := range d.SchedulingGates {
		pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, v1.PodSchedulingGate{Name: g})
	}
	if d.Priority != 0 {
		p := int32(d.Priority)
		pod.Spec.Priority = &p
	}
	if len(d.Tolerations) > 0 {
		pod.Spec.Tolerations = nil
	}
	for _, t := range d.Tolerations {
		tol := v1.Toleration{Key: t.Key, Operator: v1.TolerationOperator(t.Operator), Value: t.Value, Effect: v1.TaintEffect(t.Effect)}
		if t.TolerationSeconds != "" {
			s, err := strconv.ParseInt(t.TolerationSeconds, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("pod %s: toleration %q: TolerationSeconds %q is not a decimal integer", d.Name, t.Key, t.TolerationSeconds)
			}
			tol.TolerationSeconds = &s
		}
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, tol)
	}
	return pod, nil
}

// DefaultSpreadOf is the requirements a model pod's DefaultSpreadSelector
// stands for (what a scheduler would compute for the pod): each of
// MatchLabels as an In requirement in key order, then MatchExpressions.
func DefaultSpreadOf(d *model.Pod) []metav1.LabelSelectorRequirement {
	s := labelSelector(d.DefaultSpreadSelector)
	if s == nil {
		return nil
	}
	var reqs []metav1.LabelSelectorRequirement
	for _, k := range slices.Sorted(maps.Keys(s.MatchLabels)) {
		reqs = append(reqs, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{s.MatchLabels[k]}})
	}
	return append(reqs, s.MatchExpressions...)
}

// decodeObject decodes a case's Object strictly (an unknown field is an
// error, as everywhere in case tables).
func decodeObject(raw []byte, into any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(into)
}

func quantity(name string, v int64) resource.Quantity {
	if name == string(v1.ResourceCPU) {
		return *resource.NewMilliQuantity(v, resource.DecimalSI)
	}
	return *resource.NewQuantity(v, resource.BinarySI)
}

func resourceList(m map[string]int64) v1.ResourceList {
	if m == nil {
		return nil
	}
	rl := v1.ResourceList{}
	for k, v := range m {
		rl[v1.ResourceName(k)] = quantity(k, v)
	}
	return rl
}

// affinity converts a model affinity into spec.affinity.
func affinity(a *model.Affinity) *v1.Affinity {
	out := &v1.Affinity{}
	nodeTerm := nodeTermV1
	if a.NodeAffinityRequired != nil || a.NodeAffinityPreferred != nil {
		out.NodeAffinity = &v1.NodeAffinity{}
		if a.NodeAffinityRequired != nil {
			out.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &v1.NodeSelector{}
		}
		for _, t := range a.NodeAffinityRequired {
			ns := out.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
			ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, nodeTerm(t))
		}
		for _, t := range a.NodeAffinityPreferred {
			out.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(out.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
				v1.PreferredSchedulingTerm{Weight: t.Weight, Preference: nodeTerm(t.Preference)})
		}
	}
	podTerm := func(t model.PodAffinityTerm) v1.PodAffinityTerm {
		return v1.PodAffinityTerm{LabelSelector: labelSelector(t.LabelSelector), Namespaces: t.Namespaces, NamespaceSelector: labelSelector(t.NamespaceSelector),
			TopologyKey: t.TopologyKey, MatchLabelKeys: t.MatchLabelKeys, MismatchLabelKeys: t.MismatchLabelKeys}
	}
	terms := func(ts []model.PodAffinityTerm) (out []v1.PodAffinityTerm) {
		for _, t := range ts {
			out = append(out, podTerm(t))
		}
		return out
	}
	weighted := func(ts []model.WeightedPodAffinityTerm) (out []v1.WeightedPodAffinityTerm) {
		for _, t := range ts {
			out = append(out, v1.WeightedPodAffinityTerm{Weight: t.Weight, PodAffinityTerm: podTerm(t.PodAffinityTerm)})
		}
		return out
	}
	if a.PodAffinityRequired != nil || a.PodAffinityPreferred != nil {
		out.PodAffinity = &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms(a.PodAffinityRequired), PreferredDuringSchedulingIgnoredDuringExecution: weighted(a.PodAffinityPreferred)}
	}
	if a.PodAntiAffinityRequired != nil || a.PodAntiAffinityPreferred != nil {
		out.PodAntiAffinity = &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms(a.PodAntiAffinityRequired), PreferredDuringSchedulingIgnoredDuringExecution: weighted(a.PodAntiAffinityPreferred)}
	}
	return out
}

func labelSelector(s *model.LabelSelector) *metav1.LabelSelector {
	if s == nil {
		return nil
	}
	out := &metav1.LabelSelector{MatchLabels: s.MatchLabels}
	for _, r := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{Key: r.Key, Operator: metav1.LabelSelectorOperator(r.Operator), Values: r.Values})
	}
	return out
}

// nodeTermV1 is a model node selector term as the API spells it.
func nodeTermV1(t model.NodeSelectorTerm) v1.NodeSelectorTerm {
	var o v1.NodeSelectorTerm
	for _, r := range t.MatchExpressions {
		o.MatchExpressions = append(o.MatchExpressions, v1.NodeSelectorRequirement{Key: r.Key, Operator: v1.NodeSelectorOperator(r.Operator), Values: r.Values})
	}
	for _, r := range t.MatchFields {
		o.MatchFields = append(o.MatchFields, v1.NodeSelectorRequirement{Key: r.Key, Operator: v1.NodeSelectorOperator(r.Operator), Values: r.Values})
	}
	return o
}
