package wasmpolicy

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/internal/framework/intree"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
)

// A canary runs in Audit right before its primary; every cycle compares
// their verdicts on the nodes both judged, and the cycle's outcome (the
// node the pod got, or none) decides what the disagreement was.
func TestCanaryJudgesEachCycle(t *testing.T) {
	team := testguests.Policy(t, testguests.TinyGo, "team-isolation")
	policy := func(name, cfg string, mode config.Mode) config.Policy {
		p := configv1.DefaultPolicy(name, config.Source{File: team})
		p.Config, p.Mode, p.Timeout = cfg, mode, 5*time.Second
		return p
	}
	args := &config.WasmPolicyArgs{CompilationCacheDir: sharedCacheDir, MaxInstancesPerPolicy: 2, FilePollInterval: time.Hour, Policies: []config.Policy{
		policy("iso@canary", "key=team,require=true", config.ModeAudit),
		policy("iso", "key=team", config.ModeEnforce),
	}}
	ctx := context.Background()
	w, err := NewWithArgs(ctx, args, NewClientHandle(nil, nil), WithInitialLoadTimeout(3*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	j := &canaryJudge{of: "iso"}
	w.static[0].canary = j
	nodes := intree.NodeInfos([]*v1.Node{node("a-1", map[string]string{"team": "a"}, 4000), node("s-1", nil, 4000)}, nil)

	// cycle runs one scheduling cycle of p and ends it on the first
	// feasible node (Reserve), or with none (PostFilter).
	cycle := func(p *v1.Pod) string {
		state := intree.NewCycleState()
		if _, st := w.PreFilter(ctx, state, p, nodes); !st.IsSuccess() {
			t.Fatalf("PreFilter: %v", st)
		}
		for _, ni := range nodes {
			if st := w.Filter(ctx, state, p, ni); st.IsSuccess() {
				w.Reserve(ctx, state, p, ni.Node().Name)
				return ni.Node().Name
			}
		}
		_, _ = w.PostFilter(ctx, state, p, fwk.NodeToStatusReader(nil))
		return ""
	}
	// Team a: both versions admit a-1 alone. The same.
	if got := cycle(pod("team-a", map[string]string{"team": "a"}, 100)); got != "a-1" {
		t.Fatalf("team-a placed on %q", got)
	}
	// No team: the enforcing version admits the shared node, the canary
	// (require=true) no node: changed, and a pod bound where it rejects.
	if got := cycle(pod("no-team", nil, 100)); got != "s-1" {
		t.Fatalf("no-team placed on %q", got)
	}
	// Team b has no nodes: both reject every node. The same, no node.
	if got := cycle(pod("team-b", map[string]string{"team": "b"}, 100)); got != "" {
		t.Fatalf("team-b placed on %q", got)
	}
	n := j.counts()
	if n.Cycles != 3 || n.Changed != 1 || n.RejectedRunning != 1 || n.Unblocked != 0 || n.Failed != 0 {
		t.Fatalf("counts %+v, want 3 cycles, 1 changed, 1 rejected running", n)
	}
	if len(n.Examples) != 1 || !strings.Contains(n.Examples[0], "default/no-team was bound to s-1, which the candidate rejects: pod has no team label") {
		t.Errorf("examples %q", n.Examples)
	}
}
