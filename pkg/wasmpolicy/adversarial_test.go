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
)

func evalCount(t *testing.T, policy, result string) float64 {
	if result == "" {
		return 0
	}
	v, err := testutil.GetCounterMetricValue(evaluations.WithLabelValues(policy, "Filter", result))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func summarize(filters map[string]*fwk.Status) string {
	var b strings.Builder
	for _, n := range []string{"a-1", "a-2", "b-1"} {
		msg := "ok"
		if f := filters[n]; !f.IsSuccess() {
			msg = f.Message()
			if len(msg) > 120 {
				msg = msg[:120] + "…"
			}
		}
		b.WriteString(n + "=" + msg + " ")
	}
	return b.String()
}

// scheduleTimed is cluster.schedule with a context (for the logger) and the
// duration of the slowest Filter.
func scheduleTimed(t *testing.T, ctx context.Context, c *cluster, pod *v1.Pod) (map[string]*fwk.Status, map[string]int64, *fwk.Status, time.Duration) {
	t.Helper()
	state := intree.NewCycleState()
	_, st, _ := c.fw.RunPreFilterPlugins(ctx, state, pod)
	if !st.IsSuccess() {
		return nil, nil, st, 0
	}
	infos, err := c.snapshot.NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	filters := map[string]*fwk.Status{}
	var feasible []fwk.NodeInfo
	var longest time.Duration
	for _, ni := range infos {
		start := time.Now()
		st := c.fw.RunFilterPlugins(ctx, state, pod, ni)
		longest = max(longest, time.Since(start))
		filters[ni.Node().Name] = st
		if st.IsSuccess() {
			feasible = append(feasible, ni)
		}
	}
	scores := map[string]int64{}
	if len(feasible) == 0 {
		return filters, scores, nil, longest
	}
	if st := c.fw.RunPreScorePlugins(ctx, state, pod, feasible); !st.IsSuccess() && !st.IsSkip() {
		return filters, nil, st, longest
	}
	ns, st := c.fw.RunScorePlugins(ctx, state, pod, feasible)
	if !st.IsSuccess() {
		return filters, nil, st, longest
	}
	for _, n := range ns {
		scores[n.Name] = n.TotalScore
	}
	return filters, scores, nil, longest
}
