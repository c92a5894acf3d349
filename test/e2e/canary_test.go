package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/wasmsched/wasmsched/internal/testguests"
	policyv1alpha1 "github.com/wasmsched/wasmsched/pkg/apis/policy/v1alpha1"
)

// A canary that agrees with the enforcing version is promoted once its
// rule holds; one that would reject running pods is dropped at once; both
// transitions show in the object's status and Events; and the version the
// promotion replaced comes back with one command.
func TestCanaryPromotesAndDrops(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, "canary")
	e.node("pay", map[string]string{"team": "payments"}, "16")
	e.node("shared", nil, "16")
	team := e.teamNamespace()
	tinygo, goBuild := module(t, "team-isolation"), testguests.PolicyBytes(t, testguests.Go, "team-isolation")
	// The Go build is gzipped to fit a ConfigMap (sources take either).
	for name, b := range map[string][]byte{"policy-tinygo": tinygo, "policy-go": gzipped(t, goBuild), "policy-adversary": module(t, "testdata/adversary")} {
		if _, err := client.CoreV1().ConfigMaps(team).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name},
			BinaryData: map[string][]byte{"policy.wasm": b}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.startObjectScheduler()
	policy := func(canary string) string {
		return fmt.Sprintf(`apiVersion: policy.wasmsched.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: isolation, namespace: %s}
spec:
  source: {configMap: {name: policy-tinygo, key: policy.wasm}}
  sha256: %s
  config: key=team
  profiles: [%s]
%s`, team, digest(tinygo), e.name, canary)
	}
	e.apply(policy(""))
	t.Cleanup(func() { deleteObject(t, policyv1alpha1.SchedulingPoliciesResource, team, "isolation") })
	waitReady(t, team, "isolation", 1, metav1.ConditionTrue, policyv1alpha1.ReasonLoaded)
	pods := 0
	schedule := func(n int, labels map[string]string) {
		t.Helper()
		for range n {
			pods++
			name := fmt.Sprintf("p-%d", pods)
			e.podIn(team, e.name, name, labels, "10m")
			e.placedIn(team, name)
		}
	}

	// A good candidate: the same policy built with Go, the same config.
	e.apply(policy(`  canary:
    source: {configMap: {name: policy-go, key: policy.wasm}}
    rule: {minCycles: 20, for: 3s}
`))
	st := waitCanary(t, team, policyv1alpha1.CanaryObserving, 60*time.Second)
	if st.Canary.SHA256 != digest(goBuild) {
		t.Errorf("canary runs module %s, want the Go build %s", st.Canary.SHA256, digest(goBuild))
	}
	schedule(12, map[string]string{"team": "payments"})
	schedule(12, nil)
	st = waitCanary(t, team, policyv1alpha1.CanaryPromoted, 60*time.Second)
	t.Logf("promoted: %+v", *st.Canary)
	if st.Canary.Cycles < 20 || st.Canary.ChangedCycles != 0 || st.Canary.RejectedRunning != 0 || !strings.Contains(st.Canary.Reason, "the rule held") {
		t.Errorf("promoted canary status %+v", *st.Canary)
	}
	if st.Previous == nil || st.Previous.SHA256 != digest(tinygo) || st.Previous.Source.ConfigMap == nil || st.Previous.Source.ConfigMap.Name != "policy-tinygo" {
		t.Errorf("status.previous %+v, want the TinyGo module from policy-tinygo", st.Previous)
	}
	spec := policySpec(t, team, "isolation")
	if spec.SHA256 != digest(goBuild) || spec.Source.ConfigMap.Name != "policy-go" || spec.Canary != nil {
		t.Errorf("spec after promotion: sha256 %s, source %+v, canary %+v; want the Go build from policy-go and no canary", spec.SHA256, spec.Source.ConfigMap, spec.Canary)
	}
	waitActive(t, team, digest(goBuild))
	schedule(2, map[string]string{"team": "payments"}) // the promoted version enforces

	// A bad candidate: every pod must name its team. A pod without one,
	// bound to the shared node by the enforcing version, is a running pod
	// the candidate rejects: the canary is dropped at once.
	e.apply(strings.Replace(strings.Replace(policy(`  canary:
    config: key=team,require=true
    rule: {minCycles: 1000, for: 1h}
`), "policy-tinygo", "policy-go", 1), digest(tinygo), digest(goBuild), 1))
	waitCanary(t, team, policyv1alpha1.CanaryObserving, 60*time.Second)
	schedule(1, map[string]string{"team": "payments"})
	schedule(1, nil)
	st = waitCanary(t, team, policyv1alpha1.CanaryDropped, 30*time.Second)
	t.Logf("dropped: %+v", *st.Canary)
	if st.Canary.RejectedRunning != 1 || !strings.Contains(st.Canary.Reason, "bound to nodes the candidate rejects") ||
		len(st.Canary.LastExamples) == 0 || !strings.Contains(st.Canary.LastExamples[0], "require=true") {
		t.Errorf("dropped canary status %+v", *st.Canary)
	}
	if spec := policySpec(t, team, "isolation"); spec.SHA256 != digest(goBuild) || spec.Config != "key=team" {
		t.Errorf("a dropped canary changed the spec: sha256 %s config %q", spec.SHA256, spec.Config)
	}
	schedule(1, nil) // the enforcing version still admits pods without a team

	notes := objectEvents(t, team, "isolation")
	for _, want := range []string{"Normal CanaryStarted", "Normal CanaryPromoted", "Warning CanaryDropped"} {
		if !strings.Contains(notes, want) {
			t.Errorf("no %s Event on the object; its Events:\n%s", want, notes)
		}
	}

	// Rollback: one command puts the version the promotion replaced back.
	out, err := wasmsched(t, "rollback", "schedulingpolicy", team+"/isolation")
	if err != nil {
		t.Fatal(err)
	}
	t.Log(strings.TrimSpace(out))
	spec = policySpec(t, team, "isolation")
	if spec.SHA256 != digest(tinygo) || spec.Source.ConfigMap.Name != "policy-tinygo" || spec.Config != "key=team" || spec.Canary != nil {
		t.Errorf("spec after rollback: %+v", spec)
	}
	waitActive(t, team, digest(tinygo))
	if _, err := wasmsched(t, "rollback", "clusterschedulingpolicy", "no-such-policy"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("rollback of a missing object: %v", err)
	}

	// A candidate that fails (it panics on these pods) is never taken for
	// one that agrees: its failed cycles count against it.
	e.apply(policy(`  canary:
    source: {configMap: {name: policy-adversary, key: policy.wasm}}
    rule: {minCycles: 3, for: 1h, maxChangedPercent: "50"}
`))
	waitCanary(t, team, policyv1alpha1.CanaryObserving, 60*time.Second)
	schedule(3, map[string]string{"team": "payments", "attack": "panic"})
	st = waitCanary(t, team, policyv1alpha1.CanaryDropped, 30*time.Second)
	t.Logf("dropped: %+v", *st.Canary)
	if st.Canary.FailedCycles < 3 || st.Canary.RejectedRunning != 0 || !strings.Contains(st.Canary.Reason, "of them the candidate's failures") {
		t.Errorf("a failing canary's status %+v", *st.Canary)
	}
}

// waitCanary waits until the object's status.canary has phase.
func waitCanary(t *testing.T, namespace, phase string, timeout time.Duration) policyv1alpha1.SchedulingPolicyStatus {
	t.Helper()
	var st policyv1alpha1.SchedulingPolicyStatus
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if st = policyStatus(t, namespace, "isolation"); st.Canary != nil && st.Canary.Phase == phase {
			return st
		}
	}
	t.Fatalf("status.canary never reached %s within %s; last status: %+v canary %+v", phase, timeout, st, st.Canary)
	return st
}

// waitActive waits until the object's status says module sha serves.
func waitActive(t *testing.T, namespace, sha string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if policyStatus(t, namespace, "isolation").ActiveSHA256 == sha {
			return
		}
	}
	t.Fatalf("module %s never served", sha)
}

// policySpec reads a SchedulingPolicy's spec.
func policySpec(t *testing.T, namespace, name string) policyv1alpha1.SchedulingPolicySpec {
	t.Helper()
	u, err := dyn.Resource(policyv1alpha1.SchedulingPoliciesResource).Namespace(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var p policyv1alpha1.SchedulingPolicy
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
		t.Fatal(err)
	}
	return p.Spec
}

// objectEvents lists the Events on a policy object as "type reason: note" lines.
func objectEvents(t *testing.T, namespace, name string) string {
	t.Helper()
	evs, err := client.EventsV1().Events(namespace).List(context.Background(), metav1.ListOptions{FieldSelector: "regarding.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, ev := range evs.Items {
		fmt.Fprintf(&b, "%s %s: %s\n", ev.Type, ev.Reason, ev.Note)
	}
	return b.String()
}
