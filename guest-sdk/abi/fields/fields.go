// Package fields is the table of everything a guest can read (docs/abi.md
// §4.0): the host's readers, the SDK's accessors, the docs and the tests are
// checked against it. It lives apart from package abi, which guests link,
// so the table and its formatting never weigh on a guest binary.
package fields

import (
	"fmt"
	"strings"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

// Object is what a readable field belongs to.
type Object uint8

// The objects a guest can read. The node's pods and a cluster view come
// with issue #20's later slices; each gets its own rows here.
const (
	// ObjectPod is the pod being scheduled, available at every entry point.
	ObjectPod Object = iota
	// ObjectNode is the node being evaluated: in filter and score, and in
	// their batch forms after select_node.
	ObjectNode
	// ObjectCluster is the scheduler's view of the whole cluster in this
	// cycle: every node of its snapshot, namespaces, and pod counts.
	ObjectCluster
)

func (o Object) String() string { return [...]string{"pod", "node", "cluster"}[o] }

// Wire is how a field's value travels to the guest.
type Wire uint8

// The wire forms of docs/abi.md §4 and §5.
const (
	// WireString is the value's bytes.
	WireString Wire = iota
	// WireLookup is one map entry's value by key; -1 when unset.
	WireLookup
	// WirePairs is a string list of key, value pairs (§5).
	WirePairs
	// WireRecords is a string list of records of len(Columns) strings each.
	WireRecords
	// WireQuantities is a string list of resource name, decimal int64 pairs.
	WireQuantities
	// WireI64 is an i64 result; MissingQuantity when absent.
	WireI64
	// WireI32 is an i32 result.
	WireI32
	// WireJSON is a whole object as JSON.
	WireJSON
)

func (w Wire) String() string {
	return [...]string{"bytes", "value by key, -1 if unset", "string list of (key, value)", "string list of records", "string list of (name, decimal value)", "i64", "i32", "JSON"}[w]
}

// Cost says what reading a field costs the host, so an author can see what
// a policy pays per node (docs/abi.md §6).
type Cost uint8

// The cost classes.
const (
	// CostScalar is read straight from the object on every call.
	CostScalar Cost = iota
	// CostPerCycle is computed or encoded at most once per scheduling
	// cycle, the first time any policy asks.
	CostPerCycle
	// CostPerNodeGeneration is encoded at most once per NodeInfo generation
	// (until the node or its pods change) and reused across cycles.
	CostPerNodeGeneration
	// CostPerCall is computed for every call (a lookup by key or name).
	CostPerCall
)

func (c Cost) String() string {
	return [...]string{"scalar", "once per cycle", "once per node generation", "per call"}[c]
}

// Scope is what a policy's args must declare (policies[].reads) before it
// may read a field: data beyond the pod being scheduled and the node being
// evaluated. Unscoped fields need no declaration.
type Scope string

// The scopes, as policies[].reads spells them.
const (
	ScopeNone Scope = ""
	// ScopeNodePods: the pods on each node (other teams' pods included)
	// and the host ports they use.
	ScopeNodePods Scope = "NodePods"
	// ScopeWholeObjects: the whole pod and node objects (pod_object,
	// node_object), every field of them.
	ScopeWholeObjects Scope = "WholeObjects"
	// ScopeCluster: every node of the scheduler's snapshot (names, labels,
	// taints) and the host's pod counts across them (other teams' pods
	// included, as numbers).
	ScopeCluster Scope = "Cluster"
	// ScopeNamespaces: the labels of any namespace.
	ScopeNamespaces Scope = "Namespaces"
	// ScopeVolumes: the pod's own PersistentVolumeClaims, the
	// PersistentVolumes they are bound to and their StorageClasses.
	ScopeVolumes Scope = "Volumes"
	// ScopeDevices: the pod's own ResourceClaims, and per node how many
	// devices of the classes they request its ResourceSlices hold and how
	// many are free (other teams' allocations included, as numbers).
	ScopeDevices Scope = "Devices"
)

// Scopes are the scopes a policy may declare, in docs order.
var Scopes = []Scope{ScopeNodePods, ScopeWholeObjects, ScopeCluster, ScopeNamespaces, ScopeVolumes, ScopeDevices}

// ParseScopes checks declared read names (policies[].reads, the CLI's
// --reads, a case table's "reads") and returns their scopes, refusing an
// unknown or repeated name with the list of valid ones: every tool that
// takes reads refuses the same names the same way.
func ParseScopes(names []string) ([]Scope, error) {
	out := make([]Scope, 0, len(names))
	for i, n := range names {
		known := false
		for _, s := range Scopes {
			known = known || string(s) == n
		}
		switch {
		case !known:
			return nil, fmt.Errorf("reads[%d]: unknown read %q: the reads are %s", i, n, scopeList())
		case contains(out, Scope(n)):
			return nil, fmt.Errorf("reads[%d]: %s declared twice", i, n)
		}
		out = append(out, Scope(n))
	}
	return out, nil
}

func contains(scopes []Scope, s Scope) bool {
	for _, x := range scopes {
		if x == s {
			return true
		}
	}
	return false
}

// scopeList is Scopes as a sentence's list.
func scopeList() string {
	names := make([]string, len(Scopes))
	for i, s := range Scopes {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// Undeclared is why a read its policy's args do not declare failed: the
// declaration to add and the SDK accessor that needs it. The guest's Error
// status, the scheduler's log and the CLI say the same words.
func Undeclared(fn string, num int32) string {
	for _, f := range Fields {
		if f.Fn == fn && (f.Num == num || f.Num == NoNum) && f.Scope != ScopeNone {
			return "declare " + string(f.Scope) + " in policies[].reads to use " + f.Accessor
		}
	}
	return "declare the read " + fn + " in policies[].reads"
}

// ScopeOf is the scope a read of host function fn with number num needs.
func ScopeOf(fn string, num int32) Scope {
	for _, f := range Fields {
		if f.Fn == fn && (f.Num == num || f.Num == NoNum) {
			return f.Scope
		}
	}
	return ScopeNone
}

// NoNum marks a field whose host function takes no field or kind number.
const NoNum int32 = -1

// Field is one thing a guest can read: the row of the table that the host's
// readers, the SDK's accessors, docs/abi.md and the tests are checked
// against. Adding a readable field is one row here plus its readers.
type Field struct {
	Object Object
	// Path is the field as kubectl spells it, or what the scheduler derives.
	Path string
	// Fn is the host function that reads it, Num its field or kind number
	// there (NoNum when the function takes none). Numbers are ABI v1: only
	// new numbers may be added.
	Fn  string
	Num int32
	// Wire is the value's form; Columns name a record's strings.
	Wire    Wire
	Columns []string
	Cost    Cost
	// Accessor is the Go SDK method that reads it, "Pod.Tolerations".
	Accessor string
	// Doc says what a reader needs beyond the path (units, defaults).
	Doc string
	// Scope is the declaration the read needs (ScopeNone: none).
	Scope Scope
}

// Fields is every field a guest can read, in docs/abi.md order.
var Fields = []Field{
	{ObjectPod, "metadata.name", abi.FnPodString, model.PodName, WireString, nil, CostScalar, "Pod.Name", "", ScopeNone},
	{ObjectPod, "metadata.namespace", abi.FnPodString, model.PodNamespace, WireString, nil, CostScalar, "Pod.Namespace", "", ScopeNone},
	{ObjectPod, "metadata.uid", abi.FnPodString, model.PodUID, WireString, nil, CostScalar, "Pod.UID", "", ScopeNone},
	{ObjectPod, "spec.schedulerName", abi.FnPodString, model.PodSchedulerName, WireString, nil, CostScalar, "Pod.SchedulerName", "", ScopeNone},
	{ObjectPod, "spec.priorityClassName", abi.FnPodString, model.PodPriorityClassName, WireString, nil, CostScalar, "Pod.PriorityClassName", "", ScopeNone},
	{ObjectPod, "spec.serviceAccountName", abi.FnPodString, model.PodServiceAccount, WireString, nil, CostScalar, "Pod.ServiceAccountName", "", ScopeNone},
	{ObjectPod, "spec.nodeName", abi.FnPodString, model.PodNodeName, WireString, nil, CostScalar, "Pod.NodeName", "set for a pod bound, or nominated by name, before scheduling", ScopeNone},
	{ObjectPod, "metadata.creationTimestamp", abi.FnPodString, model.PodCreationTimestamp, WireString, nil, CostScalar, "Pod.CreationTimestamp", "RFC 3339, UTC", ScopeNone},
	{ObjectPod, "metadata.deletionTimestamp", abi.FnPodString, model.PodDeletionTimestamp, WireString, nil, CostScalar, "Pod.DeletionTimestamp", `RFC 3339, UTC; "" when unset`, ScopeNone},
	{ObjectPod, "metadata.labels[key]", abi.FnPodLabel, NoNum, WireLookup, nil, CostPerCall, "Pod.Label", "", ScopeNone},
	{ObjectPod, "metadata.annotations[key]", abi.FnPodAnnotation, NoNum, WireLookup, nil, CostPerCall, "Pod.Annotation", "", ScopeNone},
	{ObjectPod, "metadata.labels", abi.FnPodList, model.PodLabels, WirePairs, nil, CostPerCycle, "Pod.Labels", "", ScopeNone},
	{ObjectPod, "metadata.annotations", abi.FnPodList, model.PodAnnotations, WirePairs, nil, CostPerCycle, "Pod.Annotations", "", ScopeNone},
	{ObjectPod, "spec.nodeSelector", abi.FnPodList, model.PodNodeSelector, WirePairs, nil, CostPerCycle, "Pod.NodeSelector", "", ScopeNone},
	{ObjectPod, "spec.tolerations", abi.FnPodList, model.PodTolerations, WireRecords, []string{"key", "operator", "value", "effect", "tolerationSeconds"}, CostPerCycle, "Pod.Tolerations",
		`tolerationSeconds is decimal, "" when unset`, ScopeNone},
	{ObjectPod, "effective requests", abi.FnPodList, model.PodRequests, WireQuantities, nil, CostPerCycle, "Pod.Requests",
		"as the scheduler computes them: the larger of the containers' sum and each init container (sidecars included), plus overhead", ScopeNone},
	{ObjectPod, "spec.initContainers, spec.containers", abi.FnPodList, model.PodContainers, WireRecords, []string{"kind", "name", "image", "restartPolicy"}, CostPerCycle, "Pod.Containers",
		`init containers first; kind is "init" or "app"; restartPolicy "Always" marks a sidecar`, ScopeNone},
	{ObjectPod, "containers' resources.requests", abi.FnPodList, model.PodContainerRequests, WireRecords, []string{"container", "resource", "value"}, CostPerCycle, "Pod.Containers",
		"container is the index in the list above; a resource the container does not request has no record, an explicit 0 has one", ScopeNone},
	{ObjectPod, "containers' ports", abi.FnPodList, model.PodContainerPorts, WireRecords, []string{"container", "name", "containerPort", "hostPort", "protocol", "hostIP"}, CostPerCycle, "Pod.Containers", "", ScopeNone},
	{ObjectPod, "metadata.ownerReferences", abi.FnPodList, model.PodOwnerReferences, WireRecords, []string{"apiVersion", "kind", "name", "uid", "controller"}, CostPerCycle, "Pod.OwnerReferences", `controller is "true" or "false"`, ScopeNone},
	{ObjectPod, "spec.overhead", abi.FnPodList, model.PodOverhead, WireQuantities, nil, CostPerCycle, "Pod.Overhead", "", ScopeNone},
	{ObjectPod, "spec.schedulingGates", abi.FnPodList, model.PodSchedulingGates, WireRecords, []string{"name"}, CostPerCycle, "Pod.SchedulingGates", "", ScopeNone},
	{ObjectPod, "spec.resources.requests (pod-level)", abi.FnPodList, model.PodResources, WireQuantities, nil, CostPerCycle, "Pod.PodResources", "empty unless the pod sets pod-level resources", ScopeNone},
	{ObjectPod, "spec.volumes[].persistentVolumeClaim.claimName", abi.FnPodList, model.PodClaims, WireRecords, []string{"claimName"}, CostPerCycle, "Pod.ClaimNames", "", ScopeNone},
	{ObjectPod, "spec.affinity.nodeAffinity.requiredDuringScheduling…nodeSelectorTerms", abi.FnPodList, model.PodNodeAffinityRequired, WireRecords, []string{"term", "weight", "part", "key", "operator", "values"}, CostPerCycle, "Pod.NodeAffinityRequired", "parts term, matchExpressions, matchFields (§4.2.1)", ScopeNone},
	{ObjectPod, "spec.affinity.nodeAffinity.preferredDuringScheduling…", abi.FnPodList, model.PodNodeAffinityPreferred, WireRecords, []string{"term", "weight", "part", "key", "operator", "values"}, CostPerCycle, "Pod.NodeAffinityPreferred", "the term row carries the weight", ScopeNone},
	{ObjectPod, "spec.affinity.podAffinity.requiredDuringScheduling…", abi.FnPodList, model.PodAffinityRequired, WireRecords, []string{"term", "weight", "part", "key", "operator", "values"}, CostPerCycle, "Pod.PodAffinityRequired", "term (key: topologyKey), labelSelector, namespaces, namespaceSelector, matchLabelKeys, mismatchLabelKeys", ScopeNone},
	{ObjectPod, "spec.affinity.podAffinity.preferredDuringScheduling…", abi.FnPodList, model.PodAffinityPreferred, WireRecords, []string{"term", "weight", "part", "key", "operator", "values"}, CostPerCycle, "Pod.PodAffinityPreferred", "as above; the term row carries the weight", ScopeNone},
	{ObjectPod, "spec.affinity.podAntiAffinity.requiredDuringScheduling…", abi.FnPodList, model.PodAntiAffinityRequired, WireRecords, []string{"term", "weight", "part", "key", "operator", "values"}, CostPerCycle, "Pod.PodAntiAffinityRequired", "as podAffinity", ScopeNone},
	{ObjectPod, "spec.affinity.podAntiAffinity.preferredDuringScheduling…", abi.FnPodList, model.PodAntiAffinityPreferred, WireRecords, []string{"term", "weight", "part", "key", "operator", "values"}, CostPerCycle, "Pod.PodAntiAffinityPreferred", "as podAffinity, weighted", ScopeNone},
	{ObjectPod, "spec.topologySpreadConstraints", abi.FnPodList, model.PodTopologySpread, WireRecords, []string{"term", "weight", "part", "key", "operator", "values"}, CostPerCycle, "Pod.TopologySpreadConstraints", "term (key: topologyKey, operator: whenUnsatisfiable, values: maxSkew), labelSelector, minDomains, nodeAffinityPolicy, nodeTaintsPolicy, matchLabelKeys", ScopeNone},
	{ObjectPod, "spec.volumes[].image.reference", abi.FnPodList, model.PodImageVolumes, WireRecords, []string{"reference"}, CostPerCycle, "Pod.ImageVolumes", "", ScopeNone},
	{ObjectPod, "default spread selector", abi.FnPodList, model.PodDefaultSpreadSelector, WireRecords, []string{"term", "weight", "part", "key", "operator", "values"}, CostPerCycle, "Pod.DefaultSpreadSelector",
		"one term (§4.2.1) of labelSelector rows: what PodTopologySpread's default constraints count the pod's peers with: the selectors of the Services selecting the pod and of its controlling ReplicationController, ReplicaSet or StatefulSet; no rows when nothing selects it", ScopeCluster},
	{ObjectPod, "effective requests, non-zero", abi.FnPodList, model.PodNonZeroRequests, WireQuantities, nil, CostPerCycle, "Pod.NonZeroRequests",
		"as NodeResourcesFit's Score counts them: a container's missing cpu or memory request counted as 100m or 200Mi, pod-level resources not applied, summed before rounding", ScopeNone},
	{ObjectPod, "effective request[name]", abi.FnPodRequest, NoNum, WireI64, nil, CostPerCycle, "Pod.Request", "0 if not requested", ScopeNone},
	{ObjectPod, "spec.priority", abi.FnPodPriority, NoNum, WireI64, nil, CostScalar, "Pod.Priority", "0 if unset", ScopeNone},
	{ObjectPod, "the whole Pod", abi.FnPodObject, abi.ObjectJSON, WireJSON, nil, CostPerCycle, "Pod.Object",
		"as the apiserver serves it, apiVersion and kind set, without metadata.managedFields", ScopeWholeObjects},

	{ObjectNode, "metadata.name", abi.FnNodeString, model.NodeName, WireString, nil, CostScalar, "Node.Name", "", ScopeNone},
	{ObjectNode, "status.nodeInfo.kubeletVersion", abi.FnNodeString, model.NodeKubeletVersion, WireString, nil, CostScalar, "Node.KubeletVersion",
		`as the kubelet reports it, "v1.37.2"`, ScopeNone},
	{ObjectNode, "status.nodeInfo.kernelVersion", abi.FnNodeString, model.NodeKernelVersion, WireString, nil, CostScalar, "Node.KernelVersion",
		`the kernel's version (uname -r), "6.8.0-1019-aws"`, ScopeNone},
	{ObjectNode, "status.nodeInfo.osImage", abi.FnNodeString, model.NodeOSImage, WireString, nil, CostScalar, "Node.OSImage",
		`the OS image (/etc/os-release PRETTY_NAME), "Ubuntu 24.04.1 LTS"`, ScopeNone},
	{ObjectNode, "status.nodeInfo.operatingSystem", abi.FnNodeString, model.NodeOperatingSystem, WireString, nil, CostScalar, "Node.OperatingSystem",
		`the operating system (GOOS of the kubelet), "linux"`, ScopeNone},
	{ObjectNode, "status.nodeInfo.architecture", abi.FnNodeString, model.NodeArchitecture, WireString, nil, CostScalar, "Node.Architecture",
		`the architecture (GOARCH of the kubelet), "amd64"`, ScopeNone},
	{ObjectNode, "status.nodeInfo.containerRuntimeVersion", abi.FnNodeString, model.NodeContainerRuntimeVersion, WireString, nil, CostScalar, "Node.ContainerRuntimeVersion",
		`the container runtime and its version, "containerd://1.7.22"`, ScopeNone},
	{ObjectNode, "metadata.labels[key]", abi.FnNodeLabel, NoNum, WireLookup, nil, CostPerCall, "Node.Label", "", ScopeNone},
	{ObjectNode, "metadata.annotations[key]", abi.FnNodeAnnotation, NoNum, WireLookup, nil, CostPerCall, "Node.Annotation", "", ScopeNone},
	{ObjectNode, "spec.taints[key]", abi.FnNodeTaint, NoNum, WireRecords, []string{"value", "effect"}, CostPerCall, "Node.Taint", "-1 if no taint has the key", ScopeNone},
	{ObjectNode, "metadata.labels", abi.FnNodeList, model.NodeLabels, WirePairs, nil, CostPerNodeGeneration, "Node.Labels", "", ScopeNone},
	{ObjectNode, "metadata.annotations", abi.FnNodeList, model.NodeAnnotations, WirePairs, nil, CostPerNodeGeneration, "Node.Annotations", "", ScopeNone},
	{ObjectNode, "spec.taints", abi.FnNodeList, model.NodeTaints, WireRecords, []string{"key", "value", "effect"}, CostPerNodeGeneration, "Node.Taints", "", ScopeNone},
	{ObjectNode, "status.allocatable", abi.FnNodeList, model.NodeAllocatable, WireQuantities, nil, CostPerNodeGeneration, "Node.AllocatableAll", "only what the node reports", ScopeNone},
	{ObjectNode, "status.capacity", abi.FnNodeList, model.NodeCapacity, WireQuantities, nil, CostPerNodeGeneration, "Node.CapacityAll", "", ScopeNone},
	{ObjectNode, "requested (the pods on the node)", abi.FnNodeList, model.NodeRequested, WireQuantities, nil, CostPerNodeGeneration, "Node.RequestedAll",
		"the sum of the requests of the pods on the node, pods assumed but not yet bound included", ScopeNone},
	{ObjectNode, "status.conditions", abi.FnNodeList, model.NodeConditions, WireRecords, []string{"type", "status", "reason"}, CostPerNodeGeneration, "Node.Conditions", "", ScopeNone},
	{ObjectNode, "status.images", abi.FnNodeList, model.NodeImages, WireRecords, []string{"name", "sizeBytes"}, CostPerNodeGeneration, "Node.Images", "one record per name of each image", ScopeNone},
	{ObjectNode, "status.addresses", abi.FnNodeList, model.NodeAddresses, WireRecords, []string{"type", "address"}, CostPerNodeGeneration, "Node.Addresses", "", ScopeNone},
	{ObjectNode, "the pods on the node", abi.FnNodeList, model.NodePods, WireRecords, []string{"namespace", "name", "uid", "priority", "terminating"}, CostPerNodeGeneration, "Node.Pods",
		"as the scheduler's snapshot has them: bound and assumed pods; terminating is \"true\" once deletionTimestamp is set", ScopeNodePods},
	{ObjectNode, "the pods' metadata.labels", abi.FnNodeList, model.NodePodLabels, WireRecords, []string{"pod", "key", "value"}, CostPerNodeGeneration, "Node.Pods", "pod is the index in the list above", ScopeNodePods},
	{ObjectNode, "the pods' metadata.ownerReferences", abi.FnNodeList, model.NodePodOwners, WireRecords, []string{"pod", "apiVersion", "kind", "name", "uid", "controller"}, CostPerNodeGeneration, "Node.Pods", "", ScopeNodePods},
	{ObjectNode, "host ports in use", abi.FnNodeList, model.NodeUsedPorts, WireRecords, []string{"ip", "protocol", "port"}, CostPerNodeGeneration, "Node.UsedPorts",
		"as NodePorts sees them: from the pods' containers' hostPort, ip 0.0.0.0 and protocol TCP when unset", ScopeNodePods},
	{ObjectNode, "non-zero requested (the pods on the node)", abi.FnNodeList, model.NodeNonZeroRequested, WireQuantities, nil, CostPerNodeGeneration, "Node.NonZeroRequested",
		"cpu and memory as NodeResourcesFit scores them: a container without a request counts 100m cpu / 200Mi memory", ScopeNone},
	{ObjectNode, "image states", abi.FnNodeList, model.NodeImageStates, WireRecords, []string{"name", "sizeBytes", "numNodes"}, CostPerCall, "Node.ImageStates",
		"as ImageLocality reads them: one record per image name; numNodes counts the snapshot's nodes that hold the image", ScopeCluster},
	{ObjectNode, "status.allocatable[name]", abi.FnNodeResource, model.ResourceAllocatable, WireI64, nil, CostScalar, "Node.Allocatable", "i64 min (SDK: -1) if the node does not report it", ScopeNone},
	{ObjectNode, "status.capacity[name]", abi.FnNodeResource, model.ResourceCapacity, WireI64, nil, CostScalar, "Node.Capacity", "i64 min (SDK: -1) if the node does not report it", ScopeNone},
	{ObjectNode, "requested[name]", abi.FnNodeResource, model.ResourceRequested, WireI64, nil, CostScalar, "Node.Requested", "0 if none", ScopeNone},
	{ObjectNode, "non-zero requested[name]", abi.FnNodeResource, model.ResourceNonZeroRequested, WireI64, nil, CostScalar, "Node.NonZeroRequestedOf",
		"cpu or memory as in non-zero requested above; 0 for any other resource", ScopeNone},
	{ObjectNode, "pod count", abi.FnNodePodCount, NoNum, WireI32, nil, CostScalar, "Node.PodCount", "pods on the node, assumed ones included", ScopeNone},
	{ObjectNode, "spec.unschedulable", abi.FnNodeUnschedulable, NoNum, WireI32, nil, CostScalar, "Node.Unschedulable", "1 if cordoned", ScopeNone},
	{ObjectNode, "the whole Node", abi.FnNodeObject, abi.ObjectJSON, WireJSON, nil, CostPerNodeGeneration, "Node.Object",
		"as the apiserver serves it, apiVersion and kind set, without metadata.managedFields", ScopeWholeObjects},

	{ObjectCluster, "number of nodes", abi.FnClusterNodes, NoNum, WireI32, nil, CostScalar, "Cluster.NodeCount", "", ScopeCluster},
	{ObjectCluster, "node[i] metadata.name", abi.FnClusterNode, model.ClusterNodeName, WireString, nil, CostScalar, "Cluster.NodeName", "", ScopeCluster},
	{ObjectCluster, "node[i] metadata.labels", abi.FnClusterNode, model.ClusterNodeLabels, WirePairs, nil, CostPerNodeGeneration, "Cluster.NodeLabels", "", ScopeCluster},
	{ObjectCluster, "node[i] spec.taints", abi.FnClusterNode, model.ClusterNodeTaints, WireRecords, []string{"key", "value", "effect"}, CostPerNodeGeneration, "Cluster.NodeTaints", "", ScopeCluster},
	{ObjectCluster, "pods matching a term, per topology value", abi.FnCountPods, NoNum, WirePairs, nil, CostPerCycle, "Cluster.CountPods",
		"value, decimal count; terminating pods excluded unless the term asks", ScopeCluster},
	{ObjectCluster, "existing pods' required anti-affinity terms the pod matches", abi.FnExistingTerms, model.ExistingAntiAffinityRequired, WireRecords, []string{"topologyKey", "value", "sum"}, CostPerCycle, "Cluster.ExistingTerms",
		"each matching term adds 1 to its topology pair on its pod's node", ScopeCluster},
	{ObjectCluster, "existing pods' required affinity terms the pod matches", abi.FnExistingTerms, model.ExistingAffinityRequired, WireRecords, []string{"topologyKey", "value", "sum"}, CostPerCycle, "Cluster.ExistingTerms",
		"each matching term adds 1", ScopeCluster},
	{ObjectCluster, "existing pods' preferred affinity terms the pod matches", abi.FnExistingTerms, model.ExistingAffinityPreferred, WireRecords, []string{"topologyKey", "value", "sum"}, CostPerCycle, "Cluster.ExistingTerms",
		"each matching term adds its weight", ScopeCluster},
	{ObjectCluster, "existing pods' preferred anti-affinity terms the pod matches", abi.FnExistingTerms, model.ExistingAntiAffinityPreferred, WireRecords, []string{"topologyKey", "value", "sum"}, CostPerCycle, "Cluster.ExistingTerms",
		"each matching term adds its weight", ScopeCluster},
	{ObjectCluster, "namespace metadata.labels", abi.FnNamespaceLabels, NoNum, WirePairs, nil, CostPerCall, "Cluster.NamespaceLabels", "-1 if there is no such namespace", ScopeNamespaces},
	{ObjectCluster, "the pod's PersistentVolumeClaims", abi.FnVolumeClaims, model.VolumeClaimsClaims, WireRecords,
		[]string{"claimName", "claimFound", "phase", "volumeName", "volumeFound", "storageClassName", "classFound", "volumeBindingMode", "provisioner"}, CostPerCycle, "Cluster.VolumeClaims",
		`one record per persistentVolumeClaim volume, in spec.volumes order; found columns "true" or "false" ("" when nothing is named); storageClassName as the scheduler reads it (the beta annotation first)`, ScopeVolumes},
	{ObjectCluster, "bound PersistentVolumes' metadata.labels", abi.FnVolumeClaims, model.VolumeClaimsVolumeLabels, WireRecords, []string{"claim", "key", "value"}, CostPerCycle, "Cluster.VolumeClaims",
		"claim is the index in the records above", ScopeVolumes},
	{ObjectCluster, "bound PersistentVolumes' spec.nodeAffinity.required", abi.FnVolumeClaims, model.VolumeClaimsVolumeNodeAffinity, WireRecords, []string{"claim", "term", "part", "key", "operator", "values"}, CostPerCycle, "Cluster.VolumeClaims",
		"term rows (§4.2.1) with the claim's index first", ScopeVolumes},
	{ObjectCluster, "StorageClasses' allowedTopologies", abi.FnVolumeClaims, model.VolumeClaimsClassTopologies, WireRecords, []string{"claim", "term", "part", "key", "operator", "values"}, CostPerCycle, "Cluster.VolumeClaims",
		"term rows of In requirements, with the claim's index first", ScopeVolumes},
	{ObjectCluster, "the pod's ResourceClaims' device requests", abi.FnResourceClaims, model.DeviceClaimsRequests, WireRecords,
		[]string{"podClaim", "claimName", "found", "allocated", "request", "deviceClassName", "count"}, CostPerCycle, "Cluster.DeviceRequests",
		`one record per request (per subrequest of a firstAvailable list, named "request/subrequest"), in spec.resourceClaims order; found and allocated "true" or "false"; count 0 for allocationMode All`, ScopeDevices},
	{ObjectCluster, "ResourceSlices' devices of the requested classes, per node", abi.FnResourceClaims, model.DeviceClaimsNodes, WireRecords,
		[]string{"node", "deviceClassName", "total", "free"}, CostPerCycle, "Cluster.NodeDevices",
		"devices of node-local slices (spec.nodeName) that the class's selectors match; free ones are neither allocated nor reserved in flight", ScopeDevices},
}

// FieldsOf returns the rows read through host function fn, in Num order
// (the order of Fields).
func FieldsOf(fn string) []Field {
	var out []Field
	for _, f := range Fields {
		if f.Fn == fn {
			out = append(out, f)
		}
	}
	return out
}

// MaxNum is the largest field or kind number of host function fn, -1 when
// it takes none: the host answers abi.BadArgs for any number above it.
func MaxNum(fn string) int32 {
	m := NoNum
	for _, f := range FieldsOf(fn) {
		m = max(m, f.Num)
	}
	return m
}

// FieldNumbers describes what each number of a numbered host function
// reads ("kind: 0 metadata.labels (key, value pairs); 1 …"), for docs.
// Nothing in a guest calls it, so fmt stays out of guest binaries.
func FieldNumbers(fn, what string) string {
	var parts []string
	for _, f := range FieldsOf(fn) {
		s := fmt.Sprintf("%d %s", f.Num, f.Path)
		switch f.Wire {
		case WirePairs:
			s += " (key, value pairs)"
		case WireRecords:
			s += fmt.Sprintf(" (%d strings each: %s)", len(f.Columns), strings.Join(f.Columns, ", "))
		case WireQuantities:
			s += " (name, decimal value pairs)"
		}
		if f.Doc != "" {
			s += " [" + f.Doc + "]"
		}
		parts = append(parts, s)
	}
	return what + ": " + strings.Join(parts, "; ")
}
