package wasmpolicy

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics/testutil"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

// An audited policy runs but never filters or scores; what it would have
// done is reported as an Event on the pod, a log line and a metric.
func TestAuditMode(t *testing.T) {
	nodes := []*v1.Node{
		node("a-1", map[string]string{"team": "a"}, 4000),
		node("b-1", map[string]string{"team": "b"}, 4000),
	}
	team := testguests.Policy(t, testguests.TinyGo, "team-isolation")
	packing := testguests.Policy(t, testguests.TinyGo, "bin-packing")
	c := newClusterWithPods(t, &config.WasmPolicyArgs{Policies: []config.Policy{
		{Name: "audit-team", Source: config.Source{File: team}, PolicySettings: config.PolicySettings{Mode: config.ModeAudit}},
		{Name: "audit-packing", Source: config.Source{File: packing}, PolicySettings: config.PolicySettings{Mode: config.ModeAudit}},
	}}, nodes, []*v1.Pod{onNode(pod("running", nil, 3000), "b-1")})
	before, _ := testutil.GetCounterMetricValue(auditVerdicts.WithLabelValues("audit-team", "Filter", ResultUnschedulable))

	p := pod("p", map[string]string{"team": "a"}, 500)
	filters, scores, st := c.schedule(t, p)
	if st != nil || !filters["a-1"].IsSuccess() || !filters["b-1"].IsSuccess() {
		t.Fatalf("status %v, filters %v: an audited policy must not filter", st, filters)
	}
	if scores["a-1"] != 0 || scores["b-1"] != 0 {
		t.Fatalf("scores %v: an audited policy must not score", scores)
	}
	after, _ := testutil.GetCounterMetricValue(auditVerdicts.WithLabelValues("audit-team", "Filter", ResultUnschedulable))
	if after != before+1 {
		t.Fatalf("audit_verdicts_total for the rejected node went from %v to %v, want +1", before, after)
	}

	// The scheduler picks b-1, which team-isolation would have rejected.
	state := intree.NewCycleState()
	ctx := context.Background()
	if _, st, _ := c.fw.RunPreFilterPlugins(ctx, state, p); !st.IsSuccess() {
		t.Fatal(st)
	}
	infos, _ := c.snapshot.NodeInfos().List()
	var feasible []*v1.Node
	for _, ni := range infos {
		if c.fw.RunFilterPlugins(ctx, state, p, ni).IsSuccess() {
			feasible = append(feasible, ni.Node())
		}
	}
	if len(feasible) != 2 {
		t.Fatalf("feasible %d, want 2", len(feasible))
	}
	fi := append([]fwk.NodeInfo{}, infos...)
	if st := c.fw.RunPreScorePlugins(ctx, state, p, fi); !st.IsSuccess() {
		t.Fatal(st)
	}
	if _, st := c.fw.RunScorePlugins(ctx, state, p, fi); !st.IsSuccess() {
		t.Fatal(st)
	}
	if st := c.fw.RunReservePluginsReserve(ctx, state, p, "b-1"); !st.IsSuccess() {
		t.Fatal(st)
	}
	// One Event for the cycle, with both policies' verdicts: the event
	// recorder would fold an Event per policy into the first one's series.
	want := []string{
		"WasmPolicy/audit-team (Audit) would have rejected the chosen node b-1: team label mismatch; would have rejected 1 node(s): team label mismatch (1)",
		"WasmPolicy/audit-packing (Audit) would have scored the chosen node b-1 ",
	}
	select {
	case e := <-c.recorder.Events:
		t.Logf("event: %s", e)
		if !strings.HasPrefix(e, "Normal WasmPolicyAudit ") {
			t.Errorf("event %q", e)
		}
		for _, w := range want {
			if !strings.Contains(e, w) {
				t.Errorf("the event lacks %q", w)
			}
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no WasmPolicyAudit event")
	}
	select {
	case e := <-c.recorder.Events:
		t.Errorf("a second event: %s", e)
	case <-time.After(100 * time.Millisecond):
	}
}

func onNode(p *v1.Pod, n string) *v1.Pod {
	p.Spec.NodeName = n
	return p
}
