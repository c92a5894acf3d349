// Command rollout-snapshot writes the cluster `make bench` times
// `wasmsched rollout-report` on: a snapshot file of nodes and pods (a v1
// List, as `kubectl get nodes,pods -A -o json` prints) and a scheduler
// config running team-isolation and bin-packing from _output/guests/tinygo.
//
// The nodes are split into teams' pools and a shared pool; every running
// pod fits the current team-isolation (key=team) where it runs. Pending
// pods are of an existing team, of a team without nodes, or of no team.
//
//	go run ./hack/rollout-snapshot -nodes 5000 -pods 50000 -out _output/bench/rollout
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wasmsched/wasmsched/internal/controlplane"
)

func main() {
	nodes := flag.Int("nodes", 5000, "nodes")
	pods := flag.Int("pods", 50000, "running pods (spread evenly over the nodes)")
	pending := flag.Int("pending", 500, "pending pods")
	teams := flag.Int("teams", 50, "teams; 40% of the nodes are split among them")
	out := flag.String("out", "_output/bench/rollout", "directory for snapshot.json and config.yaml")
	apply := flag.String("apply", "", "kubeconfig of a cluster to also create the nodes, namespaces and pods in (for timing the report against an apiserver)")
	flag.Parse()
	if err := write(*nodes, *pods, *pending, *teams, *out, *apply); err != nil {
		fmt.Fprintln(os.Stderr, "rollout-snapshot:", err)
		os.Exit(1)
	}
}

func write(nodes, pods, pending, teams int, out, apply string) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	var items []any
	nodeRes := v1.ResourceList{v1.ResourceCPU: resource.MustParse("32"), v1.ResourceMemory: resource.MustParse("128Gi"), v1.ResourcePods: resource.MustParse("110")}
	teamOf := make([]string, nodes)
	for i := range nodes {
		name := fmt.Sprintf("node-%05d", i)
		labels := map[string]string{"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", i%3)}
		if i%5 < 2 { // 40% of the nodes belong to a team
			teamOf[i] = fmt.Sprintf("team-%02d", (i/5)%teams)
			labels["team"] = teamOf[i]
		}
		items = append(items, &v1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, UID: types.UID("node-" + name)},
			Status: v1.NodeStatus{Capacity: nodeRes, Allocatable: nodeRes,
				Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}}})
	}
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	pod := func(i int, team, node string) *v1.Pod {
		labels := map[string]string{"app": fmt.Sprintf("app-%d", i%200)}
		if team != "" {
			labels["team"] = team
		}
		ns := "shared"
		if team != "" {
			ns = team
		}
		cpu := []string{"100m", "250m", "500m", "1"}[i%4]
		p := &v1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%06d", i), Namespace: ns, Labels: labels,
				UID: types.UID(fmt.Sprintf("pod-%06d", i)), CreationTimestamp: metav1.NewTime(start.Add(time.Duration(i) * time.Second))},
			Spec: v1.PodSpec{SchedulerName: "wasmsched", NodeName: node, Containers: []v1.Container{{Name: "app", Image: "registry.example/app:1",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("256Mi")}}}}},
		}
		if node != "" {
			p.Status = v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue,
				LastTransitionTime: p.CreationTimestamp}}}
		}
		return p
	}
	for i := range pods {
		n := i % nodes
		items = append(items, pod(i, teamOf[n], fmt.Sprintf("node-%05d", n)))
	}
	for i := range pending {
		var team string
		switch i % 4 {
		case 0, 1:
			team = fmt.Sprintf("team-%02d", i%teams) // has nodes
		case 2:
			team = fmt.Sprintf("team-x%02d", i%teams) // has none
		}
		items = append(items, pod(pods+i, team, ""))
	}
	if apply != "" {
		if err := create(apply, items); err != nil {
			return err
		}
	}
	b, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "snapshot.json"), b, 0o644); err != nil {
		return err
	}
	guests := filepath.Join(root, "_output", "guests", "tinygo")
	cfg := controlplane.DefaultProfileConfig("/dev/null", fmt.Sprintf(`      policies:
      - name: team-isolation
        source: {file: %s}
        config: key=team
      - name: placement
        source: {file: %s}
        config: cpu=1,memory=1
`, filepath.Join(guests, "team-isolation.wasm"), filepath.Join(guests, "bin-packing.wasm")))
	if err := os.WriteFile(filepath.Join(out, "config.yaml"), []byte(cfg), 0o644); err != nil {
		return err
	}
	fmt.Printf("%s: %d nodes, %d running and %d pending pods (%d MiB); %s\n", filepath.Join(out, "snapshot.json"), nodes, pods, pending, len(b)>>20, filepath.Join(out, "config.yaml"))
	return nil
}

// create makes the nodes (with their status), the pods' namespaces and the
// pods in the cluster of kubeconfig, 16 requests at a time.
func create(kubeconfig string, items []any) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 5000, 5000
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx := context.Background()
	start := time.Now()
	seen := map[string]bool{}
	for _, it := range items {
		if p, ok := it.(*v1.Pod); ok && !seen[p.Namespace] {
			seen[p.Namespace] = true
			if _, err := c.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace}}, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
	}
	work := make(chan any)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range work {
				var err error
				switch o := it.(type) {
				case *v1.Node:
					st := o.Status
					var n *v1.Node
					if n, err = c.CoreV1().Nodes().Create(ctx, o, metav1.CreateOptions{}); err == nil {
						n.Status = st
						_, err = c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
					}
				case *v1.Pod:
					p := o.DeepCopy()
					p.UID, p.CreationTimestamp = "", metav1.Time{}
					_, err = c.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
				}
				if err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for _, it := range items {
		work <- it
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	fmt.Printf("created %d objects in %s\n", len(items), time.Since(start).Round(time.Second))
	return nil
}
