package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmsched/wasmsched/internal/controlplane"
)

// teamShipsAPolicy is the last act: team-payments, a namespace of the
// payments team, caps its own pods at one per node with a SchedulingPolicy
// it ships itself, while the scheduler runs.
func teamShipsAPolicy(ctx context.Context, c kubernetes.Interface, root, kubectl string, cp *controlplane.ControlPlane, logPath string) error {
	const team = "team-payments"
	step("A team ships its own policy, live: " + team + " caps its pods at one per node with a SchedulingPolicy (no scheduler restart)")
	if _, err := c.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: team}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	// What the namespace's admins grant once (manifests/examples/team).
	if err := controlplane.GrantModuleRead(ctx, c, team, controlplane.SchedulerUser); err != nil {
		return err
	}
	wasm := filepath.Join(root, "_output", "guests", "tinygo", "team-pod-cap.wasm")
	push := exec.Command(filepath.Join(root, "bin", "wasmsched"), "push", wasm, "--configmap", team+"/policy-replica-cap",
		"--object", "SchedulingPolicy", "--name", "replica-cap", "--kubeconfig", cp.AdminKubeconfig)
	out, err := push.CombinedOutput()
	if err != nil {
		return fmt.Errorf("wasmsched push: %v\n%s", err, out)
	}
	fmt.Printf("   $ wasmsched push team-pod-cap.wasm --configmap %s/policy-replica-cap --object SchedulingPolicy --name replica-cap\n", team)
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fmt.Println("     " + l)
	}
	spec := `{"spec":{"config":"key=team,max=1","reads":["NodePods"]}}`
	if out, err := exec.Command(kubectl, "--kubeconfig", cp.AdminKubeconfig, "-n", team, "patch", "schedulingpolicy", "replica-cap", "--type", "merge", "-p", spec).CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl patch: %v\n%s", err, out)
	}
	fmt.Printf("   $ kubectl -n %s patch schedulingpolicy replica-cap --type merge -p '%s'\n", team, spec)
	if err := waitForLog(logPath, `"Policy object active" object="schedulingpolicy/`+team+`/replica-cap" policy="`+team+`/replica-cap" generation=2`, 30*time.Second); err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		out, _ := exec.Command(kubectl, "--kubeconfig", cp.AdminKubeconfig, "-n", team, "get", "schedulingpolicy", "replica-cap", "-o", "jsonpath={.status.observedGeneration}").Output()
		if string(out) == "2" {
			break
		}
	}
	out, err = exec.Command(kubectl, "--kubeconfig", cp.AdminKubeconfig, "-n", team, "get", "schedulingpolicies").CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl get: %v\n%s", err, out)
	}
	fmt.Printf("   $ kubectl -n %s get schedulingpolicies\n", team)
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fmt.Println("     " + l)
	}
	fmt.Printf("\n   Pods of %s (the policy applies):\n", team)
	teamPods := []*v1.Pod{
		pod("ledger-1", map[string]string{"team": "payments"}, "250m", "256Mi", 0),
		pod("ledger-2", map[string]string{"team": "payments"}, "250m", "256Mi", 0),
	}
	for _, p := range teamPods {
		p.Namespace = team
	}
	if err := submit(ctx, c, teamPods); err != nil {
		return err
	}
	if err := show(ctx, c, team, teamPods); err != nil {
		return err
	}
	fmt.Printf("\n   Pods of %s (another namespace: the policy does not apply):\n", ns)
	other := []*v1.Pod{pod("payments-api-4", map[string]string{"team": "payments"}, "250m", "256Mi", 0)}
	if err := submit(ctx, c, other); err != nil {
		return err
	}
	return show(ctx, c, ns, other)
}

// gatesAndPatches is the act of PreEnqueue and PreBind policies: a change
// freeze holds the checkout pods until one is approved, and every pod
// bound from then on records its zone and the policy versions that
// placed it, all shipped as ClusterSchedulingPolicies while the scheduler
// runs.
func gatesAndPatches(ctx context.Context, c kubernetes.Interface, root, kubectl string, cp *controlplane.ControlPlane, logPath string) error {
	step("Gates and patches, live: a change freeze holds checkout pods until approved (PreEnqueue), and bound pods record where they went and why (PreBind)")
	for _, name := range []string{"freeze-window", "placement-recorder"} {
		b, err := os.ReadFile(filepath.Join(root, "_output", "guests", "tinygo", name+".wasm"))
		if err != nil {
			return err
		}
		if err := putPolicy(ctx, c, "policy-"+name, b); err != nil {
			return err
		}
	}
	// The scheduler may patch pods (manifests/base/rbac.yaml grants its
	// ServiceAccount the same).
	if err := controlplane.GrantPodPatch(ctx, c, controlplane.SchedulerUser); err != nil {
		return err
	}
	now := time.Now().UTC()
	doc := fmt.Sprintf(`apiVersion: policy.wasmsched.io/v1alpha1
kind: ClusterSchedulingPolicy
metadata: {name: checkout-freeze}
spec:
  source: {configMap: {namespace: %[1]s, name: policy-freeze-window, key: policy.wasm}}
  config: start=%[2]s,end=%[3]s,reason=demo release freeze
  realClock: true
  profiles: [%[4]s]
  podSelector: {matchLabels: {app: checkout}}
---
apiVersion: policy.wasmsched.io/v1alpha1
kind: ClusterSchedulingPolicy
metadata: {name: placement-audit}
spec:
  source: {configMap: {namespace: %[1]s, name: policy-placement-recorder, key: policy.wasm}}
  patchPrefixes: [placement.wasmsched.io/]
  profiles: [%[4]s]
`, policyNS, now.Add(-time.Hour).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339), schedulerName)
	cmd := exec.Command(kubectl, "--kubeconfig", cp.AdminKubeconfig, "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(doc)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl apply: %v\n%s", err, out)
	}
	fmt.Println("   $ kubectl apply -f - # ClusterSchedulingPolicy checkout-freeze (freeze-window, app=checkout, the next hour)")
	fmt.Println("                        # ClusterSchedulingPolicy placement-audit (placement-recorder, patchPrefixes: [placement.wasmsched.io/])")
	for _, name := range []string{"checkout-freeze", "placement-audit"} {
		if err := waitForLog(logPath, `"Policy object active" object="clusterschedulingpolicy/`+name+`"`, 30*time.Second); err != nil {
			return err
		}
	}
	approved := pod("checkout-hotfix", map[string]string{"app": "checkout"}, "250m", "256Mi", 0)
	approved.Annotations = map[string]string{"freeze.wasmsched.io/approved": "true"}
	pods := []*v1.Pod{
		pod("checkout-1", map[string]string{"app": "checkout"}, "250m", "256Mi", 0),
		approved,
		pod("web-3", nil, "250m", "256Mi", 0),
	}
	if err := submit(ctx, c, pods); err != nil {
		return err
	}
	if err := show(ctx, c, ns, pods); err != nil {
		return err
	}
	if err := recorded(ctx, c, pods); err != nil {
		return err
	}
	fmt.Printf("\n   $ kubectl -n %s annotate pod checkout-1 freeze.wasmsched.io/approved=true\n", ns)
	if out, err := exec.Command(kubectl, "--kubeconfig", cp.AdminKubeconfig, "-n", ns, "annotate", "pod", "checkout-1", "freeze.wasmsched.io/approved=true").CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl annotate: %v\n%s", err, out)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if p, err := c.CoreV1().Pods(ns).Get(ctx, "checkout-1", metav1.GetOptions{}); err == nil && p.Spec.NodeName != "" {
			break
		}
	}
	if err := show(ctx, c, ns, pods[:1]); err != nil {
		return err
	}
	return recorded(ctx, c, pods[:1])
}

// recorded prints what placement-recorder wrote on the bound pods.
func recorded(ctx context.Context, c kubernetes.Interface, pods []*v1.Pod) error {
	fmt.Println()
	for _, want := range pods {
		p, err := c.CoreV1().Pods(ns).Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Spec.NodeName == "" {
			continue
		}
		// The digests, shortened for the terminal.
		policies := regexp.MustCompile(`sha256:([0-9a-f]{12})[0-9a-f]{52}`).ReplaceAllString(p.Annotations["placement.wasmsched.io/policies"], "sha256:$1…")
		fmt.Printf("   %s: label placement.wasmsched.io/zone=%s\n     annotation placement.wasmsched.io/policies=%s\n", p.Name, p.Labels["placement.wasmsched.io/zone"], policies)
	}
	return nil
}

// rolloutReport asks, before changing team-isolation's config, what the
// change would do to the cluster as it is now: which running pods it would
// reject where they run, which pending pods it would unblock or strand, and
// where recently bound pods would go instead.
func rolloutReport(root, schedulerConfig string, cp *controlplane.ControlPlane) error {
	const candidate = "key=team,spill=true,require=true"
	step("Before a change goes live: what would team-isolation with " + candidate + " do to the cluster as it is? (wasmsched rollout-report, read-only)")
	cmd := exec.Command(filepath.Join(root, "bin", "wasmsched"), "rollout-report", "--scheduler-config", schedulerConfig,
		"--policy", "team-isolation", "--config", candidate, "--fail-on", "rejected-running>0", "--kubeconfig", cp.AdminKubeconfig)
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 3) {
		msg := ""
		if exit != nil {
			msg = string(exit.Stderr)
		}
		return fmt.Errorf("wasmsched rollout-report: %v\n%s%s", err, out, msg)
	}
	fmt.Printf("   $ wasmsched rollout-report --scheduler-config kube-scheduler.yaml --policy team-isolation --config '%s' --fail-on 'rejected-running>0'\n", candidate)
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		fmt.Println("     " + l)
	}
	if exit != nil {
		fmt.Printf("   exit code %d: the gate rejected-running>0 holds, so a pipeline would stop here; the config stays as it is\n", exit.ExitCode())
	}
	return nil
}
