package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmsched/wasmsched/internal/controlplane"
)

// Pods land only where the filter policies allow; among feasible nodes the
// score policy decides; an unschedulable pod's event names the policy.
func TestPlacementFollowsPolicies(t *testing.T) {
	e := newEnv(t, "placement")
	e.node("pay-1", map[string]string{"team": "payments"}, "4")
	e.node("pay-2", map[string]string{"team": "payments"}, "4")
	e.node("search-1", map[string]string{"team": "search"}, "4")
	e.node("shared-1", nil, "4")
	e.policyConfigMap("team", module(t, "team-isolation"))
	e.policyConfigMap("placement", module(t, "bin-packing"))
	e.startScheduler(`      - name: team-isolation
        source: `+cmSource(e, "team")+`
        config: key=team
      - name: placement
        source: `+cmSource(e, "placement")+`
        config: cpu=1
`, "team-isolation", "placement")

	first := ""
	for i, name := range []string{"api-1", "api-2", "api-3"} {
		e.pod(name, map[string]string{"team": "payments"}, "500m")
		got := e.placed(name)
		if got != "pay-1" && got != "pay-2" {
			t.Fatalf("%s landed on %s, not a payments node", name, got)
		}
		// bin-packing: once one payments node has pods, it is the fuller one.
		if i == 0 {
			first = got
		} else if got != first {
			t.Fatalf("%s landed on %s; bin-packing should keep filling %s", name, got, first)
		}
	}
	e.pod("web-1", nil, "250m")
	if got := e.placed("web-1"); got != "shared-1" {
		t.Fatalf("unlabelled pod landed on %s, want the shared node", got)
	}
	e.pod("report", map[string]string{"team": "analytics"}, "250m")
	msg := e.rejected("report")
	for _, want := range []string{
		"0/4 nodes are available",
		"3 node(s) rejected by WasmPolicy/team-isolation: team label mismatch",
		"1 node(s) rejected by WasmPolicy/team-isolation: node has no team label (shared pool), pod belongs to team analytics",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("FailedScheduling = %q, want it to contain %q", msg, want)
		}
	}
}

// Updating a policy's ConfigMap changes behaviour within 2 s, without a
// restart: bin-packing → spread.
func TestConfigMapUpdateTakesEffect(t *testing.T) {
	e := newEnv(t, "reload")
	e.node("a", nil, "4")
	e.node("b", nil, "4")
	e.policyConfigMap("placement", module(t, "bin-packing"))
	e.startScheduler(`      - name: placement
        source: `+cmSource(e, "placement")+`
        config: cpu=1
`, "placement")
	e.pod("p1", nil, "1")
	n1 := e.placed("p1")
	e.pod("p2", nil, "1")
	if n2 := e.placed("p2"); n2 != n1 {
		t.Fatalf("bin-packing put p2 on %s, p1 is on %s", n2, n1)
	}

	spread := module(t, "spread")
	sum := sha256.Sum256(spread)
	short := hex.EncodeToString(sum[:])[:12]
	updated := time.Now()
	e.policyConfigMap("placement", spread)
	// The scheduler's PolicyLoaded event carries the time the new module
	// started serving (log lines are flushed in batches, events are not).
	var served time.Time
	deadline := time.Now().Add(20 * time.Second)
	for served.IsZero() {
		evs, err := client.EventsV1().Events(policyNS).List(context.Background(), metav1.ListOptions{FieldSelector: "regarding.name=" + e.name + "-placement"})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs.Items {
			if ev.Reason == "PolicyLoaded" && strings.Contains(ev.Note, short) {
				served = ev.EventTime.Time
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no PolicyLoaded event for module %s", short)
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := served.Sub(updated)
	t.Logf("ConfigMap update to new module serving: %s", took)
	if took > 2*time.Second {
		t.Fatalf("reload took %s, want at most 2s", took)
	}
	e.pod("p3", nil, "1")
	if n3 := e.placed("p3"); n3 == n1 {
		t.Fatalf("after the switch to spread, p3 still landed on the fuller node %s", n3)
	}
}

// A corrupt module, or a valid one with the wrong sha256, is refused: the
// last good version keeps serving, and a Warning event and a log line name
// the policy.
func TestBadModuleKeepsLastGood(t *testing.T) {
	e := newEnv(t, "badmodule")
	e.node("team-a", map[string]string{"team": "a"}, "4")
	e.node("shared", nil, "4")
	good := module(t, "team-isolation")
	sum := sha256.Sum256(good)
	e.policyConfigMap("team", good)
	e.policyConfigMap("pinned", good)
	e.startScheduler(`      - name: team-isolation
        source: `+cmSource(e, "team")+`
        config: key=team
      - name: pinned
        source: `+cmSource(e, "pinned")+`
        sha256: `+hex.EncodeToString(sum[:])+`
        config: key=team
`, "team-isolation", "pinned")

	// Corrupt bytes for one, a different (valid) module for the pinned one.
	e.policyConfigMap("team", []byte("\x00asm\x01\x00\x00\x00this is not a module"))
	e.policyConfigMap("pinned", module(t, "spread"))
	e.waitLog(`"Policy module rejected; keeping the last good module"`, 2, 20*time.Second)
	if e.logCount(`policy="team-isolation"`) == 0 || !strings.Contains(readLog(e), `reason="SHA256Mismatch"`) {
		t.Fatalf("log does not name the refused policies and reasons")
	}
	for _, cm := range []struct{ name, want string }{
		{e.name + "-team", "WasmPolicy/team-isolation: Compile"},
		{e.name + "-pinned", "WasmPolicy/pinned: SHA256Mismatch"},
	} {
		deadline := time.Now().Add(20 * time.Second)
		for {
			notes := configMapEvents(cm.name, "Warning", "PolicyLoadFailed")
			if len(notes) > 0 && strings.Contains(strings.Join(notes, "|"), cm.want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no PolicyLoadFailed Warning on %s containing %q (got %v)", cm.name, cm.want, notes)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// Scheduling goes on with the last good versions.
	e.pod("a-1", map[string]string{"team": "a"}, "250m")
	if got := e.placed("a-1"); got != "team-a" {
		t.Fatalf("a-1 landed on %s", got)
	}
	e.pod("b-1", map[string]string{"team": "b"}, "250m")
	if msg := e.rejected("b-1"); !strings.Contains(msg, "rejected by WasmPolicy/team-isolation") {
		t.Fatalf("b-1: %q", msg)
	}
}

// Replacing a hostPath file reloads the policy.
func TestFileSourceReload(t *testing.T) {
	e := newEnv(t, "file")
	e.node("a", nil, "4")
	e.node("b", nil, "4")
	path := filepath.Join(e.dir, "placement.wasm")
	write := func(b []byte) {
		if err := os.WriteFile(path+".tmp", b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	write(module(t, "bin-packing"))
	e.startScheduler(`      - name: placement
        source: {file: `+path+`}
        config: cpu=1
`, "placement")
	e.pod("p1", nil, "1")
	n1 := e.placed("p1")
	write(module(t, "spread"))
	e.waitLog(`"Policy module active" policy="placement"`, 2, 10*time.Second)
	e.pod("p2", nil, "1")
	if n2 := e.placed("p2"); n2 == n1 {
		t.Fatalf("after replacing the file with spread.wasm, p2 joined p1 on %s", n2)
	}
}

func readLog(e *env) string {
	b, _ := os.ReadFile(e.log)
	return string(b)
}

// The control plane is the real thing: version and RBAC as configured.
func TestControlPlane(t *testing.T) {
	v, err := client.Discovery().ServerVersion()
	if err != nil || v.GitVersion != controlplane.Version(root) {
		t.Fatalf("server version = %v, %v", v, err)
	}
	if _, err := client.CoreV1().Namespaces().Get(context.Background(), "kube-system", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A pod a policy rejected is retried as soon as that policy loads a new
// module, not after the scheduler's 5-minute unschedulable timeout: nothing
// else in the cluster changes here.
func TestReloadRequeuesRejectedPods(t *testing.T) {
	e := newEnv(t, "requeue")
	e.node("only", nil, "4")
	ctx := context.Background()
	n, err := client.CoreV1().Nodes().Get(ctx, e.name+"-only", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Annotations = map[string]string{"maintenance.wasmsched.io/window": "until further notice"}
	if _, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.policyConfigMap("gate", module(t, "maintenance-avoidance"))
	e.startScheduler(`      - name: gate
        source: `+cmSource(e, "gate")+`
`, "gate")
	e.pod("waiting", nil, "250m")
	if msg := e.rejected("waiting"); !strings.Contains(msg, "rejected by WasmPolicy/gate: node is in maintenance") {
		t.Fatalf("FailedScheduling = %q", msg)
	}
	// Give the scheduler time to park the pod as unschedulable.
	time.Sleep(2 * time.Second)
	start := time.Now()
	e.policyConfigMap("gate", module(t, "spread")) // a policy that admits every node
	deadline := time.Now().Add(15 * time.Second)
	for {
		p, err := client.CoreV1().Pods(e.name).Get(ctx, "waiting", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != "" {
			t.Logf("rejected pod bound %s after the policy's ConfigMap changed", time.Since(start).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the rejected pod was not retried within 15s of the policy reload")
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.waitLog(`"Requeued pods rejected by the previous module" policy="gate" pods=1`, 1, 5*time.Second)
}
