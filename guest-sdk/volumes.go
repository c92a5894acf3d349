package sdk

import (
	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

// Types of Cluster.VolumeClaims.
type (
	VolumeClaim           = model.VolumeClaim
	PersistentVolume      = model.PersistentVolume
	StorageClass          = model.StorageClass
	PersistentVolumeClaim = model.PersistentVolumeClaim
)

// Volume binding modes of a StorageClass (StorageClass.VolumeBindingMode).
const (
	VolumeBindingImmediate            = "Immediate"
	VolumeBindingWaitForFirstConsumer = "WaitForFirstConsumer"
)

// VolumeClaims returns the persistentVolumeClaim volumes of the pod being
// scheduled, in spec.volumes order, each with the claim as the scheduler's
// lister holds it (Found false when it does not exist yet), the
// PersistentVolume it is bound to (Volume, nil while unbound) and its
// StorageClass (Class). A
// claim bound to a volume answers where the pod's data lives: the volume's
// NodeAffinity (or, on older volumes, its topology.kubernetes.io/zone
// label); an unbound claim whose class binds WaitForFirstConsumer will be
// provisioned where the pod lands, within the class's AllowedTopologies.
//
// The policy's args must declare Volumes (policies[].reads), or the call
// fails the policy closed with an Error that says so. Volumes grants the
// pod's own claims and what they point at, never other pods' claims
// (docs/security.md). The host reads them once per cycle; call it in
// PreFilter or PreScore and keep what you need (PerCycle), not per node.
// Generic ephemeral volumes are not listed (as the scheduler's VolumeZone
// leaves them out).
func (Cluster) VolumeClaims() []VolumeClaim {
	claims := decodeVolumeClaims(volumeClaimsList(model.VolumeClaimsClaims))
	if len(claims) == 0 {
		return nil
	}
	eachClaimRow(volumeClaimsList(model.VolumeClaimsVolumeLabels), 3, func(i int, row []string) {
		if v := claims[i].Volume; v != nil {
			if v.Labels == nil {
				v.Labels = map[string]string{}
			}
			v.Labels[row[0]] = row[1]
		}
	}, len(claims))
	claimTerms(volumeClaimsList(model.VolumeClaimsVolumeNodeAffinity), len(claims), func(i int) *[]NodeSelectorTerm {
		if claims[i].Volume == nil {
			return nil
		}
		return &claims[i].Volume.NodeAffinity
	})
	claimTerms(volumeClaimsList(model.VolumeClaimsClassTopologies), len(claims), func(i int) *[]NodeSelectorTerm {
		if claims[i].Class == nil {
			return nil
		}
		return &claims[i].Class.AllowedTopologies
	})
	return claims
}

// decodeVolumeClaims reads kind VolumeClaimsClaims: 9 strings per claim.
func decodeVolumeClaims(b []byte) []VolumeClaim {
	var out []VolumeClaim
	r := abi.NewListReader(b)
	for r.Len() >= 9 {
		f := next(&r, 9)
		vc := VolumeClaim{ClaimName: f[0], Found: f[1] == "true", Phase: f[2], VolumeName: f[3], StorageClassName: f[5]}
		if f[4] == "true" {
			vc.Volume = &PersistentVolume{Name: f[3]}
		}
		if f[6] == "true" {
			vc.Class = &StorageClass{Name: f[5], VolumeBindingMode: f[7], Provisioner: f[8]}
		}
		out = append(out, vc)
	}
	return out
}

// eachClaimRow walks rows of n strings whose first is a claim index below
// claims, handing f the index and the rest of the row.
func eachClaimRow(b []byte, n int, f func(i int, row []string), claims int) {
	r := abi.NewListReader(b)
	for r.Len() >= n {
		row := next(&r, n)
		i := int(parseInt([]byte(row[0])))
		if i >= 0 && i < claims {
			f(i, row[1:])
		}
	}
}

// claimTerms reads claim-indexed term rows (claim, term, part, key,
// operator, values) into the term list dst returns for a claim (nil: skip).
func claimTerms(b []byte, claims int, dst func(i int) *[]NodeSelectorTerm) {
	eachClaimRow(b, 6, func(i int, row []string) {
		ts := dst(i)
		if ts == nil {
			return
		}
		t := int(parseInt([]byte(row[0])))
		if t < 0 || t > 1<<16 {
			return
		}
		*ts = growTo(*ts, t)
		switch row[1] {
		case abi.TermMatchExpressions, abi.TermMatchFields:
			addNodeTermRow(&(*ts)[t], row[1:])
		}
	}, claims)
}
