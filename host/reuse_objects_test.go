package host

import (
	"fmt"
	"math/rand"
	"sync/atomic"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

// gateObject is the one object the objectgate test guest reads,
// default/gate with spec.team, changed by set as a watch would see it.
type gateObject struct {
	team atomic.Pointer[string]
	gen  atomic.Uint64
}

func (g *gateObject) set(team string) {
	g.team.Store(&team)
	g.gen.Add(1)
}

func (g *gateObject) Get(ns, name string) ([]string, bool) {
	t := g.team.Load()
	if t == nil || ns != "default" || name != "gate" {
		return nil, false
	}
	return []string{*t}, true
}

func (g *gateObject) List(string, labels.Selector) ([]model.Object, error) { return nil, nil }
func (g *gateObject) Gen() uint64                                          { return g.gen.Load() }

// Verdict reuse on and off give the same verdicts while the objects a
// policy reads change at random: the objectgate guest's verdict follows
// an object (which team's nodes it admits) and a node label, so the host
// shares it between nodes with equal rows and remembers it across cycles,
// keyed on the object's kind changing. Random steps change the object,
// relabel nodes and bring new pods; every cycle's batches agree with a
// policy that evaluates every node.
func TestRememberedVerdictsFollowTheObjects(t *testing.T) {
	rng := rand.New(rand.NewSource(68))
	nodes := poolNodes(rng, 64)
	e := newEngine(t)
	for _, tc := range testguests.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			wasm := testguests.PolicyBytes(t, tc, "testdata/objectgate")
			gate := &gateObject{}
			gate.set("a")
			on := load(t, newPolicy(t, e, PolicySpec{Name: "objectgate", MaxInstances: 2}), wasm)
			off := load(t, newPolicy(t, e, PolicySpec{Name: "objectgate", MaxInstances: 2, NoReuse: true}), wasm)
			on.p.SetObjects([]ObjectReader{gate})
			off.p.SetObjects([]ObjectReader{gate})
			changes := 0
			for step := 0; step < 60; step++ {
				switch rng.Intn(4) {
				case 0:
					gate.set([]string{"a", "b", "c", "nobody"}[rng.Intn(4)])
					changes++
				case 1:
					i := rng.Intn(len(nodes))
					n := nodes[i].Node().DeepCopy()
					if n.Labels == nil {
						n.Labels = map[string]string{}
					}
					n.Labels["team"] = []string{"a", "b", "c"}[rng.Intn(3)]
					nodes[i] = nodeInfoOf(n)
				}
				pod := st.MakePod().Namespace("default").Name(fmt.Sprint("p-", step)).UID(fmt.Sprint("p-", step)).Obj()
				gotR, _ := runBatches(t, on, CallFilter, pod, nodes)
				wantR, _ := runBatches(t, off, CallFilter, pod, nodes)
				admitted := 0
				for k := range wantR {
					if gotR[k] != wantR[k] {
						t.Fatalf("step %d, node %s (team %s), gate %s: reused %+v, evaluated %+v", step, nodes[k].Node().Name, nodes[k].Node().Labels["team"], *gate.team.Load(), gotR[k], wantR[k])
					}
					if wantR[k].Code == abi.CodeSuccess {
						admitted++
					}
				}
				if step == 0 && admitted == 0 {
					t.Fatal("the gate admits no node: the test needs some")
				}
			}
			evaluated, shared, remembered := on.p.RowStats()
			t.Logf("%d object changes; reuse on: evaluated %d, shared %d, remembered %d", changes, evaluated, shared, remembered)
			if remembered == 0 {
				t.Error("no verdict was remembered across cycles: the object read is not keyed, only refused")
			}
		})
	}
}

// nodeInfoOf is a NodeInfo of n with no pods (a new generation).
func nodeInfoOf(n *v1.Node) fwk.NodeInfo {
	ni := intree.NewNodeInfo()
	ni.SetNode(n)
	return ni
}
