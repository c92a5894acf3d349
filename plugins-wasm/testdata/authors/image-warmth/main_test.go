package main

import (
	"testing"

	"github.com/wasmsched/wasmsched/guest-sdk/casetest"
)

// TestCases runs the policy's case table natively.
func TestCases(t *testing.T) { casetest.RunNative(t, "testdata.json") }
