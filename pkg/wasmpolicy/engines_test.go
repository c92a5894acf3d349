// pkg/nodeinfo, the tools' NodeInfo, follows the main line only.

//go:build !k8s_1_34

package wasmpolicy

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
	"github.com/wasmsched/wasmsched/pkg/nodeinfo"
)

// Two scheduler profiles with different settings for a policy of the same
// name, and a tool (the CLI and policytest build NodeInfos with
// pkg/nodeinfo, whose generations are counted apart from the scheduler's),
// run in one process without seeing each other's state: each plugin has
// its own engine, whose node cache, interned strings, table layouts and
// memory budget are its own. The tool's node has the scheduler node's name
// and generation but other labels; a cache shared by name and generation
// would hand one the other's row.
func TestProfilesAndToolsDoNotShareState(t *testing.T) {
	path := testguests.Policy(t, testguests.TinyGo, "team-isolation")
	plugin := func(cfg string, instances int32, budget int64) *WasmPolicy {
		t.Helper()
		pc := configv1.DefaultPolicy("team", config.Source{File: path})
		pc.Config = cfg
		args := configv1.DefaultArgs(pc)
		args.CompilationCacheDir, args.FilePollInterval = t.TempDir(), time.Hour
		args.MaxInstancesPerPolicy, args.MemoryBudget = instances, budget
		w, err := NewWithArgs(context.Background(), args, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.Close() })
		return w
	}
	profileA := plugin("key=team", 2, 256<<20)
	profileB := plugin("key=zone", 4, 384<<20)
	tool := plugin("key=team", 1, 128<<20)
	if profileA.MemoryUse().Budget == profileB.MemoryUse().Budget || profileA.engine == profileB.engine || profileA.engine == tool.engine {
		t.Fatalf("the plugins share an engine or a budget: %+v %+v", profileA.MemoryUse(), profileB.MemoryUse())
	}

	node := func(team, zone string) *v1.Node {
		return st.MakeNode().Name("n1").Label("team", team).Label("zone", zone).Obj()
	}
	scheduled := func() fwk.NodeInfo { ni := intree.NewNodeInfo(); ni.SetNode(node("a", "z1")); return ni }
	cli := func() fwk.NodeInfo { return nodeinfo.New(node("b", "z2")) }
	// Same name, same generation, different labels.
	sched, other := scheduled(), cli()
	for sched.GetGeneration() != other.GetGeneration() {
		if sched.GetGeneration() < other.GetGeneration() {
			sched = scheduled()
		} else {
			other = cli()
		}
	}
	pod := st.MakePod().Name("p").Namespace("ns").UID("p").Labels(map[string]string{"team": "a", "zone": "z2"}).Obj()
	filter := func(w *WasmPolicy, ni fwk.NodeInfo) *fwk.Status {
		t.Helper()
		state := intree.NewCycleState()
		nodes := []fwk.NodeInfo{ni}
		if _, st := w.PreFilter(context.Background(), state, pod, nodes); !st.IsSuccess() {
			t.Fatalf("PreFilter: %v", st)
		}
		return w.Filter(context.Background(), state, pod, ni)
	}
	for round := 0; round < 2; round++ {
		if st := filter(profileA, sched); !st.IsSuccess() {
			t.Errorf("round %d, profile A (key=team, node team a): %v, want the pod admitted", round, st)
		}
		if st := filter(profileB, sched); st.IsSuccess() {
			t.Errorf("round %d, profile B (key=zone, node zone z1, pod zone z2): admitted, want rejected", round)
		}
		if st := filter(tool, other); st.IsSuccess() {
			t.Errorf("round %d, the tool's node (team b, same name and generation as the scheduler's): admitted, want rejected", round)
		}
	}
}
