package main

import (
	"testing"

	"github.com/wasmsched/wasmsched/guest-sdk/casetest"
)

// TestCases runs the table natively; cmd/wasmsched's TestTypedFields runs
// it against the TinyGo and Go builds.
func TestCases(t *testing.T) { casetest.RunNative(t, "testdata.json") }
