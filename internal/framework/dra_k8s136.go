//go:build !k8s_1_34 && !k8s_1_35

package framework

import "k8s.io/apimachinery/pkg/types"

// ClaimPending reports whether the DRA manager holds an allocation of the
// claim that the scheduler made and has not written yet.
func ClaimPending(m SharedDRAManager, claim types.UID) bool {
	return m.ResourceClaims().GetPendingAllocation(claim) != nil
}
