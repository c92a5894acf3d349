package ports

import (
	"fmt"
	"math/rand/v2"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// claimNames are the claims pods name (claimVolumes); "c4" never exists.
var claimNames = []string{"c0", "c1", "c2", "c3", "c4"}

// volumeObjects are what VolumeZone reads: in each of the namespaces
// "default" and "other", claims c0-c3 (each may be missing) bound to a
// volume that exists or not, or unbound with no class, a class that does
// not exist, one without a binding mode, an Immediate one or a
// WaitForFirstConsumer one (the storage.k8s.io annotation or
// spec.storageClassName); volumes pv-0..pv-3 with zone and region labels,
// GA or beta, several zones joined by "__", with spaces, or unparsable.
func volumeObjects(r *rand.Rand) []runtime.Object {
	wffc, immediate := storagev1.VolumeBindingWaitForFirstConsumer, storagev1.VolumeBindingImmediate
	objs := []runtime.Object{
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "late"}, Provisioner: "csi.example.com", VolumeBindingMode: &wffc},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "now"}, Provisioner: "csi.example.com", VolumeBindingMode: &immediate},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "unset"}, Provisioner: "csi.example.com"},
	}
	zoneValues := []string{"zone-a", "zone-b", "zone-a__zone-b", " zone-c ", "zone-a__", ""}
	for i := range 4 {
		pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("pv-", i), Labels: map[string]string{}}}
		for _, key := range []string{v1.LabelTopologyZone, v1.LabelFailureDomainBetaZone, v1.LabelTopologyRegion, v1.LabelFailureDomainBetaRegion} {
			if r.IntN(3) == 0 {
				v := zoneValues[r.IntN(len(zoneValues))]
				if key == v1.LabelTopologyRegion || key == v1.LabelFailureDomainBetaRegion {
					v = []string{"r1", "r2", "r1__r2"}[r.IntN(3)]
				}
				pv.Labels[key] = v
			}
		}
		objs = append(objs, pv)
	}
	for _, ns := range []string{"default", "other"} {
		for _, name := range claimNames[:4] {
			if r.IntN(5) == 0 {
				continue // missing
			}
			pvc := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
			if r.IntN(2) == 0 {
				pvc.Spec.VolumeName = []string{"pv-0", "pv-1", "pv-2", "pv-3", "pv-gone"}[r.IntN(5)]
				pvc.Status.Phase = v1.ClaimBound
			} else {
				pvc.Status.Phase = v1.ClaimPending
				switch class := []string{"", "late", "late", "now", "unset", "gone"}[r.IntN(6)]; {
				case class == "":
				case r.IntN(4) == 0: // the beta annotation, which wins
					pvc.Annotations = map[string]string{v1.BetaStorageClassAnnotation: class}
				default:
					pvc.Spec.StorageClassName = &class
				}
			}
			objs = append(objs, pvc)
		}
	}
	return objs
}

// claimVolumes are a pod's persistentVolumeClaim volumes: none in half the
// pods, else one or two.
func claimVolumes(r *rand.Rand) []v1.Volume {
	var vs []v1.Volume
	for i := range r.IntN(4) / 2 * (1 + r.IntN(2)) {
		vs = append(vs, v1.Volume{Name: fmt.Sprint("claim", i), VolumeSource: v1.VolumeSource{
			PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claimNames[r.IntN(len(claimNames))]}}})
	}
	return vs
}
