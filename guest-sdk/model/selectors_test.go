package model

import "testing"

// equal, the model's copy of sdk.Equal, is ==, on every length up to past
// two words and with one byte changed at every position.
func TestEqual(t *testing.T) {
	words := []string{"", "a", "ab", "abc", "abcd", "abcde", "abcdefg", "abcdefgh", "abcdefghi", "abcdefghijklmno", "abcdefghijklmnop", "abcdefghijklmnopq", "abcdefghijklmnopqrstuvwxyz0123456789"}
	for _, a := range words {
		for _, b := range words {
			if equal(a, b) != (a == b) {
				t.Fatalf("equal(%q, %q) = %v", a, b, !(a == b))
			}
			for i := range a {
				c := []byte(a)
				c[i] ^= 1
				if equal(a, string(c)) {
					t.Fatalf("equal(%q, %q) = true", a, c)
				}
			}
		}
	}
}
