package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/controlplane"
)

// The unmodified upstream kube-scheduler (at the control plane's version) calls bin/wasm-extender:
// pods land per policy with nodeCacheCapable true and false, a rejected
// pod's FailedScheduling carries the policy's reason, and a policy reload
// takes effect through the extender.
func TestExtenderWithUpstreamScheduler(t *testing.T) {
	e := newEnv(t, "extender")
	e.node("team-a", map[string]string{"team": "a"}, "4")
	e.node("shared-1", nil, "4")
	e.node("shared-2", nil, "4")
	e.policyConfigMap("team", module(t, "team-isolation"))
	e.policyConfigMap("placement", module(t, "bin-packing"))

	// The extender, with the same args the plugin takes.
	args := filepath.Join(e.dir, "policies.yaml")
	if err := os.WriteFile(args, []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: WasmPolicyArgs
compilationCacheDir: `+filepath.Join(e.dir, "ext-cache")+`
policies:
- name: team-isolation
  source: `+cmSource(e, "team")+`
  config: key=team
- name: placement
  source: `+cmSource(e, "placement")+`
  config: cpu=1
`), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	extLog := filepath.Join(e.dir, "extender.log")
	logf, _ := os.Create(extLog)
	ext := exec.Command(filepath.Join(root, "bin", "wasm-extender"), "--config", args, "--kubeconfig", cp.SchedulerKubeconfig, "--listen", addr, "-v=2")
	ext.Stdout, ext.Stderr = logf, logf
	if err := ext.Start(); err != nil {
		t.Fatalf("starting bin/wasm-extender (make build): %v", err)
	}
	t.Cleanup(func() { _ = ext.Process.Kill() })
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil && resp.StatusCode == http.StatusOK {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(extLog)
			t.Fatalf("extender not healthy within 60s: %v\n%s", err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Two unmodified upstream schedulers, one per nodeCacheCapable mode.
	_, _, _, err = controlplane.Binaries(controlplane.BinDir(root))
	if err != nil {
		t.Fatal(err)
	}
	upstream := filepath.Join(controlplane.BinDir(root), "kube-scheduler-upstream")
	for _, mode := range []struct {
		name      string
		cacheable bool
	}{{"ext-cache", true}, {"ext-nocache", false}} {
		cfg := filepath.Join(e.dir, mode.name+".yaml")
		if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: %q, qps: 200, burst: 400}
leaderElection: {leaderElect: false}
profiles:
- schedulerName: %s
  plugins:
    score:
      disabled: [{name: "*"}]
extenders:
- urlPrefix: http://%s
  filterVerb: filter
  prioritizeVerb: prioritize
  weight: 1
  nodeCacheCapable: %v
  ignorable: false
  httpTimeout: 5s
`, cp.SchedulerKubeconfig, mode.name, addr, mode.cacheable)), 0o600); err != nil {
			t.Fatal(err)
		}
		logPath := filepath.Join(e.dir, mode.name+".log")
		lf, _ := os.Create(logPath)
		cmd := exec.Command(upstream, "--config", cfg, "--secure-port", "0", "--log-flush-frequency=100ms")
		cmd.Stdout, cmd.Stderr = lf, lf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
		e.log = logPath
		e.waitLog(`"Starting Kubernetes Scheduler"`, 1, 60*time.Second)
	}

	for _, sched := range []string{"ext-cache", "ext-nocache"} {
		a := sched + "-team-a"
		e.podFor(sched, a, map[string]string{"team": "a"}, "250m")
		if got := e.placed(a); got != "team-a" {
			t.Fatalf("%s: team a pod landed on %s", sched, got)
		}
		c := sched + "-team-c"
		e.podFor(sched, c, map[string]string{"team": "c"}, "250m")
		msg := e.rejected(c)
		t.Logf("%s: FailedScheduling: %s", sched, msg)
		for _, want := range []string{"rejected by WasmPolicy/team-isolation: team label mismatch", "rejected by WasmPolicy/team-isolation: node has no team label"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: FailedScheduling %q does not contain %q", sched, msg, want)
			}
		}
	}

	// bin-packing through the extender: shared pods pile onto one node...
	e.podFor("ext-cache", "pack-1", nil, "1")
	n1 := e.placed("pack-1")
	e.podFor("ext-cache", "pack-2", nil, "1")
	if n2 := e.placed("pack-2"); n2 != n1 {
		t.Fatalf("bin-packing via extender put pack-2 on %s, pack-1 is on %s", n2, n1)
	}
	// ...until the policy's ConfigMap switches to spread: reloaded in the extender.
	e.policyConfigMap("placement", module(t, "spread"))
	e.log = extLog
	e.waitLog(`"Policy module active" policy="placement"`, 2, 30*time.Second)
	e.podFor("ext-nocache", "spread-1", nil, "1")
	if n3 := e.placed("spread-1"); n3 == n1 {
		t.Fatalf("after the reload to spread, spread-1 still joined %s", n3)
	}

	// The policy metrics are on the extender's /metrics.
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`wasmsched_policy_module_loads_total{policy="placement",result="Success"} 2`,
		`wasmsched_policy_evaluations_total{extension_point="Filter",policy="team-isolation",result="Unschedulable"}`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// SIGTERM shuts it down cleanly.
	if err := ext.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ext.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("extender exited with %v after SIGTERM", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("extender did not exit within 20s of SIGTERM")
	}
	e.log = extLog
	e.waitLog("Shutting down: finishing requests in flight", 1, 5*time.Second)
}
