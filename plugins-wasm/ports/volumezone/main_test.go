package main

import (
	"testing"

	"github.com/wasmsched/wasmsched/guest-sdk/casetest"
)

// TestCases runs the port's case table natively, several nodes per case
// and NormalizeScore included; test/ports replays it against the compiled
// port.
func TestCases(t *testing.T) { casetest.RunNative(t, "testdata.json") }
