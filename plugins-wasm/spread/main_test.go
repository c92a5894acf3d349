package main

import (
	"testing"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
	"github.com/wasmsched/wasmsched/guest-sdk/casetest"
)

// TestCases runs the policy's case table natively; the main module's
// test/policies replays the same table against the compiled module.
func TestCases(t *testing.T) { casetest.RunNative(t, "testdata.json") }

// A config without one valid weight (another policy's config pasted here,
// weights out of 1..100) fails every node's score with a reason that says
// what to write, instead of scoring every node 0.
func TestConfigWithoutValidWeights(t *testing.T) {
	for _, config := range []string{"key=team", "cpu=0,memory=101", "cpu=1.5"} {
		resources = nil
		sdk.SetConfig(config)
		pod, node := sdk.PodData{Name: "a"}, sdk.NodeData{Name: "n", Allocatable: map[string]int64{"cpu": 1000}}
		if s, st := sdk.RunScore(&pod, &node); st.Code != sdk.CodeError || st.Reason != noWeights || s != 0 {
			t.Errorf("config %q: score %d, status %+v; want an Error %q", config, s, st, noWeights)
		}
	}
	resources = nil
}
