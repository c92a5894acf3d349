package model

import (
	"sort"
	"strconv"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
)

// A pod as a policy reads it, and the encoders of the pod's rows of the
// fields table (pod_string, pod_request, pod_list).

// Fields for pod_string.
const (
	PodName              int32 = 0
	PodNamespace         int32 = 1
	PodUID               int32 = 2
	PodSchedulerName     int32 = 3
	PodPriorityClassName int32 = 4
	PodServiceAccount    int32 = 5
	PodNodeName          int32 = 6
	// PodCreationTimestamp and PodDeletionTimestamp are RFC 3339 in UTC
	// ("2026-11-23T10:00:00Z"), "" when unset.
	PodCreationTimestamp int32 = 7
	PodDeletionTimestamp int32 = 8

	// NumPodStrings sizes tables indexed by pod_string field.
	NumPodStrings = PodDeletionTimestamp + 1
)

// Kinds for pod_list.
const (
	PodLabels       int32 = 0
	PodAnnotations  int32 = 1
	PodNodeSelector int32 = 2
	PodTolerations  int32 = 3 // entries of 5 strings: key, operator, value, effect, tolerationSeconds ("" if unset)
	PodRequests     int32 = 4 // entries of 2 strings: resource name, decimal int64 value
	// PodContainers: init containers, then containers, 4 strings each:
	// kind ("init" or "app"), name, image, restartPolicy ("" unless set).
	PodContainers int32 = 5
	// PodContainerRequests: 3 strings per request a container sets:
	// container index (in PodContainers order), resource name, decimal
	// value. A resource the container does not request has no entry; an
	// explicit 0 has one.
	PodContainerRequests int32 = 6
	// PodContainerPorts: 6 strings per port: container index, name,
	// containerPort, hostPort ("0" if unset), protocol, hostIP.
	PodContainerPorts int32 = 7
	// PodOwnerReferences: 5 strings each: apiVersion, kind, name, uid,
	// controller ("true" or "false").
	PodOwnerReferences int32 = 8
	// PodOverhead: spec.overhead as resource name, decimal value pairs.
	PodOverhead int32 = 9
	// PodSchedulingGates: one string (the gate's name) each.
	PodSchedulingGates int32 = 10
	// PodResources: pod-level spec.resources.requests, name, decimal value
	// pairs (empty unless the pod sets them).
	PodResources int32 = 11
	// PodClaims: the claimName of each persistentVolumeClaim volume, one
	// string each.
	PodClaims int32 = 12
	// The pod's affinity and spread terms, as term rows (TermRow*): 6
	// strings each: term index, weight, part, key, operator, values (a
	// requirement's values each followed by a comma). docs/abi.md §4.2.1
	// gives the parts of each kind.
	PodNodeAffinityRequired  int32 = 13
	PodNodeAffinityPreferred int32 = 14
	PodAffinityRequired      int32 = 15
	PodAffinityPreferred     int32 = 16
	PodAntiAffinityRequired  int32 = 17
	PodAntiAffinityPreferred int32 = 18
	PodTopologySpread        int32 = 19
	// PodImageVolumes: the reference of each image volume
	// (spec.volumes[].image.reference), one string each.
	PodImageVolumes int32 = 20
	// PodDefaultSpreadSelector: the label selector PodTopologySpread's
	// default constraints count the pod's peers with (the selectors of the
	// Services selecting the pod and of its controlling
	// ReplicationController, ReplicaSet or StatefulSet), as term rows of
	// one term: a TermStart row, then TermLabelSelector rows. No rows when
	// nothing selects the pod (the default constraints do not apply).
	PodDefaultSpreadSelector int32 = 21
	// PodNonZeroRequests: the pod's requests as NodeResourcesFit's Score
	// counts them: each container (app or init) that does not request cpu
	// or memory counted at 100m / 200Mi, summed as PodRequests is (without
	// pod-level resources, which that score skips) and only then rounded
	// to the model's units; name, decimal value pairs.
	PodNonZeroRequests int32 = 22

	// NumPodLists sizes tables indexed by pod_list kind.
	NumPodLists = PodNonZeroRequests + 1
)

// Pod is a pod as a policy reads it. In a scheduler the host converts the
// v1.Pod of a cycle into it (internal/kubemodel); natively and in case
// tables it is a test's pod, the fields a test leaves unset being empty.
// JSON field names are the Go names: this is the case tables' format.
type Pod struct {
	Name, Namespace, UID, SchedulerName, PriorityClassName, ServiceAccountName string
	Labels, Annotations, NodeSelector                                          map[string]string
	Tolerations                                                                []Toleration
	// Requests, when Containers is empty, are the requests of the pod's one
	// app container, named "c": cpu in millicores, everything else in base
	// units. With Containers, leave them unset: each container has its
	// own. What a policy reads as the pod's requests is what the scheduler
	// computes from the containers (Derived.Requests, SumRequests).
	Requests map[string]int64
	Priority int64
	NodeName string
	// Containers are the pod's init containers (Kind "init") and
	// containers (Kind "app"), each with its own requests, where a missing
	// resource and an explicit 0 differ.
	Containers      []Container
	OwnerReferences []OwnerReference
	Overhead        map[string]int64
	SchedulingGates []string
	// PodResources are pod-level spec.resources.requests.
	PodResources map[string]int64
	// ClaimNames are the persistentVolumeClaim volumes' claim names.
	ClaimNames []string
	// ImageVolumes are the image volumes' references.
	ImageVolumes []string
	// DefaultSpreadSelector is what Pod.DefaultSpreadSelector returns: in
	// a scheduler, what the Services and the controller selecting the pod
	// select. It reads as requirements: each of MatchLabels becomes an In
	// requirement, in key order, before MatchExpressions.
	DefaultSpreadSelector *LabelSelector
	// CreationTimestamp and DeletionTimestamp are RFC 3339 in UTC, "" when unset.
	CreationTimestamp, DeletionTimestamp string
	// Affinity is spec.affinity; TopologySpreadConstraints are
	// spec.topologySpreadConstraints.
	Affinity                  *Affinity
	TopologySpreadConstraints []TopologySpreadConstraint
	// Object is the whole pod as JSON, what Pod.Object returns. In a case
	// table (docs/abi.md §8) it is the pod the case starts from, and the
	// fields above that are set are applied over it by the host; natively
	// Pod.Object returns it as given, so a test that reads Object gives the
	// fields it reads there.
	Object RawJSON

	// Derived is what the scheduler computes from the fields above, which
	// the encoders read: the host fills it from the v1.Pod, and natively
	// DerivePod computes it. Case tables never set it.
	Derived PodDerived `json:"-"`
}

// PodDerived is what the scheduler computes from a pod.
type PodDerived struct {
	// Requests are the pod's effective requests (SumRequests).
	Requests map[string]int64
	// NonZeroRequests are Requests with a missing cpu or memory request
	// of a container counted at DefaultNonZeroRequests, and without
	// pod-level resources (SumRequests with those defaults and no
	// podLevel).
	NonZeroRequests map[string]int64
	// Containers are the pod's containers in the ABI's order, init
	// containers first; for a pod given only Requests, its container "c".
	Containers []Container
}

// Container kinds.
const (
	ContainerInit = "init"
	ContainerApp  = "app"
)

// Container is one of the pod's init containers or containers.
type Container struct {
	// Kind is ContainerInit or ContainerApp.
	Kind        string
	Name, Image string
	// RestartPolicy is "Always" for a sidecar (an init container that keeps
	// running), "" when unset.
	RestartPolicy string
	// Requests are what the container's resources.requests set: cpu in
	// millicores, everything else in base units. A resource the container
	// does not request is absent; an explicit 0 is present. The scheduler's
	// scoring counts a missing cpu or memory request as 100m / 200Mi and an
	// explicit 0 as 0, so a policy that mirrors it needs the difference.
	Requests map[string]int64
	Ports    []ContainerPort
}

// ContainerPort is one of a container's ports. HostPort is 0 when unset.
type ContainerPort struct {
	Name                    string
	ContainerPort, HostPort int32
	Protocol, HostIP        string
}

// OwnerReference is one of the pod's metadata.ownerReferences.
type OwnerReference struct {
	APIVersion, Kind, Name, UID string
	Controller                  bool
}

// Toleration is a pod toleration. TolerationSeconds is "" when unset.
type Toleration struct {
	Key, Operator, Value, Effect, TolerationSeconds string
}

// Tolerates reports whether the toleration tolerates the taint, with
// Kubernetes' matching rules (empty key with Exists matches every taint,
// empty effect matches every effect).
func (t Toleration) Tolerates(taint Taint) bool {
	if t.Effect != "" && t.Effect != taint.Effect {
		return false
	}
	if t.Key != "" && t.Key != taint.Key {
		return false
	}
	switch t.Operator {
	case "Exists":
		return true
	case "", "Equal":
		return t.Value == taint.Value
	}
	return false
}

// RawJSON is a JSON value kept as its bytes (encoding/json's RawMessage,
// without importing encoding/json into guests).
type RawJSON []byte

// MarshalJSON returns the bytes, or null when there are none.
func (r RawJSON) MarshalJSON() ([]byte, error) {
	if len(r) == 0 {
		return []byte("null"), nil
	}
	return r, nil
}

// UnmarshalJSON keeps a copy of the bytes.
func (r *RawJSON) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*r = nil
		return nil
	}
	*r = append((*r)[:0], b...)
	return nil
}

// PodString is pod_string's field; ok is false for an unknown field.
func PodString(p *Pod, field int32) (string, bool) {
	switch field {
	case PodName:
		return p.Name, true
	case PodNamespace:
		return p.Namespace, true
	case PodUID:
		return p.UID, true
	case PodSchedulerName:
		return p.SchedulerName, true
	case PodPriorityClassName:
		return p.PriorityClassName, true
	case PodServiceAccount:
		return p.ServiceAccountName, true
	case PodNodeName:
		return p.NodeName, true
	case PodCreationTimestamp:
		return p.CreationTimestamp, true
	case PodDeletionTimestamp:
		return p.DeletionTimestamp, true
	}
	return "", false
}

// PodRequest is pod_request: the pod's effective request of one resource,
// 0 when it requests none.
func PodRequest(p *Pod, name string) int64 { return p.Derived.Requests[name] }

// PodList is pod_list's kind; ok is false for an unknown kind.
func PodList(p *Pod, kind int32) ([]byte, bool) {
	switch kind {
	case PodLabels:
		return EncodeMap(p.Labels), true
	case PodAnnotations:
		return EncodeMap(p.Annotations), true
	case PodNodeSelector:
		return EncodeMap(p.NodeSelector), true
	case PodTolerations:
		var r records
		for _, t := range p.Tolerations {
			r.add(t.Key, t.Operator, t.Value, t.Effect, t.TolerationSeconds)
		}
		return r.bytes(), true
	case PodRequests:
		return EncodeInts(p.Derived.Requests), true
	case PodNonZeroRequests:
		return EncodeInts(p.Derived.NonZeroRequests), true
	case PodContainers, PodContainerRequests, PodContainerPorts:
		return encodeContainers(p.Derived.Containers, kind), true
	case PodOwnerReferences:
		var r records
		for _, o := range p.OwnerReferences {
			r.add(o.APIVersion, o.Kind, o.Name, o.UID, strconv.FormatBool(o.Controller))
		}
		return r.bytes(), true
	case PodOverhead:
		return EncodeInts(p.Overhead), true
	case PodResources:
		return EncodeInts(p.PodResources), true
	case PodClaims:
		return encodeStrings(p.ClaimNames), true
	case PodImageVolumes:
		return encodeStrings(p.ImageVolumes), true
	case PodSchedulingGates:
		return encodeStrings(p.SchedulingGates), true
	case PodNodeAffinityRequired, PodNodeAffinityPreferred, PodAffinityRequired, PodAffinityPreferred,
		PodAntiAffinityRequired, PodAntiAffinityPreferred, PodTopologySpread, PodDefaultSpreadSelector:
		return encodeTerms(p, kind), true
	}
	return nil, false
}

// encodeContainers encodes containers (init containers first, as
// Derived.Containers holds them) as pod_list kind PodContainers,
// PodContainerRequests or PodContainerPorts (docs/abi.md §4.0). Requests
// list only what a container sets, sorted by name, so a missing request
// and an explicit 0 stay apart.
func encodeContainers(cs []Container, kind int32) []byte {
	var r records
	for i, c := range cs {
		idx := strconv.Itoa(i)
		switch kind {
		case PodContainers:
			r.add(c.Kind, c.Name, c.Image, c.RestartPolicy)
		case PodContainerRequests:
			names := make([]string, 0, len(c.Requests))
			for name := range c.Requests {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				r.add(idx, name, strconv.FormatInt(c.Requests[name], 10))
			}
		case PodContainerPorts:
			for _, p := range c.Ports {
				r.add(idx, p.Name, strconv.Itoa(int(p.ContainerPort)), strconv.Itoa(int(p.HostPort)), p.Protocol, p.HostIP)
			}
		}
	}
	return r.bytes()
}

// encodeTerms encodes one of the pod's term kinds as term rows (docs/abi.md
// §4.2.1): term index, weight, part, key, operator and values.
func encodeTerms(p *Pod, kind int32) []byte {
	var r records
	add := func(term int, weight, part, key, op, values string) {
		r.add(strconv.Itoa(term), weight, part, key, op, values)
	}
	nodeTerm := func(i int, weight string, t NodeSelectorTerm) {
		add(i, weight, abi.TermStart, "", "", "")
		for _, e := range t.MatchExpressions {
			add(i, "", abi.TermMatchExpressions, e.Key, e.Operator, joinValues(e.Values))
		}
		for _, e := range t.MatchFields {
			add(i, "", abi.TermMatchFields, e.Key, e.Operator, joinValues(e.Values))
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
		for _, e := range s.MatchExpressions {
			add(i, "", part, e.Key, e.Operator, joinValues(e.Values))
		}
	}
	podTerm := func(i int, weight string, t *PodAffinityTerm) {
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
	case PodNodeAffinityRequired:
		for i, t := range a.NodeAffinityRequired {
			nodeTerm(i, "", t)
		}
	case PodNodeAffinityPreferred:
		for i, t := range a.NodeAffinityPreferred {
			nodeTerm(i, strconv.Itoa(int(t.Weight)), t.Preference)
		}
	case PodAffinityRequired, PodAntiAffinityRequired:
		ts := a.PodAffinityRequired
		if kind == PodAntiAffinityRequired {
			ts = a.PodAntiAffinityRequired
		}
		for i := range ts {
			podTerm(i, "", &ts[i])
		}
	case PodAffinityPreferred, PodAntiAffinityPreferred:
		ts := a.PodAffinityPreferred
		if kind == PodAntiAffinityPreferred {
			ts = a.PodAntiAffinityPreferred
		}
		for i := range ts {
			podTerm(i, strconv.Itoa(int(ts[i].Weight)), &ts[i].PodAffinityTerm)
		}
	case PodTopologySpread:
		for i, c := range p.TopologySpreadConstraints {
			add(i, "", abi.TermStart, c.TopologyKey, c.WhenUnsatisfiable, strconv.Itoa(int(c.MaxSkew)))
			selector(i, abi.TermLabelSelector, c.LabelSelector)
			if c.MinDomains != 0 {
				add(i, "", abi.TermMinDomains, strconv.Itoa(int(c.MinDomains)), "", "")
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
	case PodDefaultSpreadSelector:
		// As requirements: the scheduler's default selector is one.
		if s := p.DefaultSpreadSelector; s != nil && (len(s.MatchLabels) > 0 || len(s.MatchExpressions) > 0) {
			reqs := &LabelSelector{}
			for _, k := range sortedKeys(s.MatchLabels) {
				reqs.MatchExpressions = append(reqs.MatchExpressions, LabelSelectorRequirement{Key: k, Operator: "In", Values: []string{s.MatchLabels[k]}})
			}
			reqs.MatchExpressions = append(reqs.MatchExpressions, s.MatchExpressions...)
			add(0, "", abi.TermStart, "", "", "")
			selector(0, abi.TermLabelSelector, reqs)
		}
	}
	return r.bytes()
}

// joinValues is a requirement's values as a term row carries them: each
// value followed by a comma, so that no values ("") and one empty value
// (",") differ. A comma or backslash inside a value is escaped with a
// backslash: valid label values and node names contain neither (so their
// rows are as ABI v1 first spelled them), but the API server does not
// validate a preferred node affinity term's values, and "gold,silver" must
// reach a policy as the one value it is, which no node's label can equal.
func joinValues(vs []string) string {
	n := 0
	for _, v := range vs {
		n += len(v) + 1
	}
	b := make([]byte, 0, n)
	for _, v := range vs {
		for i := 0; i < len(v); i++ {
			if v[i] == ',' || v[i] == '\\' {
				b = append(b, '\\')
			}
			b = append(b, v[i])
		}
		b = append(b, ',')
	}
	return string(b)
}
