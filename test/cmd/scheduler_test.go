// Package cmd checks the bin/kube-scheduler binary the way an operator meets
// it: --version, a valid WasmPolicy config that starts and loads policies,
// and invalid args that stop it with field paths.
package cmd

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/controlplane"
	"github.com/wasmsched/wasmsched/internal/testguests"
)

func binary(t *testing.T) string {
	t.Helper()
	root, err := testguests.Root()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "bin", "kube-scheduler")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s missing: run `make build` first (make test does)", p)
	}
	return p
}

const kubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`

func writeConfig(t *testing.T, dir, args string) string {
	t.Helper()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := controlplane.DefaultProfileConfig(kc, args)
	p := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// kubeVersion is the Kubernetes version go.mod pins, which the binary reports.
func kubeVersion(t *testing.T) string {
	t.Helper()
	root, err := testguests.Root()
	if err != nil {
		t.Fatal(err)
	}
	return controlplane.ModuleVersion(root)
}

func TestVersion(t *testing.T) {
	out, err := exec.Command(binary(t), "--version").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "Kubernetes "+kubeVersion(t) {
		t.Fatalf("--version = %q, %v", out, err)
	}
}

// A valid config starts the scheduler and loads the policies, TinyGo and Go.
func TestStartsWithWasmPolicy(t *testing.T) {
	dir := t.TempDir()
	team := testguests.Policy(t, testguests.TinyGo, "team-isolation")
	pack := testguests.Policy(t, testguests.Go, "bin-packing")
	cfg := writeConfig(t, dir, `      compilationCacheDir: `+filepath.Join(dir, "cache")+`
      policies:
      - name: team-isolation
        source: {file: `+team+`}
        config: key=team
      - name: bin-packing
        source: {file: `+pack+`}
`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), "--config", cfg, "--secure-port", "0", "-v=2")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	want := map[string]bool{
		`"Policy module active" policy="team-isolation"`:                   false,
		`"Policy module active" policy="bin-packing"`:                      false,
		`"Starting Kubernetes Scheduler" version="` + kubeVersion(t) + `"`: false,
	}
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var problems []string
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "rejected") || strings.Contains(line, "failed") {
			problems = append(problems, line)
		}
		missing := 0
		for w := range want {
			if strings.Contains(line, w) {
				want[w] = true
				t.Log(line)
			}
			if !want[w] {
				missing++
			}
		}
		if missing == 0 {
			go func() { _, _ = io.Copy(io.Discard, stderr) }()
			return
		}
	}
	t.Fatalf("scheduler exited or timed out before logging all of %v; problems logged:\n%s\n(a stale bin/kube-scheduler refuses newer guests: run make build)", want, strings.Join(problems, "\n"))
}

// Invalid args stop the scheduler at startup with field paths and fixes.
func TestInvalidArgsExitWithFieldPath(t *testing.T) {
	cfg := writeConfig(t, t.TempDir(), `      policies:
      - name: ok
        source: {file: /policies/ok.wasm}
      - name: broken
        source: {}
        memoryLimit: 1Ki
`)
	out, err := exec.Command(binary(t), "--config", cfg, "--secure-port", "0").CombinedOutput()
	var ee *exec.ExitError
	if err == nil || !errorsAs(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("exit = %v, want status 1\n%s", err, out)
	}
	for _, want := range []string{
		"profiles[0].pluginConfig[0].args.policies[1].source: Invalid value: \\\"{}\\\": exactly one of file, configMap or oci must be set",
		"profiles[0].pluginConfig[0].args.policies[1].memoryLimit: Invalid value: 1024: must be between 64Ki and 4Gi",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output does not contain %s:\n%s", want, out)
		}
	}
}

func errorsAs(err error, target **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	if ok {
		*target = e
	}
	return ok
}
