package main

import (
	"os"
	"testing"
)

// TestABIDocIsCurrent fails when docs/abi.md's generated tables do not match
// guest-sdk/abi: a new extension point or host function without `make generate`.
func TestABIDocIsCurrent(t *testing.T) {
	doc, err := os.ReadFile("../../docs/abi.md")
	if err != nil {
		t.Fatal(err)
	}
	out, err := render(doc)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != string(doc) {
		t.Fatal("docs/abi.md is stale: run `make generate`")
	}
}
