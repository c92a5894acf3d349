package node

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmsched/wasmsched/internal/controlplane"
	"github.com/wasmsched/wasmsched/internal/testnode"
)

// The chart as an operator installs it: helm install with its defaults but
// one replica (the defaults' two replicas are spread over two nodes by a
// required anti-affinity), the image make image built under the name the
// chart picks for this cluster's minor, the example policies from
// ConfigMaps. The scheduler pod becomes Ready through its own probes as
// the image's non-root user with a read-only root filesystem, and a pod
// that names its scheduler runs on the node.
func TestChartRunsTheScheduler(t *testing.T) {
	ctx := context.Background()
	helmBin := filepath.Join(root, ".cache", "tools", "bin", "helm")
	if _, err := os.Stat(helmBin); err != nil {
		t.Fatalf("%s missing: run hack/install-tools.sh helm (make test-node does)", helmBin)
	}
	const ns = "wasmsched"
	namespace(t, ns)
	for name, file := range map[string]string{"policy-team-isolation": "team-isolation.wasm", "policy-bin-packing": "bin-packing.wasm"} {
		b, err := os.ReadFile(filepath.Join(root, "_output", "guests", "tinygo", file))
		if err != nil {
			t.Fatalf("%v (make guests-tinygo builds it)", err)
		}
		cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, BinaryData: map[string][]byte{"policy.wasm": b}}
		if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(helmBin, "install", "wasmsched", filepath.Join(root, "manifests", "charts", "wasmsched"),
		"--namespace", ns, "--kubeconfig", cp.AdminKubeconfig, "--set", "replicas=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	var dep *appsv1.Deployment
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var err error
		if dep, err = client.AppsV1().Deployments(ns).Get(ctx, "wasmsched", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		if dep.Status.ReadyReplicas == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=wasmsched"})
	if err != nil {
		t.Fatal(err)
	}
	if dep.Status.ReadyReplicas != 1 {
		var b strings.Builder
		for _, p := range pods.Items {
			b.WriteString(p.Name + ": " + string(p.Status.Phase) + " " + describe(p) + "\n" + logsOf(p.Namespace, p.Name) + "\n")
		}
		t.Fatalf("the scheduler Deployment has %d ready replicas after 3m:\n%s\nkubelet:\n%s", dep.Status.ReadyReplicas, b.String(), node.LogTail("kubelet"))
	}
	t.Logf("scheduler pod %s ready", pods.Items[0].Name)

	// A pod of the shared pool (no team label, as the node) runs; a team's
	// pod is refused with team-isolation's reason in its event.
	apps := namespace(t, "apps")
	for name, labels := range map[string]map[string]string{"shared": nil, "team-a": {"team": "a"}} {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: apps, Labels: labels},
			Spec: v1.PodSpec{SchedulerName: "wasmsched", Containers: []v1.Container{{Name: "c", Image: testnode.SandboxImage, ImagePullPolicy: v1.PullNever}}}}
		if _, err := client.CoreV1().Pods(apps).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var running bool
	var refused string
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline) && (!running || refused == ""); time.Sleep(500 * time.Millisecond) {
		if p, err := client.CoreV1().Pods(apps).Get(ctx, "shared", metav1.GetOptions{}); err == nil {
			running = p.Status.Phase == v1.PodRunning && p.Spec.NodeName == node.Name
		}
		evs, err := client.CoreV1().Events(apps).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=team-a,reason=FailedScheduling"})
		if err == nil && len(evs.Items) > 0 {
			refused = evs.Items[0].Message
		}
	}
	if !running {
		t.Fatalf("the shared pool's pod is not Running on %s after 90s", node.Name)
	}
	if !strings.Contains(refused, "WasmPolicy/team-isolation") {
		t.Fatalf("team-a's FailedScheduling event %q does not name WasmPolicy/team-isolation", refused)
	}
	t.Logf("shared pod running on %s; team-a refused: %s", node.Name, refused)
	sched := pods.Items[0]

	// kubectl logs shows the scheduler's structured lines.
	logs := kubectlLogs(ns, sched.Name)
	if !strings.Contains(logs, `"Policy module active" policy="team-isolation"`) {
		t.Errorf("kubectl logs of %s has no structured \"Policy module active\" line:\n%s", sched.Name, logs)
	}
	// Its delegated authentication found the cluster's front-proxy CA.
	if strings.Contains(logs, "missing content for CA bundle") {
		t.Errorf("the scheduler could not load the cluster's request-header CA:\n%s", logs)
	}

	// The metrics endpoint answers through the pod's port (10259, the
	// pod's IP on the node's bridge), to a client the scheduler's
	// delegated authorization lets read it.
	sched2, err := client.CoreV1().Pods(ns).Get(ctx, sched.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := getWithToken(ctx, "https://"+sched2.Status.PodIP+":10259/metrics", cp.RestConfig(controlplane.AdminUser).BearerToken)
	if err != nil {
		t.Fatalf("metrics through the pod's port: %v", err)
	}
	if !strings.Contains(metrics, `wasmsched_policy_evaluations_total{`) || !strings.Contains(metrics, `policy="team-isolation"`) {
		t.Errorf("the pod's /metrics has no wasmsched_policy_evaluations_total for team-isolation")
	}

	// The policy's ConfigMap replaced in the cluster takes effect without
	// a restart: with bin-packing's module in team-isolation's place
	// nothing filters teams, and the refused pod is placed.
	b, err := os.ReadFile(filepath.Join(root, "_output", "guests", "tinygo", "bin-packing.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, "policy-team-isolation", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.BinaryData["policy.wasm"] = b
	if _, err := client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var teamPod *v1.Pod
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if teamPod, err = client.CoreV1().Pods(apps).Get(ctx, "team-a", metav1.GetOptions{}); err == nil && teamPod.Status.Phase == v1.PodRunning {
			break
		}
	}
	if teamPod == nil || teamPod.Status.Phase != v1.PodRunning {
		t.Fatalf("team-a not Running 90s after its ConfigMap changed:\n%s", logsOf(ns, sched.Name))
	}
	after, err := client.CoreV1().Pods(ns).Get(ctx, sched.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rc := after.Status.ContainerStatuses[0].RestartCount; rc != 0 {
		t.Errorf("the scheduler restarted %d times; the ConfigMap change should reload in place", rc)
	}
	t.Logf("team-a running after the ConfigMap change, scheduler restarts 0")

	// The compilation cache survives the container's crash: the new
	// container finds the compiled modules its predecessor wrote in the
	// pod's cache volume and writes none again.
	cache := node.EmptyDir(string(sched.UID), "cache")
	before := cacheFiles(t, cache)
	if len(before) == 0 {
		t.Fatalf("the scheduler wrote nothing into its compilation cache %s", cache)
	}
	if err := node.KillContainer(ctx, after.Status.ContainerStatuses[0].ContainerID); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, sched.Name, metav1.GetOptions{})
		if err == nil && p.Status.ContainerStatuses[0].RestartCount == 1 && p.Status.ContainerStatuses[0].Ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the scheduler container was not back and Ready 2m after it was killed: %s", describe(*p))
		}
	}
	afterRestart := cacheFiles(t, cache)
	for name, mod := range before {
		if got, ok := afterRestart[name]; !ok || !got.Equal(mod) {
			t.Errorf("compiled module %s rewritten or gone after the restart (%v, then %v)", name, mod, got)
		}
	}
	if len(afterRestart) != len(before) {
		t.Errorf("%d files in the cache after the restart, %d before: the restart compiled again", len(afterRestart), len(before))
	}
	t.Logf("cache kept %d files; loads before the crash: %s; after: %s", len(before),
		loadDurations(kubectlLogs(ns, sched.Name, "--previous")), loadDurations(kubectlLogs(ns, sched.Name)))
}

// cacheFiles lists the regular files under dir with their modification times.
func cacheFiles(t *testing.T, dir string) map[string]time.Time {
	t.Helper()
	out := map[string]time.Time{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out[path] = info.ModTime()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// loadDurations is each "Policy module loaded" line's policy and duration.
func loadDurations(logs string) string {
	var parts []string
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, `"Policy module loaded"`) {
			continue
		}
		var policy, d string
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "policy="); ok {
				policy = strings.Trim(v, `"`)
			}
			if v, ok := strings.CutPrefix(f, "duration="); ok {
				d = strings.Trim(v, `"`)
			}
		}
		parts = append(parts, policy+" "+d)
	}
	return strings.Join(parts, ", ")
}

// getWithToken GETs url with a bearer token, not verifying the serving
// certificate (the scheduler's is self-signed), and returns the body of a
// 200.
func getWithToken(ctx context.Context, url, token string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, body)
	}
	return string(body), nil
}

// describe is a pod's conditions and container states, for a failure.
func describe(p v1.Pod) string {
	var b strings.Builder
	for _, c := range p.Status.Conditions {
		b.WriteString(string(c.Type) + "=" + string(c.Status) + " " + c.Reason + " " + c.Message + "; ")
	}
	for _, c := range p.Status.ContainerStatuses {
		if w := c.State.Waiting; w != nil {
			b.WriteString(c.Name + " waiting: " + w.Reason + " " + w.Message + "; ")
		}
		if x := c.State.Terminated; x != nil {
			b.WriteString(c.Name + " terminated: " + x.Reason + " " + x.Message + "; ")
		}
		if x := c.LastTerminationState.Terminated; x != nil {
			b.WriteString(c.Name + " last terminated: " + x.Reason + "; ")
		}
	}
	return b.String()
}

// logsOf is the end of kubectl logs of a pod (its previous container's
// too), for a failure.
func logsOf(ns, name string) string {
	return kubectlLogs(ns, name, "--tail", "40") + "\n(previous) " + kubectlLogs(ns, name, "--previous", "--tail", "20")
}

// kubectlLogs is kubectl logs of a pod, with its error if any.
func kubectlLogs(ns, name string, flags ...string) string {
	_, _, kubectl, err := controlplane.Binaries(controlplane.BinDir(root))
	if err != nil {
		return err.Error()
	}
	out, _ := exec.Command(kubectl, append([]string{"--kubeconfig", cp.AdminKubeconfig, "-n", ns, "logs", name}, flags...)...).CombinedOutput()
	return string(out)
}
