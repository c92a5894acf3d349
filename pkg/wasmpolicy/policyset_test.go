package wasmpolicy

import (
	"context"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

var rejectAll guestFunc = func(string) (int64, host.Result, *host.CallError) {
	return 0, host.Result{Code: abi.CodeUnschedulable, Reason: "rejected"}, nil
}

func calls(m *fakeModule) int64 { return m.singleCalls.Load() + m.batchCalls.Load() }

// A policy whose scope does not take a pod is not part of the pod's cycle:
// it is never called, and the pod schedules as if it did not exist.
func TestScopeKeepsPoliciesOutOfTheCycle(t *testing.T) {
	newRejecting := func() *fakeModule {
		m := &fakeModule{}
		m.fns[host.CallFilter] = rejectAll
		return m
	}
	mods := map[string]*fakeModule{"by-pod": newRejecting(), "by-namespace": newRejecting(), "by-ns-labels": newRejecting(), "by-profile": newRejecting()}
	scopes := map[string]config.Scope{
		"by-pod":       {PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}},
		"by-namespace": {Namespace: "team-a"},
		"by-ns-labels": {NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}},
		"by-profile":   {Profiles: []string{"team-scheduler"}},
	}
	var policies []*policy
	for _, name := range []string{"by-pod", "by-namespace", "by-ns-labels", "by-profile"} {
		policies = append(policies, fakePolicy(name, mods[name], func(c *config.Policy) { c.Scope = scopes[name] }))
	}
	w := fakePlugin(policies...)
	w.nsLabels = func(ns string) (map[string]string, bool) {
		l, ok := map[string]map[string]string{"team-a": {"env": "prod"}, "default": {"env": "dev"}}[ns]
		return l, ok
	}
	nodes := fakeNodes(40)

	outside := st.MakePod().Name("p").Namespace("default").UID("p").Label("team", "b").SchedulerName("default-scheduler").Obj()
	if r := runCycleFor(w, outside, nodes); r.status != nil || !r.filters["n0"].IsSuccess() {
		t.Fatalf("a pod outside every scope was not scheduled freely: %v %v", r.status, r.filters["n0"])
	}
	for name, m := range mods {
		if n := calls(m); n != 0 {
			t.Errorf("%s was called %d times for a pod outside its scope", name, n)
		}
	}
	// Each scope brings its policy into the cycles of the pods it takes.
	for _, c := range []struct {
		pod  *v1.Pod
		want []string
	}{
		{st.MakePod().Name("a").Namespace("default").UID("a").Label("team", "a").SchedulerName("default-scheduler").Obj(), []string{"by-pod"}},
		{st.MakePod().Name("b").Namespace("team-a").UID("b").SchedulerName("default-scheduler").Obj(), []string{"by-namespace", "by-ns-labels"}},
		{st.MakePod().Name("c").Namespace("default").UID("c").SchedulerName("team-scheduler").Obj(), []string{"by-profile"}},
		{st.MakePod().Name("d").Namespace("unknown").UID("d").SchedulerName("default-scheduler").Obj(), nil},
	} {
		var got []string
		for _, p := range w.newCycle(c.pod, true).policies {
			got = append(got, p.cfg.Name)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("pod %s/%s runs %v, want %v", c.pod.Namespace, c.pod.Name, got, c.want)
		}
		r := runCycleFor(w, c.pod, nodes)
		if rejected := !r.filters["n0"].IsSuccess(); rejected != (len(c.want) > 0) {
			t.Errorf("pod %s/%s: rejected=%v by the rejecting policies %v in its scope", c.pod.Namespace, c.pod.Name, rejected, c.want)
		}
	}
}

// A cycle runs the policy set it started with: a policy published while it
// runs joins the next cycle, not this one.
func TestCycleKeepsItsPolicySet(t *testing.T) {
	first := &fakeModule{}
	first.fns[host.CallFilter] = succeed
	w := fakePlugin(fakePolicy("first", first, nil))
	late := &fakeModule{}
	late.fns[host.CallFilter] = rejectAll
	nodes := fakeNodes(4)
	ctx := context.Background()
	state := intree.NewCycleState()
	pod := fakePod()
	if _, st := w.PreFilter(ctx, state, pod, nodes); st != nil {
		t.Fatal(st)
	}
	w.setMu.Lock()
	w.publish([]*policy{fakePolicy("late", late, nil)})
	w.setMu.Unlock()
	for _, ni := range nodes {
		if st := w.Filter(ctx, state, pod, ni); !st.IsSuccess() {
			t.Fatalf("the cycle in flight ran the policy published after it started: %v", st)
		}
	}
	if calls(late) != 0 {
		t.Fatalf("late was called %d times by a cycle that started before it", calls(late))
	}
	if r := runCycle(w, nodes); r.filters["n0"].IsSuccess() {
		t.Fatal("the next cycle did not run the published policy")
	}
}
