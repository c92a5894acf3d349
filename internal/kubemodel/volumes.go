package kubemodel

import (
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

// VolumeLister is what volume_claims reads: the scheduler's listers of
// PersistentVolumeClaims, PersistentVolumes and StorageClasses (in a
// scheduler, its informers'; in a case table, the case's objects). Each
// method reports whether the object exists.
type VolumeLister interface {
	Claim(namespace, name string) (*v1.PersistentVolumeClaim, bool)
	Volume(name string) (*v1.PersistentVolume, bool)
	Class(name string) (*storagev1.StorageClass, bool)
}

// VolumeClaims are the pod's persistentVolumeClaim volumes, in
// spec.volumes order, as l holds their claims, bound volumes and classes:
// what volume_claims encodes. A nil l holds nothing.
func VolumeClaims(pod *v1.Pod, l VolumeLister) []model.VolumeClaim {
	var out []model.VolumeClaim
	for _, vol := range pod.Spec.Volumes {
		if vol.PersistentVolumeClaim == nil {
			continue
		}
		vc := model.VolumeClaim{ClaimName: vol.PersistentVolumeClaim.ClaimName}
		if l != nil {
			if pvc, ok := l.Claim(pod.Namespace, vc.ClaimName); ok {
				c := FromClaim(pvc)
				vc.Found, vc.Phase, vc.VolumeName, vc.StorageClassName = true, c.Phase, c.VolumeName, c.StorageClassName
				if vc.VolumeName != "" {
					if pv, ok := l.Volume(vc.VolumeName); ok {
						m := FromVolume(pv)
						vc.Volume = &m
					}
				}
				if vc.StorageClassName != "" {
					if sc, ok := l.Class(vc.StorageClassName); ok {
						m := FromClass(sc)
						vc.Class = &m
					}
				}
			}
		}
		out = append(out, vc)
	}
	return out
}

// FromClaim is a claim as the model holds it: the class as the scheduler
// resolves it (the beta annotation before spec.storageClassName).
func FromClaim(pvc *v1.PersistentVolumeClaim) model.PersistentVolumeClaim {
	return model.PersistentVolumeClaim{Namespace: pvc.Namespace, Name: pvc.Name, Phase: string(pvc.Status.Phase),
		VolumeName: pvc.Spec.VolumeName, StorageClassName: storagehelpers.GetPersistentVolumeClaimClass(pvc)}
}

// FromVolume is a volume as the model holds it.
func FromVolume(pv *v1.PersistentVolume) model.PersistentVolume {
	m := model.PersistentVolume{Name: pv.Name, Labels: pv.Labels}
	if na := pv.Spec.NodeAffinity; na != nil && na.Required != nil {
		for i := range na.Required.NodeSelectorTerms {
			m.NodeAffinity = append(m.NodeAffinity, nodeTermModel(&na.Required.NodeSelectorTerms[i]))
		}
	}
	return m
}

// FromClass is a class as the model holds it: each allowed topology term
// a term of In requirements.
func FromClass(sc *storagev1.StorageClass) model.StorageClass {
	m := model.StorageClass{Name: sc.Name, Provisioner: sc.Provisioner}
	if sc.VolumeBindingMode != nil {
		m.VolumeBindingMode = string(*sc.VolumeBindingMode)
	}
	for _, t := range sc.AllowedTopologies {
		var term model.NodeSelectorTerm
		for _, e := range t.MatchLabelExpressions {
			term.MatchExpressions = append(term.MatchExpressions, model.NodeSelectorRequirement{Key: e.Key, Operator: string(v1.NodeSelectorOpIn), Values: e.Values})
		}
		m.AllowedTopologies = append(m.AllowedTopologies, term)
	}
	return m
}

// ToClaim, ToVolume and ToClass are the Kubernetes objects a case
// table's claims, volumes and classes stand for (FromClaim, FromVolume and
// FromClass read them back the same).
func ToClaim(c model.PersistentVolumeClaim) *v1.PersistentVolumeClaim {
	pvc := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name},
		Spec: v1.PersistentVolumeClaimSpec{VolumeName: c.VolumeName}, Status: v1.PersistentVolumeClaimStatus{Phase: v1.PersistentVolumeClaimPhase(c.Phase)}}
	if c.StorageClassName != "" {
		name := c.StorageClassName
		pvc.Spec.StorageClassName = &name
	}
	return pvc
}

// ToVolume: see ToClaim.
func ToVolume(m model.PersistentVolume) *v1.PersistentVolume {
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: m.Name, Labels: m.Labels}}
	if len(m.NodeAffinity) > 0 {
		sel := &v1.NodeSelector{}
		for _, t := range m.NodeAffinity {
			sel.NodeSelectorTerms = append(sel.NodeSelectorTerms, nodeTermV1(t))
		}
		pv.Spec.NodeAffinity = &v1.VolumeNodeAffinity{Required: sel}
	}
	return pv
}

// ToClass: see ToClaim. An allowed topology term keeps its In
// requirements; a class cannot express other operators.
func ToClass(m model.StorageClass) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: m.Name}, Provisioner: m.Provisioner}
	if m.VolumeBindingMode != "" {
		mode := storagev1.VolumeBindingMode(m.VolumeBindingMode)
		sc.VolumeBindingMode = &mode
	}
	for _, t := range m.AllowedTopologies {
		var ts v1.TopologySelectorTerm
		for _, e := range t.MatchExpressions {
			ts.MatchLabelExpressions = append(ts.MatchLabelExpressions, v1.TopologySelectorLabelRequirement{Key: e.Key, Values: e.Values})
		}
		sc.AllowedTopologies = append(sc.AllowedTopologies, ts)
	}
	return sc
}

// ClusterVolumes is a VolumeLister over a model cluster's claims, volumes
// and classes, as Kubernetes objects (case tables, policytest).
func ClusterVolumes(c *model.Cluster) VolumeLister {
	l := objectVolumes{claims: map[[2]string]*v1.PersistentVolumeClaim{}, volumes: map[string]*v1.PersistentVolume{}, classes: map[string]*storagev1.StorageClass{}}
	if c == nil {
		return l
	}
	for _, m := range c.Claims {
		l.claims[[2]string{m.Namespace, m.Name}] = ToClaim(m)
	}
	for _, m := range c.PersistentVolumes {
		l.volumes[m.Name] = ToVolume(m)
	}
	for _, m := range c.StorageClasses {
		l.classes[m.Name] = ToClass(m)
	}
	return l
}

type objectVolumes struct {
	claims  map[[2]string]*v1.PersistentVolumeClaim
	volumes map[string]*v1.PersistentVolume
	classes map[string]*storagev1.StorageClass
}

func (o objectVolumes) Claim(ns, name string) (*v1.PersistentVolumeClaim, bool) {
	c, ok := o.claims[[2]string{ns, name}]
	return c, ok
}

func (o objectVolumes) Volume(name string) (*v1.PersistentVolume, bool) {
	v, ok := o.volumes[name]
	return v, ok
}

func (o objectVolumes) Class(name string) (*storagev1.StorageClass, bool) {
	c, ok := o.classes[name]
	return c, ok
}
