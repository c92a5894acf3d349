package main

import (
	"testing"

	"github.com/wasmsched/wasmsched/guest-sdk/casetest"
)

// TestCases runs the policy's case tables natively; the main module's
// test/policies replays the same tables against the compiled module.
func TestCases(t *testing.T) { casetest.RunNative(t, "testdata.json") }

// TestSpillAndRequire runs the table of the spill and require options.
func TestSpillAndRequire(t *testing.T) {
	configRead = false // the first table's config is kept otherwise
	t.Cleanup(func() { configRead = false })
	casetest.RunNative(t, "testdata-spill.json")
}
