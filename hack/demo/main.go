// Command demo is `make demo`: it starts a local control plane (etcd and
// kube-apiserver on 127.0.0.1), creates a small cluster (6 nodes in 2 zones,
// 2 teams, a GPU node, a node in maintenance), uploads the example policies
// (ConfigMaps and a hostPath-style file), runs bin/kube-scheduler with them,
// schedules a workload and prints where each pod landed and why. Then it
// hot-reloads one policy through its ConfigMap (packing → spreading) and
// shows the changed placement. Last, a team ships a policy of its own, live:
// a SchedulingPolicy in its namespace (wasmsched push --object), which holds
// back the team's pods and leaves every other namespace's pods alone. It
// Before that, an operator asks what a new team-isolation config would do
// to the cluster as it is (wasmsched rollout-report). It tears everything
// down unless KEEP=1.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmsched/wasmsched/internal/controlplane"
)

const (
	ns            = "demo"
	policyNS      = "wasmsched"
	schedulerName = "wasmsched"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run() error {
	start := time.Now()
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	ctx := context.Background()
	state := filepath.Join(root, "_output", "demo")
	_ = os.RemoveAll(state)
	step("Starting etcd and kube-apiserver on 127.0.0.1")
	cp, err := controlplane.Start(ctx, controlplane.BinDir(root), filepath.Join(state, "cluster"), os.Getenv("KEEP") == "1")
	if err != nil {
		return err
	}
	keep := os.Getenv("KEEP") == "1"
	if !keep {
		defer cp.Stop()
	}
	client, err := cp.Client()
	if err != nil {
		return err
	}
	v, err := client.Discovery().ServerVersion()
	if err != nil {
		return err
	}
	fmt.Printf("   kube-apiserver %s at %s (state in %s)\n", v.GitVersion, cp.URL, cp.Dir)

	step("Creating 6 nodes: zones a/b, teams payments/search, a GPU node, a node in maintenance")
	if err := createNodes(ctx, client); err != nil {
		return err
	}

	step("Uploading policies: team-isolation, gpu-fit and placement (bin-packing) as ConfigMaps; maintenance-avoidance as a file")
	guests := filepath.Join(root, "_output", "guests", "tinygo")
	module := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(guests, name+".wasm")) }
	pins := map[string]string{}
	for name, mod := range map[string]string{"team-isolation": "team-isolation", "gpu-fit": "gpu-fit", "placement": "bin-packing"} {
		b, err := module(mod)
		if err != nil {
			return fmt.Errorf("%w (run make guests-tinygo)", err)
		}
		pins[name] = digest(b)
		if err := putPolicy(ctx, client, "policy-"+name, b); err != nil {
			return err
		}
		fmt.Printf("   configmap %s/policy-%s: %s.wasm, %d bytes\n", policyNS, name, mod, len(b))
	}
	policyDir := filepath.Join(state, "policies")
	_ = os.MkdirAll(policyDir, 0o755)
	b, err := module("maintenance-avoidance")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(policyDir, "maintenance-avoidance.wasm"), b, 0o644); err != nil {
		return err
	}
	pins["maintenance-avoidance"] = digest(b)
	fmt.Printf("   file %s/maintenance-avoidance.wasm\n", policyDir)

	step("Starting bin/kube-scheduler (profile " + schedulerName + ", authenticated as system:kube-scheduler, policy objects on)")
	cfg, err := writeSchedulerConfig(state, cp, policyDir, pins)
	if err != nil {
		return err
	}
	if err := controlplane.GrantPolicyRead(ctx, client, policyNS, controlplane.SchedulerUser); err != nil {
		return err
	}
	_, _, kubectl, err := controlplane.Binaries(controlplane.BinDir(root))
	if err != nil {
		return err
	}
	if err := controlplane.InstallPolicyObjects(ctx, client, root, kubectl, cp.AdminKubeconfig, controlplane.SchedulerUser, "kube-system"); err != nil {
		return err
	}
	fmt.Println("   CRDs from manifests/crds: ClusterSchedulingPolicy, SchedulingPolicy")
	if out, err := exec.Command(filepath.Join(root, "bin", "kube-scheduler"), "--version").Output(); err == nil {
		fmt.Printf("   %s\n", strings.Replace(strings.TrimSpace(string(out)), "Kubernetes", "kube-scheduler", 1))
	}
	logPath := filepath.Join(state, "kube-scheduler.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	sched := exec.Command(filepath.Join(root, "bin", "kube-scheduler"), "--config", cfg, "--secure-port", "0", "-v=2")
	sched.Stdout, sched.Stderr = logf, logf
	if err := sched.Start(); err != nil {
		return err
	}
	defer func() { _ = sched.Process.Kill(); _, _ = sched.Process.Wait() }()
	fmt.Printf("   log: %s\n", logPath)
	if err := waitForLog(logPath, `"Starting Kubernetes Scheduler"`, 60*time.Second); err != nil {
		return err
	}

	step("Submitting the workload")
	workload := []*v1.Pod{
		pod("payments-api-1", map[string]string{"team": "payments"}, "500m", "512Mi", 0),
		pod("payments-api-2", map[string]string{"team": "payments"}, "500m", "512Mi", 0),
		pod("payments-api-3", map[string]string{"team": "payments"}, "500m", "512Mi", 0),
		pod("search-indexer-1", map[string]string{"team": "search"}, "1", "1Gi", 0),
		pod("web-1", nil, "250m", "256Mi", 0),
		pod("web-2", nil, "250m", "256Mi", 0),
		pod("trainer-1", nil, "2", "4Gi", 2),
		pod("analytics-report", map[string]string{"team": "analytics"}, "500m", "512Mi", 0),
		inZone(pod("web-zone-b", nil, "250m", "256Mi", 0), "b"),
		pod("trainer-huge", nil, "2", "4Gi", 8),
	}
	if err := submit(ctx, client, workload); err != nil {
		return err
	}
	if err := show(ctx, client, ns, workload); err != nil {
		return err
	}

	step("Hot reload: the placement policy's ConfigMap now holds spread.wasm instead of bin-packing.wasm")
	b, err = module("spread")
	if err != nil {
		return err
	}
	if err := putPolicy(ctx, client, "policy-placement", b); err != nil {
		return err
	}
	if err := waitForLog(logPath, `"Policy module active" policy="placement"`, 30*time.Second, 2); err != nil {
		return err
	}
	fmt.Println("   scheduler log: Policy module active policy=placement (no restart)")
	more := []*v1.Pod{
		pod("payments-batch-1", map[string]string{"team": "payments"}, "500m", "512Mi", 0),
		pod("payments-batch-2", map[string]string{"team": "payments"}, "500m", "512Mi", 0),
	}
	if err := submit(ctx, client, more); err != nil {
		return err
	}
	if err := show(ctx, client, ns, append(workload, more...)); err != nil {
		return err
	}

	if err := rolloutReport(root, cfg, cp); err != nil {
		return err
	}
	if err := teamShipsAPolicy(ctx, client, root, kubectl, cp, logPath); err != nil {
		return err
	}
	if err := gatesAndPatches(ctx, client, root, kubectl, cp, logPath); err != nil {
		return err
	}
	fmt.Printf("\nDone in %s.", time.Since(start).Round(time.Second))
	if keep {
		fmt.Printf(" KEEP=1: the control plane is still running; kubectl --kubeconfig %s get pods -A\n", cp.AdminKubeconfig)
		fmt.Printf("Stop it with: hack/cluster-down.sh %s\n", cp.Dir)
	} else {
		fmt.Println(" Everything was torn down (KEEP=1 keeps the cluster).")
	}
	return nil
}

func step(s string) { fmt.Printf("\n==> %s\n", s) }

func createNodes(ctx context.Context, c kubernetes.Interface) error {
	type spec struct {
		name, zone, team string
		gpus             int64
		maintenance      bool
	}
	for _, s := range []spec{
		{"pay-a1", "a", "payments", 0, false},
		{"pay-b1", "b", "payments", 0, false},
		{"search-a1", "a", "search", 0, false},
		{"shared-a1", "a", "", 0, false},
		{"shared-b1", "b", "", 0, true},
		{"gpu-b1", "b", "", 4, false},
	} {
		labels := map[string]string{"topology.kubernetes.io/zone": s.zone, "kubernetes.io/hostname": s.name}
		if s.team != "" {
			labels["team"] = s.team
		}
		res := v1.ResourceList{
			v1.ResourceCPU:    resource.MustParse("4"),
			v1.ResourceMemory: resource.MustParse("16Gi"),
			v1.ResourcePods:   resource.MustParse("110"),
		}
		if s.gpus > 0 {
			res["nvidia.com/gpu"] = *resource.NewQuantity(s.gpus, resource.DecimalSI)
		}
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: s.name, Labels: labels}}
		if s.maintenance {
			node.Annotations = map[string]string{"maintenance.wasmsched.io/window": "2026-11-22T10:00Z/12:00Z kernel upgrade"}
		}
		created, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		created.Status = v1.NodeStatus{Capacity: res, Allocatable: res, Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}}
		if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	for _, n := range []string{ns, policyNS} {
		if _, err := c.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

func putPolicy(ctx context.Context, c kubernetes.Interface, name string, module []byte) error {
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: policyNS}, BinaryData: map[string][]byte{"policy.wasm": module}}
	if _, err := c.CoreV1().ConfigMaps(policyNS).Update(ctx, cm, metav1.UpdateOptions{}); err == nil {
		return nil
	}
	_, err := c.CoreV1().ConfigMaps(policyNS).Create(ctx, cm, metav1.CreateOptions{})
	return err
}

// writeSchedulerConfig pins the digests of the policies the demo never
// replaces; "placement" stays unpinned because the demo swaps its module.
func writeSchedulerConfig(state string, cp *controlplane.ControlPlane, policyDir string, pins map[string]string) (string, error) {
	policies := fmt.Sprintf(`      - name: team-isolation
        source: {configMap: {namespace: %s, name: policy-team-isolation, key: policy.wasm}}
        sha256: %s
        config: key=team
      - name: maintenance-avoidance
        source: {file: %q}
        sha256: %s
      - name: gpu-fit
        source: {configMap: {namespace: %s, name: policy-gpu-fit, key: policy.wasm}}
        sha256: %s
        config: resource=nvidia.com/gpu
      - name: placement
        source: {configMap: {namespace: %s, name: policy-placement, key: policy.wasm}}
        config: cpu=1,memory=1
`, policyNS, pins["team-isolation"], filepath.Join(policyDir, "maintenance-avoidance.wasm"), pins["maintenance-avoidance"], policyNS, pins["gpu-fit"], policyNS)
	cfg := controlplane.SchedulerConfig(cp.SchedulerKubeconfig, schedulerName, filepath.Join(state, "compile-cache"), "1s", "leaderElection: {leaderElect: false}", policies)
	// Teams' SchedulingPolicies get what the operator grants their
	// namespace: here team-payments may read the pods on each node (its
	// own in full, others' only as counts), within the default ceilings.
	cfg = strings.Replace(cfg, "      policies:\n", "      policyObjects:\n        enabled: true\n        tenants:\n          namespaces: [{names: [team-payments], reads: [NodePods]}]\n      policies:\n", 1)
	p := filepath.Join(state, "kube-scheduler.yaml")
	return p, os.WriteFile(p, []byte(cfg), 0o644)
}

func pod(name string, labels map[string]string, cpu, mem string, gpus int64) *v1.Pod {
	req := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}
	if gpus > 0 {
		req["nvidia.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: v1.PodSpec{
			SchedulerName: schedulerName,
			Containers:    []v1.Container{{Name: "app", Image: "registry.example/app:1", Resources: v1.ResourceRequirements{Requests: req, Limits: gpuLimit(gpus)}}},
		},
	}
}

// inZone pins a pod to a zone with a nodeSelector.
func inZone(p *v1.Pod, zone string) *v1.Pod {
	p.Spec.NodeSelector = map[string]string{"topology.kubernetes.io/zone": zone}
	return p
}

func gpuLimit(gpus int64) v1.ResourceList {
	if gpus == 0 {
		return nil
	}
	return v1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
}

// submit creates pods one at a time, waiting for each to be bound or
// rejected, so placement decisions build on each other as in a real rollout.
func submit(ctx context.Context, c kubernetes.Interface, pods []*v1.Pod) error {
	for _, p := range pods {
		if p.Namespace == "" {
			p.Namespace = ns
		}
		if _, err := c.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return err
		}
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			got, err := c.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got.Spec.NodeName != "" || failedReason(ctx, c, p.Namespace, p.Name) != "" {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// failedReason is the latest FailedScheduling or WasmPolicyGated note of
// the pod: why it is pending.
func failedReason(ctx context.Context, c kubernetes.Interface, namespace, pod string) string {
	evs, err := c.EventsV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + pod})
	if err != nil {
		return ""
	}
	var latest string
	var at time.Time
	for _, e := range evs.Items {
		t := e.EventTime.Time
		if t.IsZero() {
			t = e.CreationTimestamp.Time
		}
		if (e.Reason == "FailedScheduling" || e.Reason == "WasmPolicyGated") && !t.Before(at) {
			latest, at = e.Note, t
		}
	}
	return latest
}

func show(ctx context.Context, c kubernetes.Interface, namespace string, pods []*v1.Pod) error {
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	describe := map[string]string{}
	for _, n := range nodes.Items {
		var d []string
		if t := n.Labels["team"]; t != "" {
			d = append(d, "team="+t)
		} else {
			d = append(d, "shared pool")
		}
		d = append(d, "zone="+n.Labels["topology.kubernetes.io/zone"])
		if g, ok := n.Status.Allocatable["nvidia.com/gpu"]; ok {
			d = append(d, fmt.Sprintf("%d GPUs", g.Value()))
		}
		describe[n.Name] = strings.Join(d, ", ")
	}
	names := make([]string, 0, len(pods))
	for _, p := range pods {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	fmt.Println()
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tLABELS / REQUESTS\tNODE\tWHY")
	for _, name := range names {
		p, err := c.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		what := p.Labels["team"]
		if what == "" {
			what = "no team"
		} else {
			what = "team=" + what
		}
		if g, ok := p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"]; ok {
			what += fmt.Sprintf(", %d GPUs", g.Value())
		}
		if z := p.Spec.NodeSelector["topology.kubernetes.io/zone"]; z != "" {
			what += ", zone " + z + " only"
		}
		if p.Spec.NodeName != "" {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", name, what, p.Spec.NodeName, describe[p.Spec.NodeName])
		} else {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", name, what, "(pending)", failedReason(ctx, c, namespace, name))
		}
	}
	return tw.Flush()
}

// waitForLog waits until the log contains the text (at least n times).
func waitForLog(path, text string, timeout time.Duration, n ...int) error {
	want := 1
	if len(n) > 0 {
		want = n[0]
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(path)
		if strings.Count(string(b), text) >= want {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return fmt.Errorf("%s did not log %s within %s; log tail:\n%s", filepath.Base(path), text, timeout, b)
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
