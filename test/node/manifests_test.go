package node

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmsched/wasmsched/internal/testnode"
)

// The kustomize base installed the way manifests/README.md says: kubectl
// apply --server-side of the second-scheduler overlay, then the policy
// ConfigMaps from the modules make built. Its two replicas become Ready on
// the two Nodes, one holds the lease, and a pod that names the scheduler
// runs while a team's pod is refused with team-isolation's reason.
func TestKustomizeBaseRunsTheScheduler(t *testing.T) {
	const ns = "wasmsched"
	kubectl(t, "apply", "--server-side", "-k", filepath.Join(root, "manifests", "overlays", "second-scheduler"))
	t.Cleanup(func() {
		kubectl(t, "delete", "-k", filepath.Join(root, "manifests", "overlays", "second-scheduler"), "--wait", "--timeout=120s")
	})
	for _, p := range []string{"team-isolation", "bin-packing"} {
		kubectl(t, "-n", ns, "create", "configmap", "policy-"+p, "--from-file=policy.wasm="+filepath.Join(root, "_output", "guests", "tinygo", p+".wasm"))
	}
	scheds := waitSchedulers(t, ns, 2, 3*time.Minute)
	for _, p := range scheds {
		checkHardened(t, p)
	}
	leader := leaseHolder(t, ns, "wasmsched")
	podOf(t, scheds, leader)
	apps := namespace(t, "apps-kustomize")
	t.Cleanup(func() { kubectl(t, "delete", "namespace", apps, "--wait", "--timeout=120s") })
	refused := teamIsolationHolds(t, apps)
	t.Logf("kustomize base: %s and %s ready, leader %s; shared pod running; team-a refused: %s", scheds[0].Name, scheds[1].Name, leader, refused)
}

// The replace-default manifests as manifests/replace-default/README.md
// installs them on a kubeadm control-plane node: the default scheduler's
// manifest moved away (here: upstream's kube-scheduler stopped), config.yaml
// and the policy module in /etc/kubernetes/wasmsched, kube-scheduler.yaml
// in the kubelet's static pod directory. The kubelet runs it, it takes the
// default scheduler's lease, places pods that name no scheduler and keeps
// them off a node in maintenance with maintenance-avoidance's reason.
//
// The host paths the manifest names (/etc/kubernetes, /var/cache/wasmsched)
// are moved under the test's directory, so the test never writes this
// machine's /etc; everything else in the manifest is used as written.
func TestReplaceDefaultStaticPod(t *testing.T) {
	ctx := context.Background()
	host := t.TempDir()
	etc := filepath.Join(host, "etc", "kubernetes")
	if err := os.MkdirAll(filepath.Join(etc, "wasmsched"), 0o755); err != nil {
		t.Fatal(err)
	}
	// kubeadm writes scheduler.conf as root, mode 0600, with the cluster's
	// CA inline: system:kube-scheduler's credentials.
	conf := kubectl(t, "config", "view", "--kubeconfig", cp.SchedulerKubeconfig, "--flatten", "--minify")
	if err := os.WriteFile(filepath.Join(etc, "scheduler.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	config, err := os.ReadFile(filepath.Join(root, "manifests", "replace-default", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(etc, "wasmsched", "config.yaml"), config, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(etc, "wasmsched", "maintenance-avoidance.wasm"), guest(t, "maintenance-avoidance.wasm"), 0o644); err != nil {
		t.Fatal(err)
	}
	manifest, err := os.ReadFile(filepath.Join(root, "manifests", "replace-default", "kube-scheduler.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	manifest = []byte(strings.NewReplacer(
		"hostPath: {path: /etc/kubernetes/", "hostPath: {path: "+etc+"/",
		"hostPath: {path: /var/cache/wasmsched", "hostPath: {path: "+filepath.Join(host, "var", "cache", "wasmsched"),
	).Replace(string(manifest)))
	if n := strings.Count(string(manifest), "hostPath: {path: "+host); n != 3 {
		t.Fatalf("moved %d of the manifest's 3 host paths: its volumes changed; update this test", n)
	}

	cluster.StopDefaultScheduler()
	static := filepath.Join(node.StaticPodDir(), "kube-scheduler.yaml")
	if err := os.WriteFile(static, manifest, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = os.Remove(static)
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
			if _, err := client.CoreV1().Pods("kube-system").Get(ctx, "kube-scheduler-"+node.Name, metav1.GetOptions{}); err != nil {
				break
			}
		}
		if err := cluster.StartDefaultScheduler(); err != nil {
			t.Error(err)
		}
	})
	mirror := "kube-scheduler-" + node.Name
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		p, err := client.CoreV1().Pods("kube-system").Get(ctx, mirror, metav1.GetOptions{})
		if err == nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready {
			break
		}
		if time.Now().After(deadline) || err == nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount > 2 {
			msg := "no mirror pod"
			if err == nil {
				msg = describe(*p) + "\n" + logsOf("kube-system", mirror)
			}
			t.Fatalf("the static kube-scheduler pod is not Ready (2m at most): %s\nkubelet:\n%s", msg, node.LogTail("kubelet"))
		}
	}
	// A host-network pod's kube-scheduler names itself after the machine's
	// hostname (on a kubeadm node, the node's name).
	hostname, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	var holder string
	for deadline := time.Now().Add(60 * time.Second); !strings.HasPrefix(holder, hostname+"_") && time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		holder = leaseHolder(t, "kube-system", "kube-scheduler")
	}
	if !strings.HasPrefix(holder, hostname+"_") {
		t.Fatalf("the default scheduler's lease kube-system/kube-scheduler is held by %q, not the static pod (%s_…)", holder, hostname)
	}

	// It compiled its policy into the host's cache directory, which the
	// kubelet created for it.
	if files := cacheFiles(t, filepath.Join(host, "var", "cache", "wasmsched")); len(files) == 0 {
		t.Errorf("the static pod wrote no compiled module into its cache directory")
	}

	// node-2 goes into maintenance: a pod pinned to it is refused with the
	// annotation's value in the reason, a pod free to go anywhere runs on
	// node-1.
	other := cluster.Nodes[1].Name
	kubectl(t, "annotate", "node", other, "maintenance.wasmsched.io/window=CHG-42")
	t.Cleanup(func() { kubectl(t, "annotate", "node", other, "maintenance.wasmsched.io/window-") })
	apps := namespace(t, "apps-default")
	t.Cleanup(func() { kubectl(t, "delete", "namespace", apps, "--wait", "--timeout=120s") })
	for name, sel := range map[string]map[string]string{"anywhere": nil, "pinned": {"kubernetes.io/hostname": other}} {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: apps},
			Spec: v1.PodSpec{NodeSelector: sel, Containers: []v1.Container{{Name: "c", Image: testnode.SandboxImage, ImagePullPolicy: v1.PullNever}}}}
		if _, err := client.CoreV1().Pods(apps).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitRunning(t, apps, "anywhere", 90*time.Second)
	if p, err := client.CoreV1().Pods(apps).Get(ctx, "anywhere", metav1.GetOptions{}); err != nil || p.Spec.NodeName != node.Name {
		t.Errorf("pod anywhere placed on %q, want %s (%s is in maintenance)", p.Spec.NodeName, node.Name, other)
	}
	refused := waitRefused(t, apps, "pinned", 90*time.Second)
	if !strings.Contains(refused, "WasmPolicy/maintenance-avoidance") || !strings.Contains(refused, "CHG-42") {
		t.Errorf("the pinned pod's FailedScheduling event %q does not give maintenance-avoidance's reason with CHG-42", refused)
	}
	t.Logf("static pod %s ready, lease %s; pod anywhere on %s; pinned refused: %s", mirror, holder, node.Name, refused)
}
