// Command demo-node is `make demo-node`: the scheduler as it ships, run as
// pods by real kubelets. It starts etcd and kube-apiserver, then two Nodes,
// each a containerd and a kubelet on a local bridge (package testnode, as
// test/node runs them), imports the image make image built, installs the
// Helm chart with two replicas and the example policies from ConfigMaps,
// gives node-2 to team payments, runs a few pods and prints where each one
// runs and why, which replica leads, and the scheduler's own log lines.
// It needs root, as a kubelet does, and stops everything at the end.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmsched/wasmsched/internal/controlplane"
	"github.com/wasmsched/wasmsched/internal/testnode"
)

const (
	schedNS  = "wasmsched"
	demoNS   = "demo"
	registry = "registry.example.com/wasmsched"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo-node:", err)
		os.Exit(1)
	}
}

func step(s string) { fmt.Printf("\n==> %s\n", s) }

func run() error {
	start := time.Now()
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	ctx := context.Background()
	state := filepath.Join(root, "_output", "demo-node")
	_ = os.RemoveAll(state)
	images := filepath.Join(root, "_output", "images", "oci")
	if _, err := os.Stat(filepath.Join(images, "index.json")); err != nil {
		return fmt.Errorf("%w: make image IMAGE_PLATFORMS=linux/amd64 builds the scheduler's image (make demo-node does)", err)
	}
	if err := testnode.PrepareNetwork(); err != nil {
		return err
	}

	step("Starting etcd and kube-apiserver on the nodes' bridge " + testnode.Address)
	cp, err := controlplane.StartWith(ctx, controlplane.BinDir(root), filepath.Join(state, "cluster"),
		controlplane.Options{NodeAddress: testnode.Address, NodeNames: []string{"node-1", "node-2"}})
	if err != nil {
		return err
	}
	defer cp.Stop()
	client, err := cp.Client()
	if err != nil {
		return err
	}
	_, _, kubectlBin, err := controlplane.Binaries(controlplane.BinDir(root))
	if err != nil {
		return err
	}
	kubectl := func(args ...string) (string, error) {
		out, err := exec.Command(kubectlBin, append([]string{"--kubeconfig", cp.AdminKubeconfig}, args...)...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}

	step("Starting kube-controller-manager, kube-proxy and two Nodes (containerd + kubelet each); importing the images make image built")
	pause, err := testnode.BuildPauseImage(root, filepath.Join(state, "images"))
	if err != nil {
		return err
	}
	cluster, err := testnode.Start(ctx, cp, controlplane.BinDir(root), filepath.Join(state, "nodes"), pause, images)
	if err != nil {
		return err
	}
	defer cluster.Stop()
	if err := cluster.PushedAs(ctx, registry); err != nil {
		return err
	}
	if _, err := kubectl("label", "node", "node-2", "team=payments"); err != nil {
		return err
	}
	out, err := kubectl("get", "nodes", "-L", "team")
	if err != nil {
		return err
	}
	fmt.Print(indent(out))

	step("Installing the chart: helm install wasmsched manifests/charts/wasmsched (2 replicas, leader election), policies from ConfigMaps")
	if _, err := kubectl("create", "namespace", schedNS); err != nil {
		return err
	}
	for _, p := range []string{"team-isolation", "bin-packing"} {
		if _, err := kubectl("-n", schedNS, "create", "configmap", "policy-"+p,
			"--from-file=policy.wasm="+filepath.Join(root, "_output", "guests", "tinygo", p+".wasm")); err != nil {
			return err
		}
	}
	helm := filepath.Join(root, ".cache", "tools", "bin", "helm")
	if out, err := exec.Command(helm, "install", "wasmsched", filepath.Join(root, "manifests", "charts", "wasmsched"),
		"--namespace", schedNS, "--kubeconfig", cp.AdminKubeconfig, "--set", "image.repository="+registry+"/kube-scheduler").CombinedOutput(); err != nil {
		return fmt.Errorf("helm install: %w\n%s", err, out)
	}
	if _, err := kubectl("-n", schedNS, "rollout", "status", "deployment/wasmsched", "--timeout=180s"); err != nil {
		return err
	}
	if out, err = kubectl("-n", schedNS, "get", "pods", "-o", "wide"); err != nil {
		return err
	}
	fmt.Print(indent(out))
	leader := ""
	if l, err := client.CoordinationV1().Leases(schedNS).Get(ctx, "wasmsched", metav1.GetOptions{}); err == nil && l.Spec.HolderIdentity != nil {
		leader, _, _ = strings.Cut(*l.Spec.HolderIdentity, "_")
	}
	fmt.Printf("   leader (Lease %s/wasmsched): %s\n", schedNS, leader)

	step("Running pods with schedulerName: wasmsched (team-isolation keeps teams on their nodes, bin-packing scores)")
	if _, err := kubectl("create", "namespace", demoNS); err != nil {
		return err
	}
	if err := waitServiceAccount(ctx, client, demoNS); err != nil {
		return err
	}
	pods := []struct{ name, team string }{{"web-1", ""}, {"web-2", ""}, {"payments-api", "payments"}, {"payments-worker", "payments"}, {"search-indexer", "search"}}
	for _, p := range pods {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: demoNS},
			Spec: v1.PodSpec{SchedulerName: "wasmsched", Containers: []v1.Container{{Name: "app", Image: testnode.SandboxImage, ImagePullPolicy: v1.PullNever}}}}
		if p.team != "" {
			pod.Labels = map[string]string{"team": p.team}
		}
		if _, err := client.CoreV1().Pods(demoNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	rows := map[string][3]string{}
	for deadline := time.Now().Add(2 * time.Minute); len(rows) < len(pods) && time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		for _, p := range pods {
			pod, err := client.CoreV1().Pods(demoNS).Get(ctx, p.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			evs, err := client.CoreV1().Events(demoNS).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + p.name})
			if err != nil {
				return err
			}
			sort.Slice(evs.Items, func(i, j int) bool { return evs.Items[i].LastTimestamp.Before(&evs.Items[j].LastTimestamp) })
			for _, e := range evs.Items {
				switch {
				case e.Reason == "FailedScheduling":
					rows[p.name] = [3]string{"-", "Pending", e.Message}
				case e.Reason == "Scheduled" && pod.Status.Phase == v1.PodRunning:
					rows[p.name] = [3]string{pod.Spec.NodeName, "Running " + pod.Status.PodIP, e.Message}
				}
			}
		}
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "   POD\tTEAM\tNODE\tSTATUS\tWHY")
	for _, p := range pods {
		r, ok := rows[p.name]
		if !ok {
			r = [3]string{"-", "?", "no Scheduled or FailedScheduling event within 2m"}
		}
		team := p.team
		if team == "" {
			team = "-"
		}
		fmt.Fprintf(tw, "   %s\t%s\t%s\t%s\t%s\n", p.name, team, r[0], r[1], r[2])
	}
	_ = tw.Flush()
	if len(rows) < len(pods) {
		return errors.New("not every pod was placed or refused within 2 minutes")
	}

	step("The leader's own log lines (kubectl logs)")
	if leader != "" {
		logs, err := kubectl("-n", schedNS, "logs", leader)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(logs, "\n") {
			if strings.Contains(line, `"Policy module active"`) {
				fmt.Println("   " + line)
			}
		}
	}
	fmt.Printf("\nDone in %s. make test runs the same setup in test/node: leader handover, policy updates, the kustomize base and the replace-default static pod.\n", time.Since(start).Round(time.Second))
	return nil
}

// waitServiceAccount waits for the namespace's default ServiceAccount,
// which the controller-manager creates and admission requires of a pod.
func waitServiceAccount(ctx context.Context, c kubernetes.Interface, ns string) error {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if _, err := c.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			return nil
		}
	}
	return fmt.Errorf("namespace %s has no default ServiceAccount after 30s", ns)
}

func indent(s string) string {
	return "   " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n   ") + "\n"
}
