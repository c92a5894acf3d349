package policyobjects

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/wasmsched/wasmsched/pkg/apis/policy/v1alpha1"
)

func TestCanaryRule(t *testing.T) {
	r, bad := ruleOf(policyv1alpha1.CanaryRule{MinCycles: 100, For: &metav1.Duration{Duration: time.Minute}, MaxChangedPercent: "0.5"})
	if bad != "" {
		t.Fatal(bad)
	}
	for _, tc := range []struct {
		name    string
		n       CanaryCounts
		elapsed time.Duration
		phase   string
		reason  string
	}{
		{"too few cycles", CanaryCounts{Cycles: 99}, time.Hour, policyv1alpha1.CanaryObserving, "1 more cycle(s)"},
		{"too early", CanaryCounts{Cycles: 500}, 30 * time.Second, policyv1alpha1.CanaryObserving, "promotion after 30s"},
		{"holds", CanaryCounts{Cycles: 1000, Changed: 5}, time.Minute, policyv1alpha1.CanaryPromoted, "verdicts changed in 0.5% (at most 0.5%)"},
		{"too many changes", CanaryCounts{Cycles: 1000, Changed: 6}, time.Minute, policyv1alpha1.CanaryDropped, "verdicts changed in 0.6% of 1000 cycles (maxChangedPercent 0.5)"},
		{"changes counted only from minCycles", CanaryCounts{Cycles: 10, Changed: 10}, time.Minute, policyv1alpha1.CanaryObserving, "90 more cycle(s)"},
		{"a rejected running pod drops it at once", CanaryCounts{Cycles: 1, RejectedRunning: 1, Examples: []string{"ns/p was bound to n1"}}, 0, policyv1alpha1.CanaryDropped, "1 pod(s) were bound to nodes the candidate rejects (maxRejectedRunning 0); latest: ns/p was bound to n1"},
	} {
		phase, reason := r.decide(tc.n, tc.elapsed)
		if phase != tc.phase || !strings.Contains(reason, tc.reason) {
			t.Errorf("%s: %s %q, want %s and a reason with %q", tc.name, phase, reason, tc.phase, tc.reason)
		}
	}
	d, _ := ruleOf(policyv1alpha1.CanaryRule{})
	if d.minCycles != 1000 || d.wait != 10*time.Minute || d.maxChangedPct != 1 || d.maxRejectedRunning != 0 {
		t.Errorf("defaults %+v", d)
	}
	if _, bad := ruleOf(policyv1alpha1.CanaryRule{MaxChangedPercent: "lots"}); !strings.Contains(bad, "spec.canary.rule.maxChangedPercent") {
		t.Errorf("a bad percentage: %q", bad)
	}
}
