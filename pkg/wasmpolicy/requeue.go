package wasmpolicy

import (
	"maps"
	"reflect"
	"slices"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/guest-sdk/abi/fields"
)

// A pod a policy rejected is retried when something the policy may have
// read changes, as kube-scheduler's own plugins register the cluster
// events that can make the pods they reject schedulable:
//   - the pod and node fields every policy reads: Node and Pod events
//     (EventsToRegister), node conditions included;
//   - the Volumes read (volume_claims): PersistentVolumeClaim,
//     PersistentVolume and StorageClass events, the ones kube-scheduler's
//     VolumeZone registers, when some policy may declare the read;
//   - namespace labels, which the Namespaces read (namespace_labels) and
//     the Cluster read (count_pods' namespace selectors) see:
//     kube-scheduler has no Namespace event, so a change of a namespace's
//     labels sends the pods that policies declaring either read rejected
//     back to the queue itself.
//
// The hints skip a pod that no policy declaring the read rejected
// (rejectedBy), and an object the pod does not read (a claim it does not
// name, a volume whose labels and node affinity are unchanged).

// rejectedBy reports whether a policy that declares scope rejected pod
// (declares), and whether any policy remembers rejecting it (known). A
// pod no policy remembers (beyond maxRemembered, or rejected before a
// reload took the records) is retried as if one declaring scope had.
func (w *WasmPolicy) rejectedBy(pod *v1.Pod, scope fields.Scope) (declares, known bool) {
	set := w.current()
	if set == nil {
		return false, false
	}
	for _, p := range set.all {
		p.mu.Lock()
		_, ok := p.rejected[pod.UID]
		p.mu.Unlock()
		if ok {
			known = true
			if slices.Contains(p.cfg.Reads, string(scope)) {
				return true, true
			}
		}
	}
	return false, known
}

// forgetRejected drops a deleted pod from every policy's rejected pods.
func (w *WasmPolicy) forgetRejected(pod *v1.Pod) {
	set := w.current()
	if set == nil {
		return
	}
	for _, p := range set.all {
		p.mu.Lock()
		delete(p.rejected, pod.UID)
		p.mu.Unlock()
	}
}

// readHint is the queueing hint of an event that changes what a policy
// declaring scope reads: Queue when such a policy may have rejected the
// pod and changed says the event's object is one the pod reads. A pod a
// gate holds waits for the events its gate asked for (recheck_on).
func (w *WasmPolicy) readHint(scope fields.Scope, changed func(pod *v1.Pod, oldObj, newObj interface{}) bool) fwk.QueueingHintFn {
	return func(logger klog.Logger, pod *v1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
		if _, gated := w.gates.lookup(pod.UID); gated {
			return fwk.QueueSkip, nil
		}
		if declares, known := w.rejectedBy(pod, scope); known && !declares {
			return fwk.QueueSkip, nil
		}
		if !changed(pod, oldObj, newObj) {
			return fwk.QueueSkip, nil
		}
		logger.V(5).Info("An object a policy's read covers changed; the pod is retried", "pod", klog.KObj(pod), "read", scope)
		return fwk.Queue, nil
	}
}

// volumeEvents are the events of the Volumes read, with their hints.
func (w *WasmPolicy) volumeEvents() []fwk.ClusterEventWithHint {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.PersistentVolumeClaim, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: w.readHint(fields.ScopeVolumes, claimOfPod)},
		{Event: fwk.ClusterEvent{Resource: fwk.PersistentVolume, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: w.readHint(fields.ScopeVolumes, volumeReadChanged)},
		// A class's fields are immutable, and its allowedTopologies too:
		// only a new one (a claim's class that was missing) changes a read.
		{Event: fwk.ClusterEvent{Resource: fwk.StorageClass, ActionType: fwk.Add}, QueueingHintFn: w.readHint(fields.ScopeVolumes, classAdded)},
	}
}

// deviceEvents are the events of the Devices read: the DRA objects the
// DynamicResources plugin watches. A policy may prefer or refuse a node
// for devices freed or added anywhere, so any change of them retries
// the pods such a policy rejected.
func (w *WasmPolicy) deviceEvents() []fwk.ClusterEventWithHint {
	always := func(*v1.Pod, interface{}, interface{}) bool { return true }
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.Add | fwk.Update | fwk.Delete}, QueueingHintFn: w.readHint(fields.ScopeDevices, always)},
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceSlice, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: w.readHint(fields.ScopeDevices, always)},
		{Event: fwk.ClusterEvent{Resource: fwk.DeviceClass, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: w.readHint(fields.ScopeDevices, always)},
	}
}

// claimOfPod reports whether the claim added or changed is one the pod
// names (volume_claims reads the pod's persistentVolumeClaim volumes).
func claimOfPod(pod *v1.Pod, _, newObj interface{}) bool {
	pvc, ok := newObj.(*v1.PersistentVolumeClaim)
	if !ok || pvc.Namespace != pod.Namespace {
		return false
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == pvc.Name {
			return true
		}
	}
	return false
}

// volumeReadChanged reports whether a volume is new, or changed in what
// volume_claims reads of it: its labels and its node affinity.
func volumeReadChanged(_ *v1.Pod, oldObj, newObj interface{}) bool {
	pv, ok := newObj.(*v1.PersistentVolume)
	if !ok {
		return false
	}
	old, ok := oldObj.(*v1.PersistentVolume)
	if !ok || old == nil {
		return true
	}
	return !maps.Equal(old.Labels, pv.Labels) || !reflect.DeepEqual(old.Spec.NodeAffinity, pv.Spec.NodeAffinity)
}

// classAdded reports a new StorageClass.
func classAdded(_ *v1.Pod, _, newObj interface{}) bool {
	_, ok := newObj.(*storagev1.StorageClass)
	return ok
}

// watchNamespaceLabels sends the pods that policies declaring the
// Namespaces or the Cluster read rejected back to the queue when a
// namespace's labels change.
func (w *WasmPolicy) watchNamespaceLabels(logger klog.Logger, informer cache.SharedIndexInformer) {
	changed := func(oldObj, newObj interface{}) {
		o, ok1 := oldObj.(*v1.Namespace)
		n, ok2 := newObj.(*v1.Namespace)
		if !ok1 || !ok2 || maps.Equal(o.Labels, n.Labels) {
			return
		}
		w.activate(logger, w.rejectedReading(fields.ScopeNamespaces, fields.ScopeCluster), "Requeued pods rejected by policies that read namespace labels, after a namespace's labels changed", "namespace", n.Name)
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: changed}); err != nil {
		logger.Error(err, "Could not watch namespaces; pods rejected by policies that read namespace labels are retried on other events only")
	}
}

// rejectedReading lists the pods that the policies declaring one of
// scopes rejected, keeping the records (the pods may be rejected again).
func (w *WasmPolicy) rejectedReading(scopes ...fields.Scope) map[string]*v1.Pod {
	out := map[string]*v1.Pod{}
	set := w.current()
	if set == nil {
		return out
	}
	for _, p := range set.all {
		if !slices.ContainsFunc(scopes, func(s fields.Scope) bool { return slices.Contains(p.cfg.Reads, string(s)) }) {
			continue
		}
		p.addRejected(out, false)
	}
	return out
}
