package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmsched/wasmsched/internal/controlplane"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

// wasmsched runs bin/wasmsched as the cluster admin and returns stdout.
func wasmsched(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return wasmschedEnv(t, nil, args...)
}

// wasmschedEnv runs bin/wasmsched as the cluster admin with env added to
// the test's environment, and returns stdout.
func wasmschedEnv(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	bin := filepath.Join(root, "bin", "wasmsched")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s missing: run make build", bin)
	}
	cmd := exec.Command(bin, append(args, "--kubeconfig", cp.AdminKubeconfig)...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("wasmsched %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), err
}

// The author and operator loop against the real apiserver: push a module
// (the printed snippet pins its sha256), schedule with it next to an
// audited policy, explain a pending pod, test against the live cluster, and
// scrape the scheduler's /metrics for every policy metric.
func TestCLIAndMetrics(t *testing.T) {
	e := newEnv(t, "cli")
	e.nodeWith("pay-1", map[string]string{"team": "payments"}, map[string]string{"maintenance.wasmsched.io/window": "CHG-7"}, "8")
	e.node("search-1", map[string]string{"team": "search"}, "8")
	ctx := context.Background()

	// push: creates the ConfigMap, prints the snippet with the sha256.
	team := testguests.Policy(t, testguests.TinyGo, "team-isolation")
	out, err := wasmsched(t, "push", team, "--configmap", policyNS+"/cli-team", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var pushed struct {
		SHA256, Snippet string
		Created         bool
	}
	if err := json.Unmarshal([]byte(out), &pushed); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	module, _ := os.ReadFile(team)
	cm, err := client.CoreV1().ConfigMaps(policyNS).Get(ctx, "cli-team", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !pushed.Created || cm.Annotations["wasmsched.io/sha256"] != pushed.SHA256 || !bytes.Equal(cm.BinaryData["policy.wasm"], module) {
		t.Fatalf("pushed %+v; ConfigMap annotations %v, %d bytes", pushed, cm.Annotations, len(cm.BinaryData["policy.wasm"]))
	}
	if !strings.Contains(pushed.Snippet, "sha256: "+pushed.SHA256) || !strings.Contains(pushed.Snippet, "name: cli-team, key: policy.wasm") {
		t.Fatalf("snippet:\n%s", pushed.Snippet)
	}
	// Pushing again updates it.
	if out, err := wasmsched(t, "push", team, "--configmap", policyNS+"/cli-team"); err != nil || !strings.Contains(out, "Updated ConfigMap") {
		t.Fatalf("second push: %v\n%s", err, out)
	}
	if _, err := wasmsched(t, "push", filepath.Join(root, "host", "testdata", "pathopen.wasm"), "--configmap", policyNS+"/cli-bad"); err == nil || !strings.Contains(err.Error(), "not pushing") {
		t.Fatalf("an invalid module was pushed: %v", err)
	}
	if _, err := wasmsched(t, "push", testguests.Policy(t, testguests.TinyGo, "maintenance-avoidance"), "--configmap", policyNS+"/cli-maintenance"); err != nil {
		t.Fatal(err)
	}

	// The snippet goes into the scheduler's config as printed.
	var policies strings.Builder
	for _, l := range strings.Split(strings.TrimRight(pushed.Snippet, "\n"), "\n") {
		policies.WriteString("      " + l + "\n")
	}
	policies.WriteString(`      - name: maintenance
        mode: Audit
        source: {configMap: {namespace: ` + policyNS + `, name: cli-maintenance, key: policy.wasm}}
`)
	cfgPath := e.writeConfig(policies.String(), "leaderElection: {leaderElect: false}")
	port := freePort(t)
	e.log = filepath.Join(e.dir, "kube-scheduler.log")
	e.sched = e.runArgs(e.log, "--config", cfgPath, "--secure-port", fmt.Sprint(port), "--bind-address", "127.0.0.1",
		"--authorization-always-allow-paths", "/metrics,/healthz", "-v=2", "--log-flush-frequency=100ms")
	e.waitLog(`"Policy module active" policy="maintenance"`, 1, 60*time.Second)
	e.waitLog(`"Policy module active" policy="team-isolation"`, 1, 60*time.Second)

	// Audit: the pod lands on pay-1, which the audited policy would reject.
	e.pod("checkout", map[string]string{"team": "payments"}, "500m")
	if n := e.placed("checkout"); n != "pay-1" {
		t.Fatalf("checkout on %s", n)
	}
	audit := e.waitEvent(e.name, "checkout", "WasmPolicyAudit", "")
	if !strings.Contains(audit, "WasmPolicy/maintenance (Audit) would have rejected the chosen node cli-pay-1: node is in maintenance") {
		t.Fatalf("audit event %q", audit)
	}

	// explain: a pod no policy admits.
	e.pod("stray", map[string]string{"team": "nobody"}, "500m")
	e.rejected("stray")
	out, err = wasmsched(t, "explain", "cli/stray", "--scheduler-config", cfgPath, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var ex wasmpolicy.Explanation
	if err := json.Unmarshal([]byte(out), &ex); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	mine := map[string]wasmpolicy.NodeExplanation{}
	for _, n := range ex.Nodes {
		if strings.HasPrefix(n.Node, "cli-") {
			mine[n.Node] = n
		}
	}
	if len(mine) != 2 {
		t.Fatalf("explanation lacks the test's nodes: %s", out)
	}
	for _, n := range mine {
		if n.Feasible || !strings.Contains(n.Reason, "WasmPolicy/team-isolation: team label mismatch") || len(n.Policies) != 2 {
			t.Errorf("%s: %+v", n.Node, n)
		}
	}
	if m := mine["cli-pay-1"].Policies[1]; m.Mode != "Audit" || m.Verdict != "Unschedulable" || !strings.Contains(m.Reason, "CHG-7") {
		t.Errorf("audited policy on pay-1: %+v", m)
	}
	table, err := wasmsched(t, "explain", "cli/stray", "--scheduler-config", cfgPath)
	if err != nil || !strings.Contains(table, "Pod cli/stray (pending)") || !strings.Contains(table, "maintenance (audit)") {
		t.Fatalf("explain table: %v\n%s", err, table)
	}

	// test --kubeconfig: a live snapshot.
	podFile := filepath.Join(e.dir, "pod.yaml")
	if err := os.WriteFile(podFile, []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: probe, namespace: cli, labels: {team: search}}\nspec: {containers: [{name: c, image: x}]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = wasmsched(t, "test", "--policy", team, "--pod", podFile, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	ex = wasmpolicy.Explanation{}
	if err := json.Unmarshal([]byte(out), &ex); err != nil {
		t.Fatal(err)
	}
	verdicts := map[string]bool{}
	for _, n := range ex.Nodes {
		verdicts[n.Node] = n.Feasible
	}
	if f, ok := verdicts["cli-search-1"]; !ok || !f || verdicts["cli-pay-1"] {
		t.Fatalf("live snapshot verdicts %v", verdicts)
	}

	// /metrics: every policy metric, labelled by policy.
	metrics := scrape(t, port)
	for _, want := range []string{
		`wasmsched_policy_evaluations_total{extension_point="Filter",policy="team-isolation",result="Unschedulable"}`,
		`wasmsched_policy_evaluations_total{extension_point="Filter",policy="team-isolation",result="Success"}`,
		`wasmsched_policy_call_duration_seconds_bucket{extension_point="Filter",policy="team-isolation",le=`,
		`wasmsched_policy_evaluations_total{extension_point="Filter",policy="team-isolation",result="Timeout"} 0`,
		`wasmsched_policy_evaluations_total{extension_point="Filter",policy="team-isolation",result="Trap"} 0`,
		`wasmsched_policy_instances{policy="team-isolation",state="idle"}`,
		`wasmsched_policy_instances{policy="team-isolation",state="in_use"} 0`,
		`wasmsched_policy_pool_size{policy="team-isolation"} 16`,
		`wasmsched_policy_memory_pages{policy="team-isolation"}`,
		`wasmsched_policy_module_loads_total{policy="team-isolation",result="Success"} 1`,
		`wasmsched_policy_module_load_duration_seconds_count{policy="team-isolation",result="Success"} 1`,
		`wasmsched_policy_module_info{policy="team-isolation",sha256="` + pushed.SHA256 + `"} 1`,
		`wasmsched_policy_audit_verdicts_total{extension_point="Filter",policy="maintenance",result="Unschedulable"}`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("wasmsched metrics:\n%s", grep(metrics, "wasmsched_"))
	}
}

func (e *env) runArgs(logPath string, args ...string) *exec.Cmd {
	e.t.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		e.t.Fatal(err)
	}
	cmd := exec.Command(controlplane.SchedulerBinary(root), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	return cmd
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func scrape(t *testing.T, port int) string {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // the scheduler's self-signed serving cert
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := c.Get(fmt.Sprintf("https://127.0.0.1:%d/metrics", port))
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return string(b)
			}
			err = fmt.Errorf("%s: %s", resp.Status, b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("scraping /metrics: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
