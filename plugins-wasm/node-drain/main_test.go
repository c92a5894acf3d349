package main

import (
	"testing"

	"github.com/wasmsched/wasmsched/guest-sdk/casetest"
)

// TestCases runs the policy's case table natively; the main module's
// test/policies replays the same table against the compiled module.
func TestCases(t *testing.T) { casetest.RunNative(t, "testdata.json") }
