package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	policyv1alpha1 "github.com/wasmsched/wasmsched/pkg/apis/policy/v1alpha1"
)

// waitEvent waits for an event of reason on the pod whose note contains
// text, and returns the note.
func (e *env) waitEvent(ns, pod, reason, text string) string {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range eventNotes(ns, pod, "", reason) {
			if strings.Contains(n, text) {
				return n
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.t.Fatalf("no %s event on %s/%s containing %q within 30s; events: %v", reason, ns, pod, text, eventNotes(ns, pod, "", reason))
	return ""
}

// stillPending checks that the pod stays unbound, and that kube-scheduler
// never tried to schedule it (a gated pod never reaches a cycle), for d.
func (e *env) stillPending(ns, pod string, d time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		p, err := client.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		if p.Spec.NodeName != "" {
			e.t.Fatalf("gated pod %s/%s was bound to %s", ns, pod, p.Spec.NodeName)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if msg := e.failedSchedulingIn(ns, pod); msg != "" {
		e.t.Fatalf("gated pod %s/%s went through a scheduling cycle: %s", ns, pod, msg)
	}
}

// freezePolicy is a ClusterSchedulingPolicy running freeze-window for the
// pods labelled app=api in this test's profile, with the window [start, end).
func (e *env) freezePolicy(name string, start, end time.Time, mode string) string {
	return fmt.Sprintf(`apiVersion: policy.wasmsched.io/v1alpha1
kind: ClusterSchedulingPolicy
metadata: {name: %s}
spec:
  source: %s
  config: start=%s,end=%s,reason=e2e
  realClock: true
  mode: %s
  profiles: [%s]
  podSelector: {matchLabels: {app: api}}
`, name, cmSource(e, "freeze"), start.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339), mode, e.name)
}

// A freeze window gates the pods in its scope: they stay pending, never
// tried against nodes, with the policy's reason in a WasmPolicyGated
// event, while a pod outside the scope schedules. The gate lifts without a
// restart: for one pod when it gets the approving annotation, for the
// others when the policy's config moves the window, and when the window
// ends on its own (the gate asked to be checked again then).
func TestPreEnqueueGate(t *testing.T) {
	e := newEnv(t, "gates")
	e.node("a", nil, "8")
	e.policyConfigMap("freeze", module(t, "freeze-window"))
	e.startObjectScheduler()
	name := e.name + "-freeze"
	now := time.Now()
	e.apply(e.freezePolicy(name, now.Add(-time.Hour), now.Add(time.Hour), "Enforce"))
	t.Cleanup(func() { deleteObject(t, policyv1alpha1.ClusterSchedulingPoliciesResource, "", name) })
	waitReady(t, "", name, 1, metav1.ConditionTrue, "Loaded")

	e.pod("api-1", map[string]string{"app": "api"}, "100m")
	e.pod("api-2", map[string]string{"app": "api"}, "100m")
	e.pod("other", nil, "100m")
	if n := e.placed("other"); n != "a" {
		t.Fatalf("pod outside the scope placed on %s", n)
	}
	for _, p := range []string{"api-1", "api-2"} {
		note := e.waitEvent(e.name, p, "WasmPolicyGated", "gated by WasmPolicy/"+name+": change freeze (e2e) until ")
		if !strings.Contains(note, "annotate it freeze.wasmsched.io/approved=true") {
			t.Errorf("%s: the event does not say how to lift the gate: %q", p, note)
		}
	}
	e.stillPending(e.name, "api-1", 2*time.Second)

	// The approving annotation lifts api-1's gate: the pod's own update
	// checks it again.
	start := time.Now()
	if _, err := client.CoreV1().Pods(e.name).Patch(context.Background(), "api-1", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"freeze.wasmsched.io/approved":"true"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.placed("api-1")
	t.Logf("api-1 bound %s after its approval", time.Since(start).Round(time.Millisecond))
	e.stillPending(e.name, "api-2", time.Second)

	// Moving the window into the past lifts the others: the new config
	// rechecks the pods the old one gated.
	start = time.Now()
	e.apply(e.freezePolicy(name, now.Add(-2*time.Hour), now.Add(-time.Hour), "Enforce"))
	e.placed("api-2")
	t.Logf("api-2 bound %s after the config change", time.Since(start).Round(time.Millisecond))

	// A window ending in a few seconds: the pod created now is gated, and
	// bound once the window ends, with no change to anything.
	end := time.Now().Add(6 * time.Second)
	e.apply(e.freezePolicy(name, now.Add(-time.Hour), end, "Enforce"))
	waitReady(t, "", name, 3, metav1.ConditionTrue, "Loaded")
	e.pod("api-3", map[string]string{"app": "api"}, "100m")
	e.waitEvent(e.name, "api-3", "WasmPolicyGated", "change freeze (e2e) until ")
	e.placed("api-3")
	p, err := client.CoreV1().Pods(e.name).Get(context.Background(), "api-3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bound := time.Now()
	for _, c := range p.Status.Conditions {
		if c.Type == "PodScheduled" && c.Status == "True" {
			bound = c.LastTransitionTime.Time
		}
	}
	if bound.Before(end.Add(-time.Second)) {
		t.Errorf("api-3 bound at %s, before its window ended at %s", bound, end)
	}
	t.Logf("api-3 bound at %s (PodScheduled, whole seconds), its window ended at %s", bound.Format(time.TimeOnly), end.Format("15:04:05.000"))
}

// apiserverPodPatches reads the apiserver's count of PATCH requests on
// pods (not their subresources), from its /metrics.
func apiserverPodPatches(t *testing.T) int {
	t.Helper()
	b, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, "apiserver_request_total{") || !strings.Contains(l, `resource="pods"`) || !strings.Contains(l, `subresource=""`) || !strings.Contains(l, `verb="PATCH"`) {
			continue
		}
		f := strings.Fields(l)
		n, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", l, err)
		}
		total += int(n)
	}
	return total
}

// Bound pods carry what the policies' prebind wrote, applied with one
// patch per pod (the apiserver counts them) by the manager wasmsched; a
// policy writing outside its patchPrefixes gets an error and, under
// failurePolicy Fail, its pod is not bound; a prebind that times out
// applies its failurePolicy: Fail keeps the pod unbound and retried,
// Ignore binds it without that policy's patch, with an event.
func TestPreBindPatches(t *testing.T) {
	e := newEnv(t, "patches")
	e.node("a", map[string]string{"topology.kubernetes.io/zone": "zone-a"}, "8")
	e.policyConfigMap("recorder", module(t, "placement-recorder"))
	e.policyConfigMap("adversary", module(t, "testdata/adversary"))
	e.policyConfigMap("team", module(t, "team-isolation"))
	e.startScheduler(fmt.Sprintf(`      - name: placement-recorder
        source: %s
        patchPrefixes: [placement.wasmsched.io/]
        scope: {podSelector: {matchExpressions: [{key: prebind-attack, operator: DoesNotExist}]}}
      - name: team-isolation
        source: %s
        config: key=team
        mode: Audit
      - name: recorder-elsewhere
        source: %s
        config: prefix=elsewhere.example.com/
        patchPrefixes: [placement.wasmsched.io/]
        scope: {podSelector: {matchLabels: {recorder: elsewhere}}}
      - name: adversary-fail
        source: %s
        timeout: 100ms
        scope: {podSelector: {matchLabels: {policy: fail}}}
      - name: adversary-ignore
        source: %s
        timeout: 100ms
        failurePolicy: Ignore
        patchPrefixes: [adversary.example.com/]
        scope: {podSelector: {matchLabels: {policy: ignore}}}
`, cmSource(e, "recorder"), cmSource(e, "team"), cmSource(e, "recorder"), cmSource(e, "adversary"), cmSource(e, "adversary")),
		"placement-recorder", "team-isolation", "recorder-elsewhere", "adversary-fail", "adversary-ignore")

	// Five pods: five patches, each with the zone label and the policies.
	before := apiserverPodPatches(t)
	for i := 0; i < 5; i++ {
		e.pod(fmt.Sprintf("p-%d", i), nil, "100m")
	}
	for i := 0; i < 5; i++ {
		e.placed(fmt.Sprintf("p-%d", i))
	}
	if got := apiserverPodPatches(t) - before; got != 5 {
		t.Errorf("the apiserver served %d pod PATCH requests for 5 bound pods, want 5 (one each)", got)
	}
	p, err := client.CoreV1().Pods(e.name).Get(context.Background(), "p-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if z := p.Labels["placement.wasmsched.io/zone"]; z != "zone-a" {
		t.Errorf("zone label %q, want zone-a (labels %v)", z, p.Labels)
	}
	recorded := p.Annotations["placement.wasmsched.io/policies"]
	for _, want := range []string{"placement-recorder@sha256:" + digest(module(t, "placement-recorder")), "team-isolation@sha256:" + digest(module(t, "team-isolation")) + " (Audit)"} {
		if !strings.Contains(recorded, want) {
			t.Errorf("policies annotation %q lacks %q", recorded, want)
		}
	}
	managers := map[string]bool{}
	for _, mf := range p.ManagedFields {
		if fields, err := json.Marshal(mf.FieldsV1); err == nil && strings.Contains(string(fields), "placement.wasmsched.io/policies") {
			managers[mf.Manager] = true
		}
	}
	if !managers["wasmsched"] || len(managers) != 1 {
		t.Errorf("the annotation is managed by %v, want wasmsched alone", managers)
	}

	// A write outside the policy's patchPrefixes: the guest gets an
	// error, returns it, and failurePolicy Fail keeps the pod unbound.
	e.pod("elsewhere", map[string]string{"recorder": "elsewhere"}, "100m")
	msg := e.rejected("elsewhere")
	for _, want := range []string{"WasmPolicy/recorder-elsewhere", "key outside the policy's patchPrefixes", `label key "elsewhere.example.com/zone" is outside the policy's patchPrefixes ["placement.wasmsched.io/"]`} {
		if !strings.Contains(msg, want) {
			t.Errorf("FailedScheduling %q lacks %q", msg, want)
		}
	}
	e.waitLogMatch(regexp.MustCompile(`"Policy wrote a pod key it may not write; the write was refused".* policy="recorder-elsewhere"`), 1, 10*time.Second)

	// A prebind that loops: the call ends at its timeout and the
	// failurePolicy applies. Fail: not bound, retried; Ignore: bound
	// without the policy's patch, with an event.
	e.pod("loop-fail", map[string]string{"policy": "fail", "prebind-attack": "loop"}, "100m")
	e.pod("loop-ignore", map[string]string{"policy": "ignore", "prebind-attack": "loop"}, "100m")
	msg = e.rejected("loop-fail")
	if !strings.Contains(msg, "WasmPolicy/adversary-fail: policy call exceeded its timeout of 100ms") {
		t.Errorf("FailedScheduling %q does not name the timeout", msg)
	}
	e.placed("loop-ignore")
	e.waitEvent(e.name, "loop-ignore", "WasmPolicyPatchSkipped", "WasmPolicy/adversary-ignore: policy call exceeded its timeout of 100ms")
	p, err = client.CoreV1().Pods(e.name).Get(context.Background(), "loop-ignore", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k := range p.Annotations {
		if strings.HasPrefix(k, "adversary.example.com/") {
			t.Errorf("loop-ignore carries %s from the policy that timed out", k)
		}
	}
	// The pod that failed is quarantined: retried (the scheduler's
	// backoff), it is held by the policy's gate from its quarantine,
	// without calling the policy again; it is not lost, and never bound.
	failedBind := regexp.MustCompile(`"Policy call failed".* pod="` + regexp.QuoteMeta(e.name) + `/loop-fail" policy="adversary-fail" extensionPoint="PreBind"`)
	e.waitLogMatch(failedBind, 1, 30*time.Second)
	note := e.waitEvent(e.name, "loop-fail", "WasmPolicyGated", "quarantined: the policy failed on this pod")
	if !strings.Contains(note, "gated by WasmPolicy/adversary-fail") {
		t.Errorf("the retry's WasmPolicyGated %q does not name the policy", note)
	}
	if n := e.logMatchCount(failedBind); n != 1 {
		t.Errorf("%d failed PreBind calls for loop-fail, want 1: its retries are answered from the quarantine", n)
	}
	if p, err := client.CoreV1().Pods(e.name).Get(context.Background(), "loop-fail", metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" {
		t.Errorf("loop-fail: %v, bound to %q; want it pending", err, p.Spec.NodeName)
	}
}

// In Audit mode a gate and a patch change nothing: the pod is scheduled
// and carries no key, and WasmPolicyAudit events say what they would have
// done.
func TestAuditedGatesAndPatches(t *testing.T) {
	e := newEnv(t, "auditgates")
	e.node("a", map[string]string{"topology.kubernetes.io/zone": "zone-a"}, "8")
	e.policyConfigMap("freeze", module(t, "freeze-window"))
	e.policyConfigMap("recorder", module(t, "placement-recorder"))
	now := time.Now()
	e.startScheduler(fmt.Sprintf(`      - name: freeze
        source: %s
        config: start=%s,end=%s
        realClock: true
        mode: Audit
      - name: recorder
        source: %s
        patchPrefixes: [placement.wasmsched.io/]
        mode: Audit
`, cmSource(e, "freeze"), now.Add(-time.Hour).UTC().Format(time.RFC3339), now.Add(time.Hour).UTC().Format(time.RFC3339), cmSource(e, "recorder")), "freeze", "recorder")
	before := apiserverPodPatches(t)
	e.pod("api", nil, "100m")
	e.placed("api")
	e.waitEvent(e.name, "api", "WasmPolicyAudit", "WasmPolicy/freeze (Audit) would have gated the pod: change freeze until ")
	e.waitEvent(e.name, "api", "WasmPolicyAudit", `WasmPolicy/recorder (Audit) would have patched the pod: label placement.wasmsched.io/zone="zone-a", annotation placement.wasmsched.io/policies=`)
	p, err := client.CoreV1().Pods(e.name).Get(context.Background(), "api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// (The apiserver copies the node's topology labels to a pod it binds.)
	for k := range p.Labels {
		if strings.HasPrefix(k, "placement.wasmsched.io/") {
			t.Errorf("the audited patch wrote label %s", k)
		}
	}
	if len(p.Annotations) != 0 {
		t.Errorf("audited policies changed the pod's annotations: %v", p.Annotations)
	}
	if got := apiserverPodPatches(t) - before; got != 0 {
		t.Errorf("%d pod PATCH requests with only audited patches, want 0", got)
	}
}
