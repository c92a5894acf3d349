//go:build !k8s_1_34 && !k8s_1_35

package wasmpolicy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	intree "k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

// podGroupState is a CycleState as a pod-group cycle gives each member
// (kube-scheduler's initPodSchedulingContext).
func podGroupState() *intree.CycleState {
	s := intree.NewCycleState()
	s.SetPodGroupSchedulingCycle(intree.NewCycleState())
	return s
}

// filterAll runs PreFilter and Filter of pod on every node of the
// snapshot, as a member's cycle does.
func filterAll(t *testing.T, c *cluster, state fwk.CycleState, pod *v1.Pod) map[string]*fwk.Status {
	t.Helper()
	ctx := context.Background()
	if _, st, _ := c.fw.RunPreFilterPlugins(ctx, state, pod); !st.IsSuccess() {
		t.Fatalf("PreFilter: %v", st)
	}
	infos, err := c.snapshot.NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*fwk.Status{}
	for _, ni := range infos {
		out[ni.Node().Name] = c.fw.RunFilterPlugins(ctx, state, pod, ni)
	}
	return out
}

// TestPodGroupMembersSeeTheirSiblings drives a pod-group cycle the way
// kube-scheduler does (schedule_one_podgroup.go): member one is filtered,
// placed into the snapshot (Snapshot.AssumePod, which puts the node's
// generation back) and reserved; member two is filtered against the
// snapshot that now holds it; the placement is undone (Unreserve, then
// ForgetPod). team-pod-cap at one pod per team and node must reject the
// node that holds member one, and take it again once member one is gone.
func TestPodGroupMembersSeeTheirSiblings(t *testing.T) {
	for _, tc := range testguests.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			nodes := []*v1.Node{node("n1", nil, 4000), node("n2", nil, 4000)}
			capPolicy := testguests.Policy(t, tc, "team-pod-cap")
			c := newCluster(t, &config.WasmPolicyArgs{Policies: []config.Policy{
				{Name: "cap", Source: config.Source{File: capPolicy}, PolicySettings: config.PolicySettings{Config: "max=1", Reads: []string{"NodePods"}}},
			}}, nodes)
			ctx := context.Background()
			m1 := pod("m1", map[string]string{"team": "a"}, 100)
			m2 := pod("m2", map[string]string{"team": "a"}, 100)

			s1 := podGroupState()
			if got := filterAll(t, c, s1, m1); !got["n1"].IsSuccess() || !got["n2"].IsSuccess() {
				t.Fatalf("member one: %v, want both nodes", got)
			}
			m1.Spec.NodeName = "n1"
			if err := c.snapshot.AssumePod(mustPodInfo(t, m1)); err != nil {
				t.Fatal(err)
			}
			if st := c.fw.RunReservePluginsReserve(ctx, s1, m1, "n1"); !st.IsSuccess() {
				t.Fatal(st)
			}
			got := filterAll(t, c, podGroupState(), m2)
			if got["n1"].IsSuccess() || !strings.Contains(got["n1"].Message(), "node already runs 1 pods of team a") {
				t.Errorf("member two on n1, which holds member one: %v, want team-pod-cap's rejection", got["n1"])
			}
			if !got["n2"].IsSuccess() {
				t.Errorf("member two on n2: %v, want success", got["n2"])
			}
			// The framework filters a node with nominated pods through a
			// copy of its NodeInfo (NodeInfo.Snapshot): the copy holds
			// member one too.
			n1, err := c.snapshot.NodeInfos().Get("n1")
			if err != nil {
				t.Fatal(err)
			}
			s2 := podGroupState()
			if _, st, _ := c.fw.RunPreFilterPlugins(ctx, s2, m2); !st.IsSuccess() {
				t.Fatal(st)
			}
			if st := c.fw.RunFilterPlugins(ctx, s2, m2, n1.Snapshot()); st.IsSuccess() {
				t.Errorf("member two on a copy of n1: success, want team-pod-cap's rejection")
			}

			c.fw.RunReservePluginsUnreserve(ctx, s1, m1, "n1")
			if err := c.snapshot.ForgetPod(klogger(t), m1); err != nil {
				t.Fatal(err)
			}
			if n, _ := host.AssumedMarks(); n != 0 {
				t.Errorf("%d node marks left after the placement was undone", n)
			}
			if got := filterAll(t, c, podGroupState(), m2); !got["n1"].IsSuccess() {
				t.Errorf("member two on n1 after member one was taken out: %v, want success", got["n1"])
			}
		})
	}
}

// TestPodGroupSpreadCountsSiblings is the same cycle with the
// PodTopologySpread port, whose counts across nodes (count_pods) are kept
// per node and generation: at maxSkew 1 over hostnames, member two must
// not go where member one was placed.
func TestPodGroupSpreadCountsSiblings(t *testing.T) {
	for _, tc := range testguests.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			host1, host2 := node("n1", map[string]string{v1.LabelHostname: "n1"}, 4000), node("n2", map[string]string{v1.LabelHostname: "n2"}, 4000)
			spread := testguests.Policy(t, tc, "ports/podtopologyspread")
			c := newCluster(t, &config.WasmPolicyArgs{Policies: []config.Policy{
				{Name: "spread", Source: config.Source{File: spread}, PolicySettings: config.PolicySettings{Reads: []string{"Cluster"}}},
			}}, []*v1.Node{host1, host2})
			ctx := context.Background()
			member := func(name string) *v1.Pod {
				p := pod(name, map[string]string{"app": "g"}, 100)
				p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{
					MaxSkew: 1, TopologyKey: v1.LabelHostname, WhenUnsatisfiable: v1.DoNotSchedule,
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "g"}},
				}}
				return p
			}
			m1, m2 := member("m1"), member("m2")
			s1 := podGroupState()
			if got := filterAll(t, c, s1, m1); !got["n1"].IsSuccess() || !got["n2"].IsSuccess() {
				t.Fatalf("member one: %v, want both nodes", got)
			}
			m1.Spec.NodeName = "n1"
			if err := c.snapshot.AssumePod(mustPodInfo(t, m1)); err != nil {
				t.Fatal(err)
			}
			if st := c.fw.RunReservePluginsReserve(ctx, s1, m1, "n1"); !st.IsSuccess() {
				t.Fatal(st)
			}
			got := filterAll(t, c, podGroupState(), m2)
			if got["n1"].IsSuccess() || !got["n2"].IsSuccess() {
				t.Errorf("member two: n1 %v, n2 %v; want n1 rejected (it holds member one, skew 2) and n2 taken", got["n1"], got["n2"])
			}
			c.fw.RunReservePluginsUnreserve(ctx, s1, m1, "n1")
			if err := c.snapshot.ForgetPod(klogger(t), m1); err != nil {
				t.Fatal(err)
			}
			if got := filterAll(t, c, podGroupState(), m2); !got["n1"].IsSuccess() {
				t.Errorf("member two on n1 after member one was taken out: %v, want success", got["n1"])
			}
		})
	}
}

// TestPodGroupAuditOnlyForStandingPlacements: an audited policy's Event
// names a placement only at the Reserve of the placement that stands, not
// at a pod-group cycle's trial Reserve.
func TestPodGroupAuditOnlyForStandingPlacements(t *testing.T) {
	nodes := []*v1.Node{node("a-1", map[string]string{"team": "a"}, 4000), node("b-1", map[string]string{"team": "b"}, 4000)}
	team := testguests.Policy(t, testguests.Go, "team-isolation")
	c := newCluster(t, &config.WasmPolicyArgs{Policies: []config.Policy{
		{Name: "audit-team", Source: config.Source{File: team}, PolicySettings: config.PolicySettings{Mode: config.ModeAudit}},
	}}, nodes)
	ctx := context.Background()
	p := pod("p", map[string]string{"team": "a"}, 100)
	state := podGroupState()
	filterAll(t, c, state, p)
	p.Spec.NodeName = "b-1"
	if err := c.snapshot.AssumePod(mustPodInfo(t, p)); err != nil {
		t.Fatal(err)
	}
	if st := c.fw.RunReservePluginsReserve(ctx, state, p, "b-1"); !st.IsSuccess() {
		t.Fatal(st)
	}
	c.fw.RunReservePluginsUnreserve(ctx, state, p, "b-1")
	if err := c.snapshot.ForgetPod(klogger(t), p); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-c.recorder.Events:
		t.Fatalf("an Event for a trial placement that was undone: %s", e)
	case <-time.After(200 * time.Millisecond):
	}
	// The placement that stands: kube-scheduler clears the pod-group mark
	// on the member's CycleState and reserves again.
	state.SetPodGroupSchedulingCycle(nil)
	if st := c.fw.RunReservePluginsReserve(ctx, state, p, "b-1"); !st.IsSuccess() {
		t.Fatal(st)
	}
	select {
	case e := <-c.recorder.Events:
		if !strings.Contains(e, "would have rejected the chosen node b-1") {
			t.Errorf("event %q", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no WasmPolicyAudit event for the placement that stands")
	}
}

// TestPodGroupNeedsReserve: a profile that runs WasmPolicy at Filter but
// not at Reserve cannot see a group's placed members; its pod-group
// cycles are refused with the fix named, and other cycles go on.
func TestPodGroupNeedsReserve(t *testing.T) {
	nodes := []*v1.Node{node("n1", nil, 4000)}
	capPolicy := testguests.Policy(t, testguests.TinyGo, "team-pod-cap")
	c := newClusterNoReserve(t, &config.WasmPolicyArgs{Policies: []config.Policy{
		{Name: "cap", Source: config.Source{File: capPolicy}, PolicySettings: config.PolicySettings{Config: "max=1", Reads: []string{"NodePods"}}},
	}}, nodes)
	ctx := context.Background()
	p := pod("m1", map[string]string{"team": "a"}, 100)
	_, st, _ := c.fw.RunPreFilterPlugins(ctx, podGroupState(), p)
	if st.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), "enable it under multiPoint") {
		t.Errorf("pod-group cycle without Reserve: %v, want a refusal naming the fix", st)
	}
	if _, st, _ := c.fw.RunPreFilterPlugins(ctx, intree.NewCycleState(), p); !st.IsSuccess() {
		t.Errorf("a pod's own cycle: %v, want success", st)
	}
}

// newClusterNoReserve is newCluster whose profile leaves WasmPolicy out
// of Reserve.
func newClusterNoReserve(t *testing.T, args *config.WasmPolicyArgs, nodes []*v1.Node) *cluster {
	t.Helper()
	return newClusterProfile(t, args, nodes, nil, []Option{WithInitialLoadTimeout(3 * time.Minute)}, func(p *schedconfig.Plugins) {
		p.Reserve = schedconfig.PluginSet{}
	})
}

func mustPodInfo(t *testing.T, p *v1.Pod) *intree.PodInfo {
	t.Helper()
	pi, err := intree.NewPodInfo(p)
	if err != nil {
		t.Fatal(err)
	}
	return pi
}

func klogger(t *testing.T) klog.Logger { return ktesting.NewLogger(t, ktesting.NewConfig()) }

// TestPodGroupMembersShareKeys: every cycle of one pod-group cycle (each
// member, each placement) finds the same member record, in which a
// member's last cycle is the one the next cycle of the pod takes its keys
// from; another pod-group cycle and a plain cycle have none of it.
func TestPodGroupMembersShareKeys(t *testing.T) {
	group := intree.NewCycleState()
	member := func() *intree.CycleState {
		s := intree.NewCycleState()
		s.SetPodGroupSchedulingCycle(group)
		return s
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "m0", Namespace: "ns", UID: "u0"}}

	first := framework.PodGroupState(member())
	if first == nil {
		t.Fatal("a member's cycle has no pod-group state")
	}
	ps1 := host.NewPodState(pod)
	memberKeys(first).take(ps1)
	key := ps1.Key()

	again := memberKeys(framework.PodGroupState(member()))
	if again != memberKeys(first) {
		t.Fatal("two cycles of one pod-group cycle keep two member records")
	}
	ps2 := host.NewPodState(pod)
	again.take(ps2)
	if again.last[pod] != ps2 || ps2.Key() != key {
		t.Errorf("the pod's next cycle did not become its last one, or its key changed")
	}

	other := podGroupState()
	if memberKeys(framework.PodGroupState(other)) == again {
		t.Error("another pod-group cycle shares the member record")
	}
	if framework.PodGroupState(intree.NewCycleState()) != nil {
		t.Error("a plain cycle has a pod-group state")
	}
}

// TestPlacementBatchesItsNodes: a pod-group cycle trying a placement
// (topology-aware scheduling) gives PreFilter every node but filters and
// scores only the placement's. The Filter batches must be cut from the
// placement's nodes: cut from the whole list, each batch held the
// placement's nodes spread among others, and the guest answered for every
// node of every batch. The placement's nodes get the scores a plain cycle
// gives them.
func TestPlacementBatchesItsNodes(t *testing.T) {
	for _, tc := range testguests.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			var nodes []*v1.Node
			for i := range 40 {
				zone := "a"
				if i%2 == 1 {
					zone = "b"
				}
				nodes = append(nodes, node(fmt.Sprintf("n%02d", i), map[string]string{v1.LabelTopologyZone: zone, "team": "a"}, 2000+int64(i)*100))
			}
			c := newCluster(t, &config.WasmPolicyArgs{Policies: []config.Policy{
				{Name: "team", Source: config.Source{File: testguests.Policy(t, tc, "team-isolation")}},
				{Name: "packing", Source: config.Source{File: testguests.Policy(t, tc, "bin-packing")}, PolicySettings: config.PolicySettings{Config: "cpu=1,memory=1"}},
			}}, nodes)
			all, err := c.snapshot.NodeInfos().List()
			if err != nil {
				t.Fatal(err)
			}
			var inZone []fwk.NodeInfo
			for _, ni := range all {
				if ni.Node().Labels[v1.LabelTopologyZone] == "a" {
					inZone = append(inZone, ni)
				}
			}
			ctx := context.Background()
			p := pod("p", map[string]string{"team": "a"}, 100)
			// cycle runs PreFilter, Filter on the placement's nodes and Score on
			// those that pass, and returns the rows the team policy answered for
			// and WasmPolicy's scores.
			cycle := func(state fwk.CycleState) (int64, map[string]int64) {
				t.Helper()
				var before int64
				for _, pol := range c.plugin.current().all {
					if pol.cfg.Name == "team" {
						ev, sh, re := pol.runtime.RowStats()
						before = ev + sh + re
					}
				}
				if _, st, _ := c.fw.RunPreFilterPlugins(ctx, state, p); !st.IsSuccess() {
					t.Fatalf("PreFilter: %v", st)
				}
				for _, ni := range inZone {
					if st := c.fw.RunFilterPlugins(ctx, state, p, ni); !st.IsSuccess() {
						t.Fatalf("Filter on %s: %v, want success", ni.Node().Name, st)
					}
				}
				if st := c.fw.RunPreScorePlugins(ctx, state, p, inZone); !st.IsSuccess() && !st.IsSkip() {
					t.Fatalf("PreScore: %v", st)
				}
				ns, st := c.fw.RunScorePlugins(ctx, state, p, inZone)
				if !st.IsSuccess() {
					t.Fatalf("Score: %v", st)
				}
				scores := map[string]int64{}
				for _, n := range ns {
					for _, ps := range n.Scores {
						if ps.Name == Name {
							scores[n.Name] = ps.Score
						}
					}
				}
				var rows int64
				for _, pol := range c.plugin.current().all {
					if pol.cfg.Name == "team" {
						ev, sh, re := pol.runtime.RowStats()
						rows = ev + sh + re - before
					}
				}
				return rows, scores
			}

			_, plain := cycle(intree.NewCycleState())
			if distinct := len(slices.Compact(slices.Sorted(maps.Values(plain)))); distinct < 2 {
				t.Fatalf("a plain cycle's scores %v: want nodes that score apart", plain)
			}
			if err := c.snapshot.AssumePlacement(&fwk.Placement{Name: "zone-a", Nodes: inZone}); err != nil {
				t.Fatal(err)
			}
			defer c.snapshot.ForgetPlacement()
			rows, placed := cycle(podGroupState())
			if rows != int64(len(inZone)) {
				t.Errorf("the guest answered for %d nodes, want the placement's %d", rows, len(inZone))
			}
			if len(placed) != len(inZone) {
				t.Errorf("%d nodes scored, want the placement's %d", len(placed), len(inZone))
			}
			if diff := cmp.Diff(plain, placed); diff != "" {
				t.Errorf("scores in the placement differ from a plain cycle's (-plain +placement):\n%s", diff)
			}
		})
	}
}
