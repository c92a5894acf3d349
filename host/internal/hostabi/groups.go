package hostabi

import (
	"unsafe"

	fwk "k8s.io/kube-scheduler/framework"
)

// RowGroups are a batch's nodes grouped by their node-table rows, for a
// policy whose verdict is a function of what it read (docs/abi.md §3.4):
// nodes of one pool differ in their names, not in the columns a policy
// reads, so one evaluation of a row answers for every node with it.
type RowGroups struct {
	// Of[i] is node i's row: the index in Nodes of the first node whose
	// row equals node i's.
	Of []int32
	// Nodes are the nodes whose rows the table holds, in row order.
	Nodes []fwk.NodeInfo
	// rows maps a row's bytes to its index. The keys alias the cached
	// rows, which are replaced, never changed (tableLayout.row).
	rows map[string]int32
}

// reset empties g for a batch of n nodes (nothing for a nil g).
func (g *RowGroups) reset(n int) {
	if g == nil {
		return
	}
	g.Of, g.Nodes = g.Of[:0], g.Nodes[:0]
	if g.rows == nil {
		g.rows = make(map[string]int32, n)
	} else {
		clear(g.rows)
	}
}

// add records ni's row cols and reports whether it is new (the table
// needs it).
func (g *RowGroups) add(ni fwk.NodeInfo, cols []byte) bool {
	key := unsafe.String(unsafe.SliceData(cols), len(cols))
	if k, ok := g.rows[key]; ok {
		g.Of = append(g.Of, k)
		return false
	}
	k := int32(len(g.Nodes))
	g.rows[key] = k
	g.Of = append(g.Of, k)
	g.Nodes = append(g.Nodes, ni)
	return true
}

// Scatter gives each node its row's verdict: results[i] (and scores[i],
// fromTable[i]) from the row's entry in rowResults (rowScores, rowFrom),
// which the guest filled for the rows. A failed call (failed, at row
// rowDone) answered only the rows before rowDone: done is the first node
// without an answer. An unkeyable guest's verdict holds only for the node
// it was evaluated with: the other nodes of each row get none, and are
// returned in again (in order) to be evaluated on their own.
func (g *RowGroups) Scatter(rowResults []Result, rowScores []int64, rowFrom []bool, results []Result, scores []int64, rowDone int, failed, unkeyable bool) (fromTable []bool, done int, again []int) {
	if rowFrom != nil {
		fromTable = make([]bool, len(g.Of))
	}
	done = len(g.Of)
	next := int32(0) // the next new row: rows are numbered in order of first use
	for i, k := range g.Of {
		first := k == next
		if first {
			next++
		}
		if failed && int(k) >= rowDone || !first && unkeyable {
			if failed {
				done = min(done, i)
			} else {
				again = append(again, i)
			}
			continue
		}
		results[i] = rowResults[k]
		if scores != nil {
			scores[i] = rowScores[k]
		}
		if fromTable != nil {
			fromTable[i] = rowFrom[k]
		}
	}
	return fromTable, done, again
}

// Release forgets the nodes, so a pooled instance keeps none alive.
func (g *RowGroups) Release() {
	clear(g.Nodes)
	g.Nodes = g.Nodes[:0]
	clear(g.rows)
}
