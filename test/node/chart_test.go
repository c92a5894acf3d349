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

// The chart as an operator installs it: helm install with its defaults
// (two replicas spread over the two Nodes by a required anti-affinity,
// leader election), the image make image built under the name the chart
// picks for this cluster's minor, the example policies from ConfigMaps.
// Then, on that installation, what an operator meets next: probes,
// the non-root user and read-only root filesystem, placement and refusal
// of real pods, logs and metrics, policies changed in the cluster, the
// leader's container killed and the leader's pod deleted.
func TestChartRunsTheScheduler(t *testing.T) {
	ctx := context.Background()
	helmBin := filepath.Join(root, ".cache", "tools", "bin", "helm")
	if _, err := os.Stat(helmBin); err != nil {
		t.Fatalf("%s missing: run hack/install-tools.sh helm (make test-node does)", helmBin)
	}
	const ns = "wasmsched"
	namespace(t, ns)
	for name, file := range map[string]string{"policy-team-isolation": "team-isolation.wasm", "policy-bin-packing": "bin-packing.wasm"} {
		cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, BinaryData: map[string][]byte{"policy.wasm": guest(t, file)}}
		if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(helmBin, "install", "wasmsched", filepath.Join(root, "manifests", "charts", "wasmsched"),
		"--namespace", ns, "--kubeconfig", cp.AdminKubeconfig)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	// Uninstalled as an operator would, with the CRDs helm leaves, so that
	// the kustomize base installs the same objects afresh.
	t.Cleanup(func() {
		if out, err := exec.Command(helmBin, "uninstall", "wasmsched", "--namespace", ns, "--kubeconfig", cp.AdminKubeconfig, "--wait").CombinedOutput(); err != nil {
			t.Errorf("helm uninstall: %v\n%s", err, out)
		}
		kubectl(t, "delete", "namespace", ns, "apps", "team-a", "--wait", "--timeout=120s")
		kubectl(t, "delete", "-k", filepath.Join(root, "manifests", "crds"), "--wait", "--timeout=60s")
	})
	scheds := waitSchedulers(t, ns, 2, 3*time.Minute)
	if scheds[0].Spec.NodeName == scheds[1].Spec.NodeName {
		t.Errorf("both scheduler replicas run on %s: the chart's anti-affinity should spread them", scheds[0].Spec.NodeName)
	}
	for _, p := range scheds {
		checkHardened(t, p)
	}
	leader := leaseHolder(t, ns, "wasmsched")
	t.Logf("scheduler pods %s (%s) and %s (%s) ready; leader %s", scheds[0].Name, scheds[0].Spec.NodeName, scheds[1].Name, scheds[1].Spec.NodeName, leader)

	// A pod of the shared pool (no team label, as the nodes) runs; a
	// team's pod is refused with team-isolation's reason in its event.
	apps := namespace(t, "apps")
	t.Logf("shared pod running; team-a refused: %s", teamIsolationHolds(t, apps))

	lp := podOf(t, scheds, leader)
	// kubectl logs shows the scheduler's structured lines.
	logs := kubectlLogs(ns, lp.Name)
	if !strings.Contains(logs, `"Policy module active" policy="team-isolation"`) {
		t.Errorf("kubectl logs of %s has no structured \"Policy module active\" line:\n%s", lp.Name, logs)
	}
	// Its delegated authentication found the cluster's front-proxy CA.
	if strings.Contains(logs, "missing content for CA bundle") {
		t.Errorf("the scheduler could not load the cluster's request-header CA:\n%s", logs)
	}
	// The metrics endpoint answers through the pod's port (10259, the
	// pod's IP on the nodes' bridge), to a client the scheduler's
	// delegated authorization lets read it.
	metrics, err := getWithToken(ctx, "https://"+lp.Status.PodIP+":10259/metrics", cp.RestConfig(controlplane.AdminUser).BearerToken)
	if err != nil {
		t.Fatalf("metrics through the pod's port: %v", err)
	}
	if !strings.Contains(metrics, `wasmsched_policy_evaluations_total{`) || !strings.Contains(metrics, `policy="team-isolation"`) {
		t.Errorf("the pod's /metrics has no wasmsched_policy_evaluations_total for team-isolation")
	}

	// The policy's ConfigMap replaced in the cluster takes effect without
	// a restart: with maintenance-avoidance's module in team-isolation's
	// place (its config options are all optional, so key=team is
	// harmless) nothing filters teams, and the refused pod is placed.
	cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, "policy-team-isolation", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.BinaryData["policy.wasm"] = guest(t, "maintenance-avoidance.wasm")
	if _, err := client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, apps, "team-a", 90*time.Second)
	checkNoRestarts(t, ns)
	t.Logf("team-a running after its ConfigMap changed; no scheduler restarted")

	// A team's SchedulingPolicy (manifests/examples/team) refuses its pod
	// and, changed in the cluster to Audit, lets it through: the running
	// replicas pick the object up and its change, with no restart.
	kubectl(t, "apply", "-f", filepath.Join(root, "manifests", "examples", "team", "team-a.yaml"))
	team := "team-a"
	cm = &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "policy-gate", Namespace: team}, BinaryData: map[string][]byte{"policy.wasm": guest(t, "team-isolation.wasm")}}
	if _, err := client.CoreV1().ConfigMaps(team).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubectlStdin(t, `apiVersion: policy.wasmsched.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: gate, namespace: team-a}
spec:
  source: {configMap: {name: policy-gate, key: policy.wasm}}
  config: key=team
  mode: Enforce
`, "apply", "-f", "-")
	waitPolicyReady(t, team, "gate", 1)
	// Ready is the status lease holder's word; the scheduling leader, which
	// may be the other replica, loads the object on its own and may still
	// be compiling it. A pod created before it has is scheduled without it.
	active := podOf(t, podsOf(t, ns), leaseHolder(t, ns, "wasmsched"))
	waitLogged(t, ns, active.Name, `"Policy object active" object="schedulingpolicy/team-a/gate"`, 60*time.Second)
	createPod(t, team, "team-pod", map[string]string{"team": "a"})
	refused := waitRefused(t, team, "team-pod", 90*time.Second)
	if !strings.Contains(refused, "WasmPolicy/team-a/gate") {
		t.Fatalf("team-pod's FailedScheduling event %q does not name WasmPolicy/team-a/gate", refused)
	}
	kubectl(t, "-n", team, "patch", "schedulingpolicy", "gate", "--type=merge", "-p", `{"spec":{"mode":"Audit"}}`)
	waitPolicyReady(t, team, "gate", 2)
	waitRunning(t, team, "team-pod", 90*time.Second)
	checkNoRestarts(t, ns)
	t.Logf("team-pod refused by the SchedulingPolicy (%s), running once it was switched to Audit; no scheduler restarted", refused)

	// The leader's container killed through the runtime, as a crash would:
	// the lease goes to a live replica once it expires, every pod created
	// meanwhile is bound once, and the killed container comes back Ready
	// in the same pod, finding the compiled modules its predecessor wrote
	// in the pod's cache volume (it writes none again).
	lp = podOf(t, podsOf(t, ns), leader)
	nd := nodeOf(t, lp)
	cache := nd.EmptyDir(string(lp.UID), "cache")
	before := cacheFiles(t, cache)
	if len(before) == 0 {
		t.Fatalf("the scheduler wrote nothing into its compilation cache %s", cache)
	}
	handover(t, apps, "kill", leader, func() {
		if err := nd.KillContainer(ctx, lp.Status.ContainerStatuses[0].ContainerID); err != nil {
			t.Fatal(err)
		}
	})
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, lp.Name, metav1.GetOptions{})
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
		loadDurations(kubectlLogs(ns, lp.Name, "--previous")), loadDurations(kubectlLogs(ns, lp.Name)))

	// The leader's pod deleted (gracefully, as a drain or a rollout does):
	// it gives the lease up as it stops, another replica takes it, every
	// pod created meanwhile is bound once, and the Deployment is whole
	// again on the freed Node.
	waitSchedulers(t, ns, 2, 2*time.Minute)
	leader = leaseHolder(t, ns, "wasmsched")
	lp = podOf(t, podsOf(t, ns), leader)
	handover(t, apps, "delete", leader, func() {
		if err := client.CoreV1().Pods(ns).Delete(ctx, lp.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	if holder := leaseHolder(t, ns, "wasmsched"); strings.HasPrefix(holder, lp.Name+"_") {
		t.Errorf("the deleted pod %s still holds the lease (%s)", lp.Name, holder)
	}
	waitSchedulers(t, ns, 2, 3*time.Minute)
}

// handover creates pods for the scheduler while do takes the leader
// (holder of the lease) down, waits until another identity holds the
// lease, and checks that every pod was bound exactly once: one Scheduled
// event, no FailedScheduling, a Node.
func handover(t *testing.T, ns, what, leader string, do func()) {
	t.Helper()
	ctx := context.Background()
	const pods = 10
	start := time.Now()
	var names []string
	created := make(chan struct{})
	go func() {
		defer close(created)
		for i := 0; i < pods; i++ {
			name := fmt.Sprintf("%s-%d", what, i)
			p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: v1.PodSpec{SchedulerName: "wasmsched", Containers: []v1.Container{{Name: "c", Image: testnode.SandboxImage, ImagePullPolicy: v1.PullNever}}}}
			if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Error(err)
				return
			}
			names = append(names, name)
			time.Sleep(time.Second)
		}
	}()
	time.Sleep(1500 * time.Millisecond)
	do()
	downAt := time.Now()
	var holder string
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if holder = leaseHolder(t, "wasmsched", "wasmsched"); holder != "" && holder != leader {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s of the leader: the lease is still %q 90s later", what, holder)
		}
	}
	took := time.Since(downAt)
	<-created
	for _, name := range names {
		var p *v1.Pod
		for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(500 * time.Millisecond) {
			var err error
			if p, err = client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
				t.Fatal(err)
			}
			if p.Spec.NodeName != "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s of the leader: pod %s not bound 90s later", what, name)
			}
		}
		var scheduled, failed int
		for deadline := time.Now().Add(10 * time.Second); scheduled == 0 && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			evs, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
			if err != nil {
				t.Fatal(err)
			}
			scheduled, failed = 0, 0
			for _, e := range evs.Items {
				switch e.Reason {
				case "Scheduled":
					scheduled += int(max(e.Count, 1))
				case "FailedScheduling":
					failed += int(max(e.Count, 1))
				}
			}
		}
		if scheduled != 1 || failed != 0 {
			t.Errorf("%s of the leader: pod %s has %d Scheduled and %d FailedScheduling events, want 1 and 0", what, name, scheduled, failed)
		}
	}
	t.Logf("%s of the leader %s: lease taken by %s %s later; %d pods created over %s all bound once", what, leader, holder, took.Round(100*time.Millisecond), len(names), time.Since(start).Round(time.Second))
}

// teamIsolationHolds creates a pod of the shared pool (no team label, as
// the nodes) and a pod of team a in ns, checks that the first runs and the
// second is refused with team-isolation's reason in its event, and returns
// that reason.
func teamIsolationHolds(t *testing.T, ns string) string {
	t.Helper()
	createPod(t, ns, "shared", nil)
	createPod(t, ns, "team-a", map[string]string{"team": "a"})
	waitRunning(t, ns, "shared", 90*time.Second)
	refused := waitRefused(t, ns, "team-a", 90*time.Second)
	if !strings.Contains(refused, "WasmPolicy/team-isolation") {
		t.Fatalf("team-a's FailedScheduling event %q does not name WasmPolicy/team-isolation", refused)
	}
	return refused
}

// waitSchedulers waits until the chart's Deployment has want ready
// replicas and returns its running pods.
func waitSchedulers(t *testing.T, ns string, want int32, timeout time.Duration) []v1.Pod {
	t.Helper()
	ctx := context.Background()
	var dep *appsv1.Deployment
	for deadline := time.Now().Add(timeout); ; time.Sleep(time.Second) {
		var err error
		if dep, err = client.AppsV1().Deployments(ns).Get(ctx, "wasmsched", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		if dep.Status.ReadyReplicas == want && dep.Status.Replicas == want || time.Now().After(deadline) {
			break
		}
	}
	pods := podsOf(t, ns)
	if dep.Status.ReadyReplicas != want || len(pods) != int(want) {
		var b strings.Builder
		for _, p := range pods {
			b.WriteString(p.Name + " on " + p.Spec.NodeName + ": " + string(p.Status.Phase) + " " + describe(p) + "\n" + logsOf(p.Namespace, p.Name) + "\n")
		}
		t.Fatalf("the scheduler Deployment has %d ready replicas (%d pods) after %s, want %d:\n%s", dep.Status.ReadyReplicas, len(pods), timeout, want, b.String())
	}
	return pods
}

// podsOf lists the chart's scheduler pods that are not being deleted.
func podsOf(t *testing.T, ns string) []v1.Pod {
	t.Helper()
	list, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=wasmsched"})
	if err != nil {
		t.Fatal(err)
	}
	var pods []v1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			pods = append(pods, p)
		}
	}
	return pods
}

// podOf is the pod among pods whose kube-scheduler holds identity (the
// pod's name, an underscore and a random suffix).
func podOf(t *testing.T, pods []v1.Pod, identity string) v1.Pod {
	t.Helper()
	for _, p := range pods {
		if strings.HasPrefix(identity, p.Name+"_") {
			return p
		}
	}
	t.Fatalf("no scheduler pod holds the identity %q", identity)
	return v1.Pod{}
}

// nodeOf is the cluster's Node a pod runs on.
func nodeOf(t *testing.T, p v1.Pod) *testnode.Node {
	t.Helper()
	for _, n := range cluster.Nodes {
		if n.Name == p.Spec.NodeName {
			return n
		}
	}
	t.Fatalf("pod %s runs on %q, no Node of the cluster", p.Name, p.Spec.NodeName)
	return nil
}

// leaseHolder is the holder of a Lease, "" when it has none.
func leaseHolder(t *testing.T, ns, name string) string {
	t.Helper()
	l, err := client.CoordinationV1().Leases(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("leader election lease %s/%s: %v", ns, name, err)
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// checkHardened checks, on the node, what the pod's security context
// promises: its kube-scheduler process runs as a non-root user, and its
// root filesystem is mounted read-only.
func checkHardened(t *testing.T, p v1.Pod) {
	t.Helper()
	pid, err := nodeOf(t, p).ContainerPID(context.Background(), p.Status.ContainerStatuses[0].ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" && f[1] == "0" {
			t.Errorf("scheduler pod %s runs as root: %s", p.Name, line)
		}
	}
	mounts, err := os.ReadFile(fmt.Sprintf("/proc/%d/mounts", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 3 && f[1] == "/" {
			if !strings.HasPrefix(f[3], "ro,") && f[3] != "ro" {
				t.Errorf("scheduler pod %s has a writable root filesystem: %s", p.Name, line)
			}
		}
	}
}

// checkNoRestarts fails if a scheduler container restarted.
func checkNoRestarts(t *testing.T, ns string) {
	t.Helper()
	for _, p := range podsOf(t, ns) {
		if rc := p.Status.ContainerStatuses[0].RestartCount; rc != 0 {
			t.Errorf("scheduler %s restarted %d times; a policy change should reload in place:\n%s", p.Name, rc, logsOf(ns, p.Name))
		}
	}
}

// createPod creates a pod for the wasmsched scheduler running the pause
// image.
func createPod(t *testing.T, ns, name string, labels map[string]string) {
	t.Helper()
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: v1.PodSpec{SchedulerName: "wasmsched", Containers: []v1.Container{{Name: "c", Image: testnode.SandboxImage, ImagePullPolicy: v1.PullNever}}}}
	if _, err := client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitRunning waits until a pod runs on one of the cluster's Nodes.
func waitRunning(t *testing.T, ns, name string, timeout time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(500 * time.Millisecond) {
		p, err := client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && p.Status.Phase == v1.PodRunning {
			return
		}
		if time.Now().After(deadline) {
			evs, _ := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
			var b strings.Builder
			if evs != nil {
				for _, e := range evs.Items {
					b.WriteString(e.Reason + ": " + e.Message + "\n")
				}
			}
			t.Fatalf("pod %s/%s not Running after %s; events:\n%s", ns, name, timeout, b.String())
		}
	}
}

// waitRefused waits for a pod's FailedScheduling event and returns its
// message.
func waitRefused(t *testing.T, ns, name string, timeout time.Duration) string {
	t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(500 * time.Millisecond) {
		evs, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=FailedScheduling"})
		if err == nil && len(evs.Items) > 0 {
			return evs.Items[0].Message
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s/%s has no FailedScheduling event after %s", ns, name, timeout)
		}
	}
}

// waitPolicyReady waits until a SchedulingPolicy's status says Ready for
// generation (as kubectl get shows it).
func waitPolicyReady(t *testing.T, ns, name string, generation int) {
	t.Helper()
	want := fmt.Sprintf("True %d", generation)
	var got string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		got = kubectl(t, "-n", ns, "get", "schedulingpolicy", name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.observedGeneration}`)
		if got == want {
			return
		}
	}
	t.Fatalf("SchedulingPolicy %s/%s: status %q after 60s, want %q:\n%s", ns, name, got, want, kubectl(t, "-n", ns, "get", "schedulingpolicy", name, "-o", "yaml"))
}

// waitLogged waits until kubectl logs of a pod has a line containing
// want.
func waitLogged(t *testing.T, ns, name, want string, timeout time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(time.Second) {
		if strings.Contains(kubectlLogs(ns, name), want) {
			return
		}
	}
	t.Fatalf("kubectl logs of %s has no line with %s after %s:\n%s", name, want, timeout, logsOf(ns, name))
}

// guest is a TinyGo example policy make guests-tinygo built.
func guest(t *testing.T, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "_output", "guests", "tinygo", file))
	if err != nil {
		t.Fatalf("%v (make guests-tinygo builds it)", err)
	}
	return b
}

// kubectl runs kubectl as the cluster's admin and returns its output.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	return kubectlStdin(t, "", args...)
}

func kubectlStdin(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	_, _, bin, err := controlplane.Binaries(controlplane.BinDir(root))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"--kubeconfig", cp.AdminKubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
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
