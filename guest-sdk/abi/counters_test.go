package abi

import (
	"fmt"
	"strings"
	"testing"
)

func TestCounters(t *testing.T) {
	var c Counters
	if got := c.Add("a", "ns", "seats", 2); got != 2 {
		t.Fatalf("first take = %d, want 2", got)
	}
	if got := c.Add("b", "ns", "seats", 3); got != 5 {
		t.Fatalf("second take = %d, want 5", got)
	}
	mark := c.Held("b")
	c.Add("b", "ns", "gpus", 1)
	if n := c.RollBack("b", mark); n != 1 || c.Get("gpus") != 0 || c.Get("seats") != 5 {
		t.Fatalf("rolling b back to its mark gave back %d: gpus %d seats %d, want 1, 0, 5", n, c.Get("gpus"), c.Get("seats"))
	}
	if n := c.RollBack("a", 0); n != 1 || c.Get("seats") != 3 || c.Holders() != 1 {
		t.Fatalf("releasing a gave back %d: seats %d, holders %d; want 1, 3, 1", n, c.Get("seats"), c.Holders())
	}
	if n := c.RollBack("a", 0); n != 0 {
		t.Fatalf("releasing a twice gave back %d", n)
	}
	c.RollBack("b", 0)
	if len(c.Counts()) != 0 || c.Holders() != 0 {
		t.Fatalf("after every release: counts %v, %d holders", c.Counts(), c.Holders())
	}

	for _, tc := range []struct {
		key  string
		n    int64
		want int64
	}{
		{"", 1, int64(BadArgs)},
		{strings.Repeat("k", MaxCounterKeyLen+1), 1, int64(BadArgs)},
		{"k", 0, int64(BadArgs)},
		{"k", -1, int64(BadArgs)},
		{"k", MaxCount + 1, int64(BadArgs)},
		{"k", MaxCount, MaxCount},
		{"k", 1, int64(TooLarge)},
	} {
		if got := c.Add("p", "ns", tc.key, tc.n); got != tc.want {
			t.Errorf("Add(%.10q, %d) = %d, want %d", tc.key, tc.n, got, tc.want)
		}
	}
	if c.Get("k") != MaxCount {
		t.Fatalf("a refused take changed the count: %d", c.Get("k"))
	}
	c.RollBack("p", 0)

	// One pod's takes are bounded, and so are a policy's keys.
	for i := range MaxCountsHeld {
		if got := c.Add("p", "ns", "k", 1); got != int64(i+1) {
			t.Fatalf("take %d = %d", i, got)
		}
	}
	if got := c.Add("p", "ns", "k", 1); got != int64(TooLarge) {
		t.Fatalf("take past %d per pod = %d, want TooLarge", MaxCountsHeld, got)
	}
	c.RollBack("p", 0)
	for i := range MaxCounterKeys {
		if got := c.Add(fmt.Sprint("pod", i), "ns", fmt.Sprint("key", i), 1); got != 1 {
			t.Fatalf("key %d = %d", i, got)
		}
	}
	if got := c.Add("another", "ns", "one-more", 1); got != int64(TooLarge) {
		t.Fatalf("key past %d = %d, want TooLarge", MaxCounterKeys, got)
	}
	// Another namespace's pods open keys of their own: one namespace
	// cannot use up the policy's keys.
	if got := c.Add("theirs", "other-ns", "one-more", 1); got != 1 {
		t.Fatalf("another namespace's first key, with ns at its %d = %d, want 1", MaxCounterKeys, got)
	}
	c.RollBack("theirs", 0)
	if got := c.Add("another", "ns", "key0", 1); got != 2 {
		t.Fatalf("a key in use, at the key limit = %d, want 2", got)
	}
	c.RollBack("pod0", 0)
	c.RollBack("another", 0)
	if got := c.Add("another", "ns", "one-more", 1); got != 1 {
		t.Fatalf("a key after one was freed = %d, want 1", got)
	}
}
