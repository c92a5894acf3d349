package e2e

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A policy's postfilter (ABI v4) explains in its own words why no node
// fit: its reason reaches the pod's FailedScheduling event and its
// PodScheduled condition, after kube-scheduler's own, and the pod stays
// pending as Unschedulable; a pod that fits is bound as before.
func TestPostFilterMessage(t *testing.T) {
	e := newEnv(t, "postfilter")
	e.node("za", map[string]string{"zone": "a"}, "4")
	e.policyConfigMap("ep", module(t, "testdata/extension-points"))
	e.startScheduler(`      - name: ep
        source: `+cmSource(e, "ep")+`
        patchPrefixes: [ep.example.com/]
`, "ep")

	e.pod("in-a", map[string]string{"zone": "a"}, "100m")
	if n := e.placed("in-a"); n != "za" {
		t.Fatalf("in-a placed on %s, want za", n)
	}
	e.pod("in-c", map[string]string{"zone": "c"}, "100m")
	msg := e.rejected("in-c")
	for _, want := range []string{"0/1 nodes are available", "node(s) rejected by WasmPolicy/ep: zone a is not c", "WasmPolicy/ep: no node in zone c"} {
		if !strings.Contains(msg, want) {
			t.Errorf("FailedScheduling %q lacks %q", msg, want)
		}
	}
	p, err := client.CoreV1().Pods(e.name).Get(context.Background(), "in-c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable && strings.Contains(c.Message, "WasmPolicy/ep: no node in zone c") {
			found = true
		}
	}
	if !found {
		t.Errorf("no PodScheduled=False Unschedulable condition with the policy's message: %+v", p.Status.Conditions)
	}
}
