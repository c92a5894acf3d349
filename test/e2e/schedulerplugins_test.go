package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/controlplane"
)

// The scheduler under test registers exactly the sigs.k8s.io/scheduler-plugins
// plugins its build line's generated registration lists
// (cmd/kube-scheduler/zz_generated.schedulerplugins*.go, chosen by the
// Kubernetes version the binary reports). Where NodeResourcesAllocatable is
// registered, it runs in one profile with WasmPolicy and decides placement
// (mode Least, its default: the node with less allocatable wins); where it is
// not, the scheduler refuses the same configuration and names the plugin.
func TestSchedulerPluginsOfTheBuild(t *testing.T) {
	bin := controlplane.SchedulerBinary(root)
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", bin, err)
	}
	version := strings.TrimPrefix(strings.TrimSpace(string(out)), "Kubernetes ")
	registered := registeredSchedulerPlugins(t, version)

	e := newEnv(t, "schedulerplugins")
	e.node("small", nil, "2")
	e.node("big", nil, "16")
	e.policyConfigMap("team", module(t, "team-isolation"))
	cfg := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: %q, qps: 200, burst: 400}
leaderElection: {leaderElect: false}
profiles:
- schedulerName: %s
  plugins:
    multiPoint:
      enabled: [{name: WasmPolicy}]
    score:
      disabled: [{name: "*"}]
      enabled: [{name: NodeResourcesAllocatable, weight: 10}]
  pluginConfig:
  - name: WasmPolicy
    args:
      compilationCacheDir: %q
      policies:
      - name: team-isolation
        source: %s
        config: key=team
`, cp.SchedulerKubeconfig, e.name, filepath.Join(e.dir, "cache"), cmSource(e, "team"))
	path := filepath.Join(e.dir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	if !registered["pkg/noderesources"] {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, "--config", path, "--secure-port", "0").CombinedOutput()
		if err == nil || ctx.Err() != nil || !strings.Contains(string(out), "NodeResourcesAllocatable") {
			t.Fatalf("%s (Kubernetes %s, NodeResourcesAllocatable not registered) with a profile enabling it: err=%v, want an exit naming the plugin; output tail:\n%s",
				bin, version, err, tail(out, 2000))
		}
		return
	}
	e.log = filepath.Join(e.dir, "kube-scheduler.log")
	e.sched = e.run(path, e.log)
	e.waitLog(`"Policy module active" policy="team-isolation"`, 1, 60*time.Second)
	for _, name := range []string{"web-1", "web-2"} {
		e.pod(name, nil, "100m")
		if got := e.placed(name); got != "small" {
			t.Fatalf("%s landed on %s; NodeResourcesAllocatable (Least) prefers the node with less allocatable, small", name, got)
		}
	}
	e.pod("analytics", map[string]string{"team": "analytics"}, "100m")
	if msg := e.rejected("analytics"); !strings.Contains(msg, "rejected by WasmPolicy/team-isolation") {
		t.Fatalf("FailedScheduling = %q, want WasmPolicy/team-isolation to reject it in the same profile", msg)
	}
}

// registeredSchedulerPlugins reads the generated registration whose
// Kubernetes version is version and returns its registered packages.
func registeredSchedulerPlugins(t *testing.T, version string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "cmd", "kube-scheduler", "zz_generated.schedulerplugins*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no generated scheduler-plugins registration: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "\n// Kubernetes: "+version+"\n") {
			continue
		}
		reg := map[string]bool{}
		for _, l := range strings.Split(string(b), "\n") {
			if p, ok := strings.CutPrefix(l, "// registered: "); ok {
				reg[p] = true
			}
		}
		return reg
	}
	t.Fatalf("no generated registration is for Kubernetes %s (%v): rebuild the scheduler or run hack/bump-k8s.sh", version, files)
	return nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
