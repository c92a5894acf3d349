package sdk

import (
	"testing"

	"github.com/wasmsched/wasmsched/guest-sdk/abi/fields"
)

// Every read the ABI gates behind a declaration fails, in a guest, with the
// reason the host logs and the CLI prints for it: the declaration and the
// accessor of the fields table.
func TestUndeclaredReasonsMatchFields(t *testing.T) {
	n := 0
	for _, f := range fields.Fields {
		if f.Scope == fields.ScopeNone {
			continue
		}
		n++
		if got, want := undeclaredReason(f.Fn, f.Num), fields.Undeclared(f.Fn, f.Num); got != want {
			t.Errorf("%s(%d): the SDK says %q, the host %q", f.Fn, f.Num, got, want)
		}
	}
	if n < 15 {
		t.Fatalf("only %d declared reads in the fields table", n)
	}
}
