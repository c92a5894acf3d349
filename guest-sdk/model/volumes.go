package model

import (
	"strconv"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
)

// The pod's persistent volume claims as a policy reads them (volume_claims,
// docs/abi.md §4.6.3): each claim with its bound PersistentVolume and its
// StorageClass, as the scheduler's listers hold them.

// Kinds for volume_claims.
const (
	// VolumeClaimsClaims: one record of 9 strings per persistentVolumeClaim
	// volume of the pod, in spec.volumes order: claimName, claimFound,
	// phase, volumeName, volumeFound, storageClassName, classFound,
	// volumeBindingMode, provisioner. The found columns are "true" or
	// "false"; a column of an object not found is "".
	VolumeClaimsClaims int32 = 0
	// VolumeClaimsVolumeLabels: 3 strings per label of a claim's bound
	// PersistentVolume: the claim's index, key, value (keys sorted).
	VolumeClaimsVolumeLabels int32 = 1
	// VolumeClaimsVolumeNodeAffinity: the bound volume's
	// spec.nodeAffinity.required node selector terms, as claim-indexed
	// term rows: 6 strings each: claim, term, part, key, operator, values
	// (parts term, matchExpressions, matchFields; values as §4.2.1).
	VolumeClaimsVolumeNodeAffinity int32 = 2
	// VolumeClaimsClassTopologies: the claim's StorageClass's
	// allowedTopologies as claim-indexed term rows (matchExpressions with
	// operator In).
	VolumeClaimsClassTopologies int32 = 3

	// NumVolumeClaimKinds sizes tables indexed by volume_claims kind.
	NumVolumeClaimKinds = VolumeClaimsClassTopologies + 1
)

// PersistentVolumeClaim is a claim the cluster holds, as case tables spell
// it (Cluster.Claims).
type PersistentVolumeClaim struct {
	Namespace, Name string
	// Phase is status.phase: "Pending", "Bound" or "Lost".
	Phase string
	// VolumeName is spec.volumeName, the PersistentVolume it is bound to
	// ("" while unbound).
	VolumeName string
	// StorageClassName is the class as the scheduler reads it: the
	// annotation volume.beta.kubernetes.io/storage-class when set, else
	// spec.storageClassName.
	StorageClassName string
}

// PersistentVolume is a volume the cluster holds.
type PersistentVolume struct {
	Name   string
	Labels map[string]string
	// NodeAffinity are spec.nodeAffinity.required's node selector terms
	// (ORed): where the volume can be reached from.
	NodeAffinity []NodeSelectorTerm
}

// StorageClass is a class the cluster holds.
type StorageClass struct {
	Name        string
	Provisioner string
	// VolumeBindingMode is "Immediate" or "WaitForFirstConsumer" ("" when
	// unset, which the API server defaults to Immediate).
	VolumeBindingMode string
	// AllowedTopologies are the class's allowedTopologies, each a term of
	// In requirements (its matchLabelExpressions).
	AllowedTopologies []NodeSelectorTerm
}

// VolumeClaim is one persistentVolumeClaim volume of the pod being
// scheduled, with what the scheduler's listers hold for it.
type VolumeClaim struct {
	// ClaimName is spec.volumes[].persistentVolumeClaim.claimName.
	ClaimName string
	// Found: the claim exists in the pod's namespace. When false, the
	// fields below are empty.
	Found            bool
	Phase            string
	VolumeName       string
	StorageClassName string
	// Volume is the bound PersistentVolume; nil while the claim is unbound
	// (VolumeName "") or when the volume it names does not exist.
	Volume *PersistentVolume
	// Class is the claim's StorageClass; nil when it names none or one that
	// does not exist.
	Class *StorageClass
}

// VolumeClaims are pod p's claims (p.ClaimNames) as c holds them: what
// volume_claims reads natively and in case tables.
func VolumeClaims(c *Cluster, p *Pod) []VolumeClaim {
	out := make([]VolumeClaim, 0, len(p.ClaimNames))
	for _, name := range p.ClaimNames {
		vc := VolumeClaim{ClaimName: name}
		var claim *PersistentVolumeClaim
		if c != nil {
			for i := range c.Claims {
				if c.Claims[i].Namespace == p.Namespace && c.Claims[i].Name == name {
					claim = &c.Claims[i]
					break
				}
			}
		}
		if claim != nil {
			vc.Found, vc.Phase, vc.VolumeName, vc.StorageClassName = true, claim.Phase, claim.VolumeName, claim.StorageClassName
			if vc.VolumeName != "" {
				for i := range c.PersistentVolumes {
					if c.PersistentVolumes[i].Name == vc.VolumeName {
						vc.Volume = &c.PersistentVolumes[i]
						break
					}
				}
			}
			if vc.StorageClassName != "" {
				for i := range c.StorageClasses {
					if c.StorageClasses[i].Name == vc.StorageClassName {
						vc.Class = &c.StorageClasses[i]
						break
					}
				}
			}
		}
		out = append(out, vc)
	}
	return out
}

// EncodeVolumeClaims encodes kind of volume_claims; ok is false for an
// unknown kind.
func EncodeVolumeClaims(vcs []VolumeClaim, kind int32) ([]byte, bool) {
	var r records
	found := func(b bool) string {
		if b {
			return "true"
		}
		return "false"
	}
	terms := func(claim int, ts []NodeSelectorTerm) {
		for i, t := range ts {
			ci, ti := strconv.Itoa(claim), strconv.Itoa(i)
			r.add(ci, ti, abi.TermStart, "", "", "")
			for _, e := range t.MatchExpressions {
				r.add(ci, ti, abi.TermMatchExpressions, e.Key, e.Operator, joinValues(e.Values))
			}
			for _, e := range t.MatchFields {
				r.add(ci, ti, abi.TermMatchFields, e.Key, e.Operator, joinValues(e.Values))
			}
		}
	}
	switch kind {
	case VolumeClaimsClaims:
		for _, vc := range vcs {
			volumeFound, classFound, mode, provisioner := "", "", "", ""
			if vc.VolumeName != "" {
				volumeFound = found(vc.Volume != nil)
			}
			if vc.StorageClassName != "" {
				classFound = found(vc.Class != nil)
			}
			if vc.Class != nil {
				mode, provisioner = vc.Class.VolumeBindingMode, vc.Class.Provisioner
			}
			r.add(vc.ClaimName, found(vc.Found), vc.Phase, vc.VolumeName, volumeFound, vc.StorageClassName, classFound, mode, provisioner)
		}
	case VolumeClaimsVolumeLabels:
		for i, vc := range vcs {
			if vc.Volume == nil {
				continue
			}
			for _, k := range sortedKeys(vc.Volume.Labels) {
				r.add(strconv.Itoa(i), k, vc.Volume.Labels[k])
			}
		}
	case VolumeClaimsVolumeNodeAffinity:
		for i, vc := range vcs {
			if vc.Volume != nil {
				terms(i, vc.Volume.NodeAffinity)
			}
		}
	case VolumeClaimsClassTopologies:
		for i, vc := range vcs {
			if vc.Class != nil {
				terms(i, vc.Class.AllowedTopologies)
			}
		}
	default:
		return nil, false
	}
	return r.bytes(), true
}
