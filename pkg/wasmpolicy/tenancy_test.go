package wasmpolicy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/google/go-cmp/cmp"

	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
)

// A namespace's policies that are slow but valid (they never fail, so no
// quarantine or breaker stops them) spend the namespace's share of
// scheduling time, and then its pods wait, turned away at PreFilter and
// held at PreEnqueue without a guest call, while another namespace's pods
// go on; once the share has refilled, the namespace's pods are admitted
// again. The adversary guest's "slow" attack spends about a millisecond
// per node and passes.
func TestSlowNamespacedPolicyWaitsForItsShare(t *testing.T) {
	ctx := context.Background()
	pc := configv1.DefaultPolicy("team-x/slow", config.Source{File: testguests.Policy(t, testguests.TinyGo, "testdata/adversary")})
	pc.Timeout, pc.CycleBudget = 5*time.Second, 10*time.Second // never a failure, even under -race
	pc.Scope.Namespace = "team-x"
	pc.VerdictReuse = config.VerdictReuseDisabled // every node a call
	args := configv1.DefaultArgs(pc)
	args.CompilationCacheDir = sharedCacheDir
	w, err := NewWithArgs(ctx, args, nil, WithInitialLoadTimeout(3*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var nodes []fwk.NodeInfo
	for i := 0; i < 200; i++ {
		ni := intree.NewNodeInfo()
		ni.SetNode(node(fmt.Sprintf("n%d", i), nil, 4000))
		nodes = append(nodes, ni)
	}
	slowPod := func(ns, name string) *v1.Pod {
		p := pod(name, map[string]string{"attack": "slow"}, 10)
		p.Namespace = ns
		return p
	}
	cycle := func(p *v1.Pod) *fwk.Status {
		state := intree.NewCycleState()
		if _, st := w.PreFilter(ctx, state, p, nodes); st.IsSkip() {
			return nil // no policy of the pod's filters it
		} else if !st.IsSuccess() {
			return st
		}
		for _, ni := range nodes {
			if st := w.Filter(ctx, state, p, ni); !st.IsSuccess() {
				t.Fatalf("%s: Filter on %s: %v", p.Name, ni.Node().Name, st)
			}
		}
		return nil
	}
	// The default share is 5% over a second: 50ms, refilled at 50ms a
	// second. Each cycle of the slow policy here costs milliseconds, so
	// the namespace has spent its share after a few dozen.
	var held *fwk.Status
	n := 0
	for start := time.Now(); time.Since(start) < time.Minute && held == nil; n++ {
		held = cycle(slowPod("team-x", fmt.Sprintf("x%d", n)))
	}
	if held == nil {
		t.Fatalf("team-x's pods were never held after %d slow cycles (%s charged)", n, w.shares.of("team-x").spentCycle())
	}
	t.Logf("team-x held after %d cycles, %s charged", n, w.shares.of("team-x").spentCycle())
	want := []string{"namespace team-x's policies used their share of scheduling time (5%)", "its pods wait", "other namespaces' pods go on", "policyObjects.tenants.default.schedulingTimePercent"}
	for _, part := range want {
		if !strings.Contains(held.Message(), part) {
			t.Errorf("held after %d cycles with %v, want %q", n, held, part)
		}
	}
	if held.Code() != fwk.UnschedulableAndUnresolvable {
		t.Errorf("held with code %v, want UnschedulableAndUnresolvable (no preemption; retried when the share refills)", held.Code())
	}
	// Held at PreEnqueue too, without a call.
	before := w.shares.of("team-x").spentCycle()
	if st := w.PreEnqueue(ctx, slowPod("team-x", "gated")); st == nil || st.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), "share of scheduling time") {
		t.Errorf("PreEnqueue of a team-x pod while its share is used = %v", st)
	}
	// Another namespace's pods go on: the policy does not apply to them,
	// and nothing of team-x's share is theirs to wait for.
	if st := cycle(slowPod("team-y", "y0")); st != nil {
		t.Errorf("team-y's pod waited for team-x's share: %v", st)
	}
	if st := w.PreEnqueue(ctx, slowPod("team-y", "y1")); st != nil {
		t.Errorf("PreEnqueue of team-y's pod = %v", st)
	}
	if after := w.shares.of("team-x").spentCycle(); after != before {
		t.Errorf("team-x's share was charged %s while its pods were held", after-before)
	}
	// Once the share has refilled, team-x's pods are admitted again.
	wait, _ := w.shares.of("team-x").held(false)
	time.Sleep(wait + 10*time.Millisecond)
	if st := cycle(slowPod("team-x", "later")); st != nil {
		t.Errorf("team-x's pod after its share refilled (%s): %v", wait, st)
	}
}

// Held pods come back one at a time, at the pace the namespace's share
// pays for: with cycles of 20ms and a 10% share a pod costs 200ms of the
// share; with the bucket full (a second's credit), the first pods go on,
// then each waits behind those before it, keeps its turn when it asks
// again, and leaves the line when deleted.
func TestShareAdmitsAtItsPace(t *testing.T) {
	ten := configv1.DefaultTenants(0)
	ten.Default.SchedulingTimePercent = 10
	s := newTenantShares(&ten).of("team-x")
	for i := 0; i < 10; i++ {
		s.started()
		s.chargeCycle(20 * time.Millisecond)
	}
	s.cycle.balance = s.cycle.capacity // a full bucket
	now := time.Now()
	var waits []time.Duration
	for i := 0; i < 8; i++ {
		waits = append(waits, s.admit(pod(fmt.Sprintf("p%d", i), nil, 10), now).Round(10*time.Millisecond))
	}
	want := []time.Duration{0, 0, 0, 0, 0, 200 * time.Millisecond, 400 * time.Millisecond, 600 * time.Millisecond}
	if diff := cmp.Diff(want, waits); diff != "" {
		t.Fatalf("waits (-want +got):\n%s", diff)
	}
	// A held pod keeps its turn: asked again before it, the rest of its
	// wait; at it, it goes on.
	p6 := pod("p6", nil, 10)
	if d := s.admit(p6, now.Add(100*time.Millisecond)).Round(10 * time.Millisecond); d != 300*time.Millisecond {
		t.Errorf("p6 asked again 100ms later waits %s, want 300ms", d)
	}
	// A deleted pod leaves the line: the next pod waits less.
	s.forget(pod("p7", nil, 10).UID)
	if d := s.admit(pod("p8", nil, 10), now).Round(10 * time.Millisecond); d != 600*time.Millisecond {
		t.Errorf("the next pod after p7 left waits %s, want 600ms", d)
	}
	if d := s.admit(p6, now.Add(400*time.Millisecond)); d != 0 {
		t.Errorf("p6 at its turn waits %s", d)
	}
	// Cycles that start take pods out of the line.
	for i := 0; i < 6; i++ {
		s.started()
	}
	if n := len(s.admitted); n != 0 {
		t.Errorf("%d pods still in line after their cycles started", n)
	}
}
