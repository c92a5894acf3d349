package schedcycle

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/wasmsched/wasmsched/internal/framework"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
)

// narrow names n0..n2 at PreFilter, rejects n2 at Filter and scores every
// node alike.
type narrow struct{}

func (narrow) Name() string { return "Narrow" }
func (narrow) PreFilter(context.Context, fwk.CycleState, *v1.Pod, []fwk.NodeInfo) (*framework.PreFilterResult, *fwk.Status) {
	return &framework.PreFilterResult{NodeNames: sets.New("n0", "n1", "n2")}, nil
}
func (narrow) PreFilterExtensions() framework.PreFilterExtensions { return nil }
func (narrow) Filter(_ context.Context, _ fwk.CycleState, _ *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	if ni.Node().Name == "n2" {
		return fwk.NewStatus(fwk.Unschedulable, "n2 is full")
	}
	return nil
}
func (narrow) Score(context.Context, fwk.CycleState, *v1.Pod, fwk.NodeInfo) (int64, *fwk.Status) {
	return 10, nil
}
func (narrow) ScoreExtensions() framework.ScoreExtensions { return nil }

// Run applies the PreFilter result with kube-scheduler's wording, keeps
// the given node order, and reports every node tied at the best score.
func TestRun(t *testing.T) {
	ctx := context.Background()
	var nodes []*v1.Node
	for _, n := range []string{"n3", "n0", "n2", "n1"} {
		nodes = append(nodes, st.MakeNode().Name(n).Obj())
	}
	lister, list := Snapshot(nil, nodes)
	registry, profile := OnePlugin("Narrow", narrow{}, CyclePoints...)
	fw, err := New(ctx, registry, profile, lister)
	if err != nil {
		t.Fatal(err)
	}
	res := Run(ctx, fw, intree.NewCycleState(), st.MakePod().Name("p").UID("p").Obj(), list)
	type node struct {
		Name, Status string
		Score        int64
	}
	var got []node
	for _, n := range res.Nodes {
		g := node{Name: n.Name}
		if n.Status != nil {
			g.Status = n.Status.Code().String() + ": " + n.Status.Message()
		}
		if n.Score != nil {
			g.Score = *n.Score
		}
		got = append(got, g)
	}
	want := []node{
		{Name: "n3", Status: "UnschedulableAndUnresolvable: node(s) didn't satisfy plugin(s) [Narrow]"},
		{Name: "n0", Score: 10},
		{Name: "n2", Status: "Unschedulable: n2 is full"},
		{Name: "n1", Score: 10},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"n0", "n1"}, res.Best); diff != "" || res.Feasible() != 2 || res.Err != nil || res.PreFilter != nil {
		t.Errorf("best (-want +got):\n%s\nfeasible %d, err %v, prefilter %v", diff, res.Feasible(), res.Err, res.PreFilter)
	}
}
