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

// countingNode is a NodeLabelReader that counts what is read of it.
type countingNode struct {
	labels      map[string]string
	names, keys *int
}

func (n countingNode) Name() string { *n.names++; return "n1" }

func (n countingNode) Label(key string) (string, bool) {
	*n.keys++
	v, ok := n.labels[key]
	return v, ok
}

// Terms matched through a NodeLabelReader give what the map form gives,
// and read the node's name only for matchFields.
func TestTermsReadOnlyWhatTheyName(t *testing.T) {
	labels := map[string]string{"zone": "a", "gen": "5"}
	terms := []NodeSelectorTerm{
		{MatchExpressions: []NodeSelectorRequirement{{Key: "zone", Operator: "In", Values: []string{"b"}}}},
		{MatchExpressions: []NodeSelectorRequirement{{Key: "gen", Operator: "Gt", Values: []string{"4"}}, {Key: "gpu", Operator: "DoesNotExist"}}},
		{MatchFields: []NodeSelectorRequirement{{Key: "metadata.name", Operator: "In", Values: []string{"n1"}}}},
		{},
	}
	for i, term := range terms {
		var names, keys int
		n := countingNode{labels, &names, &keys}
		if got, want := TermMatches(term, n), term.Matches("n1", labels); got != want {
			t.Errorf("term %d: through the reader %v, through the map %v", i, got, want)
		}
		if wantNames := min(1, len(term.MatchFields)); names != wantNames || keys != len(term.MatchExpressions) {
			t.Errorf("term %d: read the name %d times and %d labels; want %d and %d", i, names, keys, wantNames, len(term.MatchExpressions))
		}
	}
	if var0, var1 := 0, 0; !MatchNodeSelectorTermsOn(terms, countingNode{labels, &var0, &var1}) || MatchNodeSelectorTermsOn(terms[:1], countingNode{labels, &var0, &var1}) {
		t.Error("MatchNodeSelectorTermsOn does not OR its terms")
	}
}
