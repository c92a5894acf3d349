//go:build !k8s_1_34 && !k8s_1_35 && !k8s_1_36

package wasmpolicy

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

// gangPod is a member of gang name with min-count min.
func gangPod(name, gang, min string) *v1.Pod {
	return pod(name, map[string]string{"gang.wasmsched.io/name": gang, "gang.wasmsched.io/min-count": min}, 100)
}

// permitCluster runs the gang example (both toolchains) with config.
func permitCluster(t *testing.T, tc testguests.Toolchain, cfg string) *cluster {
	return newCluster(t, &config.WasmPolicyArgs{Policies: []config.Policy{
		{Name: "gang", Source: config.Source{File: testguests.Policy(t, tc, "gang")}, PolicySettings: config.PolicySettings{Config: cfg}},
	}}, []*v1.Node{node("n1", nil, 4000), node("n2", nil, 4000)})
}

// placeThrough runs PreFilter, Reserve and Permit of pod on node as a
// scheduling cycle does, and makes the pod wait when Permit says so.
func placeThrough(t *testing.T, c *cluster, p *v1.Pod, node string) (fwk.CycleState, *fwk.Status) {
	t.Helper()
	ctx, s := context.Background(), intree.NewCycleState()
	if _, st, _ := c.fw.RunPreFilterPlugins(ctx, s, p); !st.IsSuccess() {
		return s, st
	}
	if st := c.fw.RunReservePluginsReserve(ctx, s, p, node); !st.IsSuccess() {
		return s, st
	}
	waits, st := c.fw.RunPermitPlugins(ctx, s, p, node)
	if st.IsWait() {
		c.fw.AddWaitingPod(p, waits)
	}
	return s, st
}

// The gang example holds a member at Permit until the gang's min-count is
// reserved, then the last member's Permit allows the waiting ones.
func TestPermitHoldsAGang(t *testing.T) {
	for _, tc := range testguests.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			c := permitCluster(t, tc, "timeout=30s")
			m1, m2 := gangPod("m1", "train", "2"), gangPod("m2", "train", "2")
			if _, st := placeThrough(t, c, m1, "n1"); !st.IsWait() || !strings.Contains(st.Message(), "WasmPolicy/gang: gang train: 1 of 2 members reserved") {
				t.Fatalf("m1: %v, want it to wait naming the gang and the count", st)
			}
			done := make(chan *fwk.Status, 1)
			go func() { done <- c.fw.WaitOnPermit(context.Background(), m1) }()
			if _, st := placeThrough(t, c, m2, "n2"); !st.IsSuccess() {
				t.Fatalf("m2 completes the gang: %v", st)
			}
			select {
			case st := <-done:
				if !st.IsSuccess() {
					t.Fatalf("m1 after m2 completed the gang: %v", st)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("m1 still waits after m2 completed the gang")
			}
			if got := c.plugin.Counters("gang").Counts(); !maps.Equal(got, map[string]int64{"default/train": 2}) {
				t.Fatalf("counts %v, want both members", got)
			}
		})
	}
}

// A gang whose members never all arrive: its waiting member is rejected
// at the Permit timeout, and once kube-scheduler undoes the placement
// (Unreserve) nothing is left reserved or waiting.
func TestPermitTimeoutLeavesNothingReserved(t *testing.T) {
	c := permitCluster(t, testguests.TinyGo, "timeout=1s")
	m1 := gangPod("m1", "train", "3")
	s, st := placeThrough(t, c, m1, "n1")
	if !st.IsWait() {
		t.Fatalf("m1: %v, want Wait", st)
	}
	start := time.Now()
	st = c.fw.WaitOnPermit(context.Background(), m1)
	if st.IsSuccess() || !strings.Contains(st.Message(), "timeout") {
		t.Fatalf("m1 after its timeout: %v, want a rejection for the timeout", st)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("the 1s timeout took %s", d)
	}
	c.fw.RunReservePluginsUnreserve(context.Background(), s, m1, "n1")
	if got := c.plugin.Counters("gang").Counts(); len(got) != 0 {
		t.Fatalf("counts after the timeout %v, want none", got)
	}
	c.plugin.waiting.mu.Lock()
	n := len(c.plugin.waiting.m)
	c.plugin.waiting.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d pods left waiting", n)
	}
}

// A permit asking to wait past the policy's maxPermitWait is the policy's
// error, naming the policy, the point and the fix; under failurePolicy
// Fail the placement is refused.
func TestPermitWaitPastTheMaximum(t *testing.T) {
	c := permitCluster(t, testguests.TinyGo, "timeout=5m")
	_, st := placeThrough(t, c, gangPod("m1", "train", "3"), "n1")
	want := `WasmPolicy/gang: permit asked to wait 5m0s, more than policies[].maxPermitWait (1m0s) of policy "gang" allows: wait less, or raise maxPermitWait (at most 15m); the placement is undone and the pod will be retried (failurePolicy Fail)`
	if st.IsSuccess() || st.IsWait() || !strings.Contains(st.Message(), want) {
		t.Fatalf("status %v, want %q", st, want)
	}
}

// A team's namespaced policy lists and frees only the pods waiting at it:
// team-b's permit cannot allow team-a's waiting pod, and an allow of a pod
// not waiting at the policy changes nothing.
func TestPermitStaysInItsNamespace(t *testing.T) {
	ep, err := testguests.Build(testguests.TinyGo, "plugins-wasm/testdata/extension-points")
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, &config.WasmPolicyArgs{Policies: []config.Policy{
		{Name: "team-a-policy", Source: config.Source{File: ep}, Scope: config.Scope{Namespace: "team-a"}},
		{Name: "team-b-policy", Source: config.Source{File: ep}, Scope: config.Scope{Namespace: "team-b"}},
	}}, []*v1.Node{node("n1", map[string]string{"zone": "z"}, 4000)})
	a := pod("a", map[string]string{"permit": "wait"}, 100)
	a.Namespace = "team-a"
	b := pod("b", map[string]string{"permit": "release"}, 100)
	b.Namespace = "team-b"
	if _, st := placeThrough(t, c, a, "n1"); !st.IsWait() {
		t.Fatalf("team-a's pod: %v, want Wait", st)
	}
	if _, st := placeThrough(t, c, b, "n1"); !st.IsSuccess() {
		t.Fatalf("team-b's pod: %v", st)
	}
	if c.fw.GetWaitingPod(a.UID) == nil {
		t.Fatal("team-b's permit freed team-a's waiting pod")
	}
	var teamB *policy
	for _, p := range c.plugin.current().all {
		if p.cfg.Name == "team-b-policy" {
			teamB = p
		}
	}
	if teamB == nil {
		t.Fatal("no team-b policy")
	}
	logs := &testguests.LogBuffer{}
	ctx := klog.NewContext(context.Background(), textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(logs))))
	wv := c.plugin.waitingAt(ctx, teamB, host.CallPermit)
	if wv.Allow(string(a.UID)) || wv.Reject(string(a.UID), "no") || len(wv.List(labels.Everything())) != 0 {
		t.Fatal("team-b's policy reached team-a's waiting pod")
	}
	// The guest sees -1; the operator reads why, and the fix.
	for _, want := range []string{`"Policy allowed a pod that is not waiting at it; nothing changed"`, `policy="team-b-policy"`, `extensionPoint="Permit"`, "allow or reject only the pods permit_waiting (sdk.WaitingPods) lists"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log %q lacks %q", logs.String(), want)
		}
	}
	if c.fw.GetWaitingPod(a.UID) == nil {
		t.Fatal("team-a's pod stopped waiting")
	}
	c.fw.GetWaitingPod(a.UID).Reject("test", "done")
}
