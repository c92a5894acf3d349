package main

import (
	"testing"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
	"github.com/wasmsched/wasmsched/guest-sdk/casetest"
)

// TestCases runs the policy's case tables natively (spread, the default,
// and pack); the main module's test/policies replays them against the
// compiled modules.
func TestCases(t *testing.T) {
	casetest.RunNative(t, "testdata.json")
	casetest.RunNative(t, "testdata-pack.json")
}

// An unknown mode fails every Score call with an Error that names it.
func TestUnknownMode(t *testing.T) {
	sdk.SetConfig("mode=evenly")
	defer sdk.SetConfig("")
	if err := sdk.SetReads([]string{"Devices"}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sdk.SetReads(nil) }()
	pod, node := sdk.PodData{Name: "train", Namespace: "ml"}, sdk.NodeData{Name: "b"}
	_, st := sdk.RunScore(&pod, &node)
	if st.Code != sdk.CodeError || st.Reason != "config mode=evenly: want spread or pack" {
		t.Errorf("score = %d %q, want Error naming the mode", st.Code, st.Reason)
	}
}
