package host

import (
	"testing"

	"github.com/wasmsched/wasmsched/host/internal/hostabi"
)

// A guest caught reading outside its rows is not grouped under that
// layout again, and still is under the others, until maxUnkeyableLayouts
// layouts have caught it: then under none, and its verdicts are neither
// shared nor remembered.
func TestUnkeyableUnderLayouts(t *testing.T) {
	v := &Version{p: &Policy{}}
	other := new(hostabi.Layout)
	var caught []*hostabi.Layout
	for i := range maxUnkeyableLayouts + 1 {
		l := new(hostabi.Layout)
		v.unkeyableUnder(l)
		v.unkeyableUnder(l) // caught twice counts once
		caught = append(caught, l)
		if permanent := i == maxUnkeyableLayouts; v.unkeyable.Load() != permanent || v.reusable() == permanent {
			t.Fatalf("after %d layouts: unkeyable %v, reusable %v", i+1, v.unkeyable.Load(), v.reusable())
		}
		if i < maxUnkeyableLayouts {
			for _, c := range caught {
				if v.keyableUnder(c) {
					t.Fatalf("after %d layouts: still grouped under a layout that caught it", i+1)
				}
			}
			if !v.keyableUnder(other) {
				t.Fatalf("after %d layouts: not grouped under a layout that never caught it", i+1)
			}
		}
	}
}
