// Package kubemodel converts between Kubernetes objects and the data model
// of what a policy reads (guest-sdk/model): a v1.Pod and a NodeInfo into
// the model, part by part, for the host to encode; and a model pod or node
// into a v1.Pod and a NodeInfo, for case tables and policytest to run
// through the real host. Both directions live here so that one test, the
// round trip over every row of the fields table, holds them to each other
// and to the model's own derivations (roundtrip_test.go).
package kubemodel

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

// PodPart is a group of model.Pod fields converted together: the host
// converts a part the first time a policy of the cycle reads a row of it,
// and never again in that cycle.
type PodPart uint8

// The parts of a pod.
const (
	// PodScalars: the strings of pod_string and the priority.
	PodScalars PodPart = iota
	PodLabels
	PodAnnotations
	PodNodeSelector
	PodTolerations
	// PodRequests: Derived.Requests, as the scheduler computes them.
	PodRequests
	// PodNonZeroRequests: Derived.NonZeroRequests, as the scheduler's
	// scoring computes them.
	PodNonZeroRequests
	// PodContainers: Derived.Containers.
	PodContainers
	PodOwners
	PodOverhead
	PodResources
	PodClaims
	PodImageVolumes
	PodAffinity
	PodSpread
	// PodDefaultSpread needs the cycle's DefaultSpreadSelector.
	PodDefaultSpread
	PodGates
	// NumPodParts is the number of parts.
	NumPodParts
)

// PodListPart is the part pod_list kind reads (NumPodParts for an
// unknown kind).
func PodListPart(kind int32) PodPart {
	switch kind {
	case model.PodLabels:
		return PodLabels
	case model.PodAnnotations:
		return PodAnnotations
	case model.PodNodeSelector:
		return PodNodeSelector
	case model.PodTolerations:
		return PodTolerations
	case model.PodRequests:
		return PodRequests
	case model.PodNonZeroRequests:
		return PodNonZeroRequests
	case model.PodContainers, model.PodContainerRequests, model.PodContainerPorts:
		return PodContainers
	case model.PodOwnerReferences:
		return PodOwners
	case model.PodOverhead:
		return PodOverhead
	case model.PodResources:
		return PodResources
	case model.PodClaims:
		return PodClaims
	case model.PodImageVolumes:
		return PodImageVolumes
	case model.PodNodeAffinityRequired, model.PodNodeAffinityPreferred, model.PodAffinityRequired, model.PodAffinityPreferred,
		model.PodAntiAffinityRequired, model.PodAntiAffinityPreferred:
		return PodAffinity
	case model.PodTopologySpread:
		return PodSpread
	case model.PodDefaultSpreadSelector:
		return PodDefaultSpread
	case model.PodSchedulingGates:
		return PodGates
	}
	return NumPodParts
}

// DefaultSpread returns the requirements of the selector PodTopologySpread's
// default constraints use for a pod; nil gives none.
type DefaultSpread func(pod *v1.Pod) []metav1.LabelSelectorRequirement

// FillPod converts part of pod into m, touching only that part's fields,
// so the host may fill different parts of one m concurrently.
func FillPod(m *model.Pod, pod *v1.Pod, part PodPart, spread DefaultSpread) {
	switch part {
	case PodScalars:
		m.Name, m.Namespace, m.UID = pod.Name, pod.Namespace, string(pod.UID)
		m.SchedulerName, m.PriorityClassName, m.ServiceAccountName = pod.Spec.SchedulerName, pod.Spec.PriorityClassName, pod.Spec.ServiceAccountName
		m.NodeName = pod.Spec.NodeName
		m.CreationTimestamp, m.DeletionTimestamp = Timestamp(&pod.CreationTimestamp), Timestamp(pod.DeletionTimestamp)
		m.Priority = 0
		if pod.Spec.Priority != nil {
			m.Priority = int64(*pod.Spec.Priority)
		}
	case PodLabels:
		m.Labels = pod.Labels
	case PodAnnotations:
		m.Annotations = pod.Annotations
	case PodNodeSelector:
		m.NodeSelector = pod.Spec.NodeSelector
	case PodTolerations:
		m.Tolerations = make([]model.Toleration, len(pod.Spec.Tolerations))
		for i, t := range pod.Spec.Tolerations {
			secs := ""
			if t.TolerationSeconds != nil {
				secs = strconv.FormatInt(*t.TolerationSeconds, 10)
			}
			m.Tolerations[i] = model.Toleration{Key: t.Key, Operator: string(t.Operator), Value: t.Value, Effect: string(t.Effect), TolerationSeconds: secs}
		}
	case PodRequests:
		m.Derived.Requests = Quantities(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
	case PodNonZeroRequests:
		// NodeResourcesFit's Score (calculatePodResourceRequest): the
		// quantities summed with the defaults for missing requests, then
		// rounded once; pod-level resources skipped, as that scorer's
		// copy of the PodLevelResources gate is never set (fit.go NewFit,
		// v1.34.10 to v1.37.2).
		m.Derived.NonZeroRequests = Quantities(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{
			SkipPodLevelResources: true,
			NonMissingContainerRequests: v1.ResourceList{
				v1.ResourceCPU:    *resource.NewMilliQuantity(model.DefaultNonZeroRequests["cpu"], resource.DecimalSI),
				v1.ResourceMemory: *resource.NewQuantity(model.DefaultNonZeroRequests["memory"], resource.DecimalSI),
			},
		}))
	case PodContainers:
		cs := make([]model.Container, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
		for i := range pod.Spec.InitContainers {
			cs = append(cs, container(model.ContainerInit, &pod.Spec.InitContainers[i]))
		}
		for i := range pod.Spec.Containers {
			cs = append(cs, container(model.ContainerApp, &pod.Spec.Containers[i]))
		}
		m.Derived.Containers = cs
	case PodOwners:
		m.OwnerReferences = owners(pod.OwnerReferences)
	case PodOverhead:
		m.Overhead = Quantities(pod.Spec.Overhead)
	case PodResources:
		var rl v1.ResourceList
		if pod.Spec.Resources != nil {
			rl = pod.Spec.Resources.Requests
		}
		m.PodResources = Quantities(rl)
	case PodClaims:
		m.ClaimNames = nil
		for _, v := range pod.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				m.ClaimNames = append(m.ClaimNames, v.PersistentVolumeClaim.ClaimName)
			}
		}
	case PodImageVolumes:
		m.ImageVolumes = nil
		for _, v := range pod.Spec.Volumes {
			if v.Image != nil {
				m.ImageVolumes = append(m.ImageVolumes, v.Image.Reference)
			}
		}
	case PodAffinity:
		m.Affinity = affinityModel(pod.Spec.Affinity)
	case PodSpread:
		m.TopologySpreadConstraints = spreadModel(pod.Spec.TopologySpreadConstraints)
	case PodDefaultSpread:
		m.DefaultSpreadSelector = nil
		if spread != nil {
			if reqs := spread(pod); len(reqs) > 0 {
				m.DefaultSpreadSelector = selectorModel(&metav1.LabelSelector{MatchExpressions: reqs})
			}
		}
	case PodGates:
		m.SchedulingGates = nil
		for _, g := range pod.Spec.SchedulingGates {
			m.SchedulingGates = append(m.SchedulingGates, g.Name)
		}
	}
}

// Timestamp is t in RFC 3339 UTC, "" when unset.
func Timestamp(t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// Quantities converts a resource list into the model's units: cpu in
// millicores, everything else in base units.
func Quantities(rl v1.ResourceList) map[string]int64 {
	m := make(map[string]int64, len(rl))
	for name, q := range rl {
		m[string(name)] = QuantityValue(name, q)
	}
	return m
}

// QuantityValue is a quantity in the model's units.
func QuantityValue(name v1.ResourceName, q resource.Quantity) int64 {
	if name == v1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

func container(kind string, c *v1.Container) model.Container {
	mc := model.Container{Kind: kind, Name: c.Name, Image: c.Image}
	if c.RestartPolicy != nil {
		mc.RestartPolicy = string(*c.RestartPolicy)
	}
	if len(c.Resources.Requests) > 0 {
		mc.Requests = Quantities(c.Resources.Requests)
	}
	for _, p := range c.Ports {
		mc.Ports = append(mc.Ports, model.ContainerPort{Name: p.Name, ContainerPort: p.ContainerPort, HostPort: p.HostPort, Protocol: string(p.Protocol), HostIP: p.HostIP})
	}
	return mc
}

func owners(refs []metav1.OwnerReference) []model.OwnerReference {
	var out []model.OwnerReference
	for _, o := range refs {
		out = append(out, model.OwnerReference{APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name, UID: string(o.UID), Controller: o.Controller != nil && *o.Controller})
	}
	return out
}

func selectorModel(s *metav1.LabelSelector) *model.LabelSelector {
	if s == nil {
		return nil
	}
	out := &model.LabelSelector{MatchLabels: s.MatchLabels}
	for _, r := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, model.LabelSelectorRequirement{Key: r.Key, Operator: string(r.Operator), Values: r.Values})
	}
	return out
}

func nodeTermModel(t *v1.NodeSelectorTerm) model.NodeSelectorTerm {
	var out model.NodeSelectorTerm
	for _, r := range t.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, model.NodeSelectorRequirement{Key: r.Key, Operator: string(r.Operator), Values: r.Values})
	}
	for _, r := range t.MatchFields {
		out.MatchFields = append(out.MatchFields, model.NodeSelectorRequirement{Key: r.Key, Operator: string(r.Operator), Values: r.Values})
	}
	return out
}

func podTermModel(t *v1.PodAffinityTerm) model.PodAffinityTerm {
	return model.PodAffinityTerm{LabelSelector: selectorModel(t.LabelSelector), Namespaces: t.Namespaces, NamespaceSelector: selectorModel(t.NamespaceSelector),
		TopologyKey: t.TopologyKey, MatchLabelKeys: t.MatchLabelKeys, MismatchLabelKeys: t.MismatchLabelKeys}
}

func affinityModel(a *v1.Affinity) *model.Affinity {
	if a == nil {
		return nil
	}
	out := &model.Affinity{}
	if na := a.NodeAffinity; na != nil {
		if r := na.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
			for i := range r.NodeSelectorTerms {
				out.NodeAffinityRequired = append(out.NodeAffinityRequired, nodeTermModel(&r.NodeSelectorTerms[i]))
			}
		}
		for i := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			t := &na.PreferredDuringSchedulingIgnoredDuringExecution[i]
			out.NodeAffinityPreferred = append(out.NodeAffinityPreferred, model.PreferredSchedulingTerm{Weight: t.Weight, Preference: nodeTermModel(&t.Preference)})
		}
	}
	terms := func(ts []v1.PodAffinityTerm) (o []model.PodAffinityTerm) {
		for i := range ts {
			o = append(o, podTermModel(&ts[i]))
		}
		return o
	}
	weighted := func(ts []v1.WeightedPodAffinityTerm) (o []model.WeightedPodAffinityTerm) {
		for i := range ts {
			o = append(o, model.WeightedPodAffinityTerm{Weight: ts[i].Weight, PodAffinityTerm: podTermModel(&ts[i].PodAffinityTerm)})
		}
		return o
	}
	if pa := a.PodAffinity; pa != nil {
		out.PodAffinityRequired = terms(pa.RequiredDuringSchedulingIgnoredDuringExecution)
		out.PodAffinityPreferred = weighted(pa.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	if anti := a.PodAntiAffinity; anti != nil {
		out.PodAntiAffinityRequired = terms(anti.RequiredDuringSchedulingIgnoredDuringExecution)
		out.PodAntiAffinityPreferred = weighted(anti.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	return out
}

func spreadModel(cs []v1.TopologySpreadConstraint) []model.TopologySpreadConstraint {
	var out []model.TopologySpreadConstraint
	for _, c := range cs {
		mc := model.TopologySpreadConstraint{MaxSkew: c.MaxSkew, TopologyKey: c.TopologyKey, WhenUnsatisfiable: string(c.WhenUnsatisfiable),
			LabelSelector: selectorModel(c.LabelSelector), MatchLabelKeys: c.MatchLabelKeys}
		if c.MinDomains != nil {
			mc.MinDomains = *c.MinDomains
		}
		if c.NodeAffinityPolicy != nil {
			mc.NodeAffinityPolicy = string(*c.NodeAffinityPolicy)
		}
		if c.NodeTaintsPolicy != nil {
			mc.NodeTaintsPolicy = string(*c.NodeTaintsPolicy)
		}
		out = append(out, mc)
	}
	return out
}

// PodObject is the whole pod as JSON (pod_object): as the apiserver serves
// it, apiVersion and kind set, without metadata.managedFields.
func PodObject(pod *v1.Pod) []byte {
	p := *pod // a shallow copy: only TypeMeta and managedFields change
	p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	p.ManagedFields = nil
	return encodeObject(&p)
}

// encodeObject is an object's JSON; a Pod or Node always encodes.
func encodeObject(obj any) []byte {
	b, err := json.Marshal(obj)
	if err != nil {
		panic(fmt.Sprintf("encoding %T: %v", obj, err))
	}
	return b
}
