package host

import (
	"context"
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

// A namespaced policy (a team's) granted every read learns nothing about
// another namespace's pods but counts: the snoop guest, which spells out
// what it read in its reason (the one channel back to the team), is run
// as the operator's policy, which sees everything, and as team-x's,
// which must see only its own namespace's pods, and no other namespace's
// labels or the node's addresses. Both toolchains.
func TestNamespacedPolicyReadsStayInItsNamespace(t *testing.T) {
	own := func(name string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-x", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"app": "web"}}}
	}
	victim := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-y", Name: "payroll-db-0", UID: "uid-payroll",
			Labels:          map[string]string{"secret": "yes", "customer": "acquisition-target"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "payroll-db", UID: "uid-sts"}}},
		Spec: v1.PodSpec{Affinity: &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{{Weight: 7, PodAffinityTerm: v1.PodAffinityTerm{
				LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				NamespaceSelector: &metav1.LabelSelector{}, TopologyKey: "zone"}}}}}},
	}
	ni := intree.NewNodeInfo(own("web-0"), victim)
	ni.SetNode(&v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a"}},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4")},
			Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.1.2.3"}}},
	})
	nsLabels := map[string]map[string]string{"team-x": {"team": "x"}, "team-y": {"cost-center": "cc-4711", "project": "merger"}}
	for _, tc := range testguests.Toolchains {
		t.Run(string(tc), func(t *testing.T) {
			wasm := testguests.PolicyBytes(t, tc, "testdata/snoop")
			reason := func(tenant string) string {
				t.Helper()
				p := newPolicy(t, newEngine(t), PolicySpec{Name: "snoop", Config: "team-y", Reads: allScopes(), Tenant: tenant})
				v := load(t, p, wasm)
				ps := NewPodState(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-x", Name: "probe", Labels: map[string]string{"app": "web"}}})
				ps.Cluster = &ClusterView{Nodes: []fwk.NodeInfo{ni}, NamespaceLabels: func(name string) (map[string]string, bool) {
					l, ok := nsLabels[name]
					return l, ok
				}}
				_, r, err := v.Call(context.Background(), CallFilter, ps, ni, new(PolicyCycle), nil)
				if err != nil {
					t.Fatalf("filter: %v", err)
				}
				return r.Reason
			}
			operator := reason("")
			for _, want := range []string{"pod=team-y/payroll-db-0/uid-payroll", "secret=yes", "owner=payroll-db", "theirs=1", "every=2", "term=zone=a:7", "ns:cost-center=cc-4711", "addr=10.1.2.3"} {
				if !strings.Contains(operator, want) {
					t.Errorf("the operator's policy did not read %q (the test would prove nothing): %s", want, operator)
				}
			}
			team := reason("team-x")
			for _, leak := range []string{"team-y", "payroll", "secret", "acquisition", "customer", "StatefulSet", "cost-center", "cc-4711", "merger", "10.1.2.3", "term=", "theirs=1", "every=2"} {
				if strings.Contains(team, leak) {
					t.Errorf("team-x's policy learned %q of another namespace: %s", leak, team)
				}
			}
			// Its own namespace's pods it sees in full, and counts.
			for _, want := range []string{"pod=team-x/web-0/uid-web-0,app=web", "every=1", "theirs=0"} {
				if !strings.Contains(team, want) {
					t.Errorf("team-x's policy did not read its own %q: %s", want, team)
				}
			}
		})
	}
}

// A namespace's policies are charged to its slice of the memory budget as
// well as to the whole: a team can fail only its own loads and calls. Its
// module that does not fit its slice is refused naming the slice, however
// much room the budget has; its calls never close another namespace's or
// the operator's idle instances (a hog's second instance fails its own
// call instead); and the operator's policies and other namespaces' load
// and serve next to it.
func TestNamespaceMemorySlice(t *testing.T) {
	e, err := NewEngine(EngineOptions{CacheDir: t.TempDir(), MemoryBudget: 512 << 20, TenantMemoryBudget: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	ctx := context.Background()
	tiny := testguests.PolicyBytes(t, testguests.TinyGo, "spread")
	ops := load(t, newPolicy(t, e, PolicySpec{Name: "ops"}), tiny)
	teamY := load(t, newPolicy(t, e, PolicySpec{Name: "team-y/p", Tenant: "team-y", TenantMemoryBudget: 64 << 20}), tiny)
	serves(t, ops)
	serves(t, teamY)

	// A Go module (several MiB of machine code) does not fit a 4 MiB slice.
	hog := newPolicy(t, e, PolicySpec{Name: "team-x/hog", Tenant: "team-x", TenantMemoryBudget: 4 << 20})
	_, err = hog.Load(ctx, testguests.PolicyBytes(t, testguests.Go, "spread"), "")
	var le *LoadError
	if !errors.As(err, &le) || le.Reason != "MemoryBudget" {
		t.Fatalf("team-x's Go module in a 4Mi slice: %v, want a MemoryBudget refusal", err)
	}
	for _, want := range []string{"namespace team-x's share of the memory budget (4.0 MiB)", "policyObjects.tenants"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q lacks %q", err, want)
		}
	}
	if u := e.MemoryBudget(); u.Used() > 64<<20 {
		t.Errorf("the budget holds %s after the refusal", mib(u.Used()))
	}

	// A slice with room for one TinyGo instance and a half: the first
	// call's instance fits, a second one at once does not, and it is
	// team-x's call that fails, not ops' or team-y's idle instances that
	// close.
	small := load(t, newPolicy(t, e, PolicySpec{Name: "team-x/small", Tenant: "team-x", TenantMemoryBudget: 1 << 40}), tiny)
	a := small.p.acct
	a.limit.Store(a.used() + small.instCost/2)
	in1, err := small.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = small.acquire(ctx)
	if err == nil || !strings.Contains(err.Error(), "namespace team-x's share of the memory budget") {
		t.Errorf("a second instance past team-x's slice: %v, want the slice's refusal", err)
	}
	small.release(in1, true)
	for _, v := range []*Version{ops, teamY} {
		if live, _ := v.PoolStats(); live != 1 {
			t.Errorf("%s holds %d instances after team-x's calls, want its idle one kept", v.p.name, live)
		}
	}
	if ev := e.MemoryBudget().Evictions; ev != 0 {
		t.Errorf("%d instances of others closed for team-x", ev)
	}
	serves(t, ops)
	serves(t, teamY)
	// The operator's policy loads a Go module beside the full slice.
	serves(t, load(t, newPolicy(t, e, PolicySpec{Name: "ops-go"}), testguests.PolicyBytes(t, testguests.Go, "spread")))

	// The tenants' pool full: another namespace's load is refused naming
	// the pool, without telling the team what the other teams hold.
	e.budget.tenants.limit.Store(e.budget.tenants.used() + 1<<20)
	w := newPolicy(t, e, PolicySpec{Name: "team-w/p", Tenant: "team-w", TenantMemoryBudget: 64 << 20})
	_, err = w.Load(ctx, testguests.PolicyBytes(t, testguests.Go, "spread"), "")
	if err == nil || !strings.Contains(err.Error(), "the namespaced policies' share of the memory budget (") || strings.Contains(err.Error(), "modules hold") {
		t.Errorf("team-w's load into a full pool: %v", err)
	}
	serves(t, teamY)
}
