package main

import (
	"testing"

	"github.com/wasmsched/wasmsched/guest-sdk/casetest"
)

// TestCases runs the policy's case table natively.
func TestCases(t *testing.T) { casetest.RunNative(t, "testdata.json") }

// TestBadConfig: the config is per file, so a bad config needs a table of its own.
func TestBadConfig(t *testing.T) { casetest.RunNative(t, "testdata-badconfig.json") }
