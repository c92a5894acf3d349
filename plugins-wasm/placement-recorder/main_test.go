package main

import (
	"fmt"
	"strings"
	"testing"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"

	"github.com/wasmsched/wasmsched/guest-sdk/casetest"
)

// TestCases runs the policy's case table natively; the main module's
// test/policies replays the same table against the compiled module.
func TestCases(t *testing.T) { casetest.RunNative(t, "testdata.json") }

// Hundreds of policies do not fit one annotation with full digests: the
// recorder shortens them, then lists as many as fit and counts the rest,
// and the scheduler accepts the patch.
func TestManyPolicies(t *testing.T) {
	digest := strings.Repeat("ab", 32)
	for _, n := range []int{100, 240, 2000} {
		var ps []sdk.CyclePolicy
		for i := 0; i < n; i++ {
			ps = append(ps, sdk.CyclePolicy{Name: fmt.Sprintf("policy-%04d", i), SHA256: digest, Mode: "Enforce"})
		}
		sdk.SetCyclePolicies(ps)
		sdk.SetPatchPrefixes("placement.wasmsched.io/")
		st, patch := sdk.RunPreBind(&sdk.PodData{Name: "p"}, &sdk.NodeData{Name: "n"})
		got := patch.Annotations["placement.wasmsched.io/policies"]
		if !st.IsSuccess() || len(got) > maxPolicies {
			t.Fatalf("%d policies: %+v, annotation of %d bytes", n, st, len(got))
		}
		full := n*len("policy-0000@sha256:"+digest+", ") <= maxPolicies
		switch {
		case full && !strings.HasSuffix(got, digest):
			t.Errorf("%d policies: want full digests, got …%s", n, got[max(0, len(got)-80):])
		case !full && strings.Contains(got, digest):
			t.Errorf("%d policies: full digests in %d bytes", n, len(got))
		case n == 2000 && !strings.HasSuffix(got, "more)"):
			t.Errorf("%d policies: want a count of the rest, got …%s", n, got[len(got)-40:])
		}
		t.Logf("%d policies: %d bytes, ends %q", n, len(got), got[max(0, len(got)-40):])
	}
	sdk.SetCyclePolicies(nil)
}
