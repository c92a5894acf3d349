package wasmpolicy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

// A policy that floods its stdout is rate-limited, and /metrics counts
// what was dropped under the policy's name.
func TestSuppressedOutputMetric(t *testing.T) {
	flood := writeModule(t, t.TempDir(), "flood.wasm", fixture(t, "logflood"))
	c := newCluster(t, &config.WasmPolicyArgs{Policies: []config.Policy{
		{Name: "flood", Source: config.Source{File: flood}},
	}}, []*v1.Node{node("a", nil, 1000), node("b", nil, 1000)})
	if _, _, st := c.schedule(t, pod("p", nil, 10)); st != nil {
		t.Fatal(st)
	}
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "wasmsched_policy_output_lines_suppressed_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				// Each Filter call writes 65,536 lines; at most the burst pass.
				if l.GetName() == "policy" && l.GetValue() == "flood" && m.GetCounter().GetValue() >= 65536 {
					return
				}
			}
		}
		t.Fatalf("no suppressed count for policy flood in %v", f)
	}
	t.Fatal("wasmsched_policy_output_lines_suppressed_total is not exposed")
}

// The log-flood module on 1000 nodes: one 64 KiB write of newlines per
// Filter call. The policy's output reaches the log as its burst and one
// line saying how many lines were dropped, and the cycle stays within the
// policy's budget: the host's work on the output is charged to the calls.
func TestLogFloodOn1000Nodes(t *testing.T) {
	const nodes = 1000
	flood := writeModule(t, t.TempDir(), "flood.wasm", fixture(t, "logflood"))
	var ns []*v1.Node
	for i := 0; i < nodes; i++ {
		ns = append(ns, node(fmt.Sprintf("n%04d", i), nil, 1000))
	}
	c := newCluster(t, &config.WasmPolicyArgs{Policies: []config.Policy{
		{Name: "flood1000", Source: config.Source{File: flood}, PolicySettings: config.PolicySettings{Timeout: 100 * time.Millisecond, CycleBudget: 200 * time.Millisecond, FailurePolicy: config.FailurePolicyIgnore}},
	}}, ns)
	logs := testguests.CaptureKlog(t)
	budgetStops := counterValue(t, "wasmsched_policy_stopped_cycles_total", map[string]string{"policy": "flood1000", "reason": ResultBudgetExceeded})
	filters, _, st := c.schedule(t, pod("p", nil, 10))
	if st != nil {
		t.Fatal(st)
	}
	for n, f := range filters {
		if !f.IsSuccess() {
			t.Fatalf("%s: %v (Ignore must let it pass)", n, f)
		}
	}
	klog.Flush()
	out := logs.String()
	lines := strings.Count(out, `"Policy output" policy="flood1000"`)
	notices := strings.Count(out, `"Policy output suppressed" policy="flood1000"`)
	suppressed := counterValue(t, "wasmsched_policy_output_lines_suppressed_total", map[string]string{"policy": "flood1000"})
	stops := counterValue(t, "wasmsched_policy_stopped_cycles_total", map[string]string{"policy": "flood1000", "reason": ResultBudgetExceeded}) - budgetStops
	t.Logf("one cycle on %d nodes: %d output lines logged, %d suppression notices, %v lines suppressed, budget stops %v", nodes, lines, notices, suppressed, stops)
	if lines > 100 || notices > 5 {
		t.Fatalf("%d output lines and %d notices reached the log for one cycle, want the burst (50) and a notice", lines, notices)
	}
	if suppressed < 65536 {
		t.Fatalf("suppressed count %v, want at least one call's 65536 lines", suppressed)
	}
	// Either the calls fit the budget, or the budget stopped the policy:
	// in both cases the cycle did not pay for more than it.
	if stops > 1 {
		t.Fatalf("%v budget stops for one cycle", stops)
	}
}

// counterValue reads a counter series from the registry (0 when absent).
func counterValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue series
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// A deleted policy object's policy leaves no series behind: policy names
// come and go with objects, and each name's series would otherwise stay
// in the scheduler's memory and on every scrape.
func TestForgetDeletesThePolicySeries(t *testing.T) {
	registerMetrics()
	m := newPolicyMetrics("forgotten")
	m.evaluated(host.CallFilter, rSuccess)
	m.observe(host.CallFilter, time.Now())
	m.ignoredCall(host.CallScore)
	m.load("Success", time.Millisecond)
	m.load("SourceError", 0)
	m.audited(host.CallFilter, ResultUnschedulable)
	m.stoppedCycle(ResultTimeout)
	m.setBreaker(breakerOpen)
	m.setActive("abc", "")
	m.overrun.Observe(0.001)
	count := func() int {
		mfs, err := legacyregistry.DefaultGatherer.Gather()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, mf := range mfs {
			for _, metric := range mf.GetMetric() {
				for _, l := range metric.GetLabel() {
					if l.GetName() == "policy" && l.GetValue() == "forgotten" {
						n++
					}
				}
			}
		}
		return n
	}
	if n := count(); n == 0 {
		t.Fatal("the policy's series were not created")
	}
	m.forget("abc")
	if n := count(); n != 0 {
		t.Errorf("%d series of the forgotten policy remain", n)
	}
}
