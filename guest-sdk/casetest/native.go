//go:build !wasip1

package casetest

import (
	"testing"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

// RunNative runs every case of the file against the registered functions.
func RunNative(t *testing.T, path string) {
	t.Helper()
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	sdk.SetConfig(f.Config)
	for _, c := range f.Cases {
		t.Run(c.Name, func(t *testing.T) {
			pod, node := c.Pod, c.Node
			sdk.SetCluster(c.ClusterData())
			defer sdk.SetCluster(nil)
			if c.Filter != nil {
				st := sdk.RunPreFilter(&pod)
				if st.IsSuccess() {
					st = sdk.RunFilter(&pod, &node)
				}
				if int32(st.Code) != c.Filter.Code || (c.Filter.Reason != "" && st.Reason != c.Filter.Reason) {
					t.Errorf("filter = %d %q, want %d %q", st.Code, st.Reason, c.Filter.Code, c.Filter.Reason)
				}
			}
			if c.Score != nil {
				// As in the scheduler and `wasmsched test --cases`:
				// prescore, then score.
				if st := sdk.RunPreScore(&pod); !st.IsSuccess() {
					t.Fatalf("prescore = %+v: the policy does not score this pod", st)
				}
				s, st := sdk.RunScore(&pod, &node)
				if !st.IsSuccess() || s != *c.Score {
					t.Errorf("score = %d (%+v), want %d", s, st, *c.Score)
				}
			}
		})
	}
}
