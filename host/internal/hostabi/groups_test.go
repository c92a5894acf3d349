package hostabi

import (
	"fmt"
	"reflect"
	"testing"
)

// groupsOf groups nodes whose rows are the given strings, as FillTable does.
func groupsOf(rows ...string) *RowGroups {
	g := &RowGroups{}
	g.reset(len(rows))
	for i, r := range rows {
		g.add(nodeInfo(fmt.Sprint("n", i), nil), []byte(r))
	}
	return g
}

// Equal rows share one row, numbered in order of first use, and Scatter
// gives each node its row's verdict and score.
func TestRowGroupsScatter(t *testing.T) {
	g := groupsOf("a", "b", "a", "c", "b", "a")
	if want := []int32{0, 1, 0, 2, 1, 0}; !reflect.DeepEqual(g.Of, want) || len(g.Nodes) != 3 {
		t.Fatalf("groups %v (%d rows), want %v (3 rows)", g.Of, len(g.Nodes), want)
	}
	if g.Nodes[1].Node().Name != "n1" || g.Nodes[2].Node().Name != "n3" {
		t.Fatalf("a row's node is the first with it: %s, %s", g.Nodes[1].Node().Name, g.Nodes[2].Node().Name)
	}
	rowResults := []Result{{}, {Code: 2, Reason: "no"}, {Code: 1, Reason: "err"}}
	rowScores := []int64{10, 20, 30}
	rowFrom := []bool{true, true, false}
	results, scores := make([]Result, 6), make([]int64, 6)

	from, done, again := g.Scatter(rowResults, rowScores, rowFrom, results, scores, 0, false, false)
	if done != 6 || again != nil {
		t.Errorf("done %d, again %v; want 6, none", done, again)
	}
	for i, k := range g.Of {
		if results[i] != rowResults[k] || scores[i] != rowScores[k] || from[i] != rowFrom[k] {
			t.Errorf("node %d: %+v %d %v, want row %d's", i, results[i], scores[i], from[i], k)
		}
	}

	// A call that failed on row 1 answered row 0 only: the first node
	// without an answer is node 1, whatever came after it.
	results = make([]Result, 6)
	_, done, again = g.Scatter(rowResults, rowScores, rowFrom, results, scores, 1, true, false)
	if done != 1 || again != nil || results[0] != rowResults[0] {
		t.Errorf("failed at row 1: done %d, again %v, node 0 %+v; want 1, none, row 0's", done, again, results[0])
	}

	// An unkeyable guest answered for the nodes it was called with, and
	// the others are to be evaluated on their own.
	results = make([]Result, 6)
	_, done, again = g.Scatter(rowResults, rowScores, rowFrom, results, scores, 0, false, true)
	if done != 6 || !reflect.DeepEqual(again, []int{2, 4, 5}) {
		t.Errorf("unkeyable: done %d, again %v; want 6, [2 4 5]", done, again)
	}
	if results[3] != rowResults[2] || results[2] != (Result{}) {
		t.Errorf("unkeyable: node 3 %+v (want row 2's), node 2 %+v (want none)", results[3], results[2])
	}

	// Unkeyable and failed at row 2: node 2 shares row 0 and has no answer
	// of its own, so the answers end there.
	_, done, _ = g.Scatter(rowResults, rowScores, rowFrom, make([]Result, 6), scores, 2, true, true)
	if done != 2 {
		t.Errorf("unkeyable, failed at row 2: done %d, want 2", done)
	}
}

// Reset forgets the last batch, and Release the nodes it held.
func TestRowGroupsReset(t *testing.T) {
	g := groupsOf("a", "a")
	g.Release()
	if len(g.Nodes) != 0 || len(g.rows) != 0 {
		t.Fatalf("released groups hold %d nodes, %d rows", len(g.Nodes), len(g.rows))
	}
	g.reset(1)
	g.add(nodeInfo("x", nil), []byte("a"))
	if len(g.Nodes) != 1 || !reflect.DeepEqual(g.Of, []int32{0}) {
		t.Fatalf("after reset: %d nodes, of %v", len(g.Nodes), g.Of)
	}
	var none *RowGroups
	none.reset(3) // a nil RowGroups is "no grouping"
}
