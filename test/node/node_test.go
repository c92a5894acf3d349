// Package node runs the scheduler as it ships on a real node: etcd,
// kube-apiserver, kube-controller-manager, containerd, kube-proxy and a
// kubelet (internal/testnode), the images of make image imported into
// containerd, and pods that really start.
package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmsched/wasmsched/internal/controlplane"
	"github.com/wasmsched/wasmsched/internal/testguests"
	"github.com/wasmsched/wasmsched/internal/testnode"
)

var (
	cp      *controlplane.ControlPlane
	cluster *testnode.Cluster
	// node is the first of the cluster's two Nodes.
	node   *testnode.Node
	client kubernetes.Interface
	root   string
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		fail := func(what string, err error) int {
			fmt.Fprintf(os.Stderr, "node: %s: %v\n", what, err)
			return 1
		}
		var err error
		if root, err = testguests.Root(); err != nil {
			return fail("root", err)
		}
		dir, err := os.MkdirTemp("", "wasmsched-node")
		if err != nil {
			return fail("state", err)
		}
		defer os.RemoveAll(dir)
		if err := testnode.PrepareNetwork(); err != nil {
			return fail("network", err)
		}
		ctx := context.Background()
		cp, err = controlplane.StartWith(ctx, controlplane.BinDir(root), filepath.Join(dir, "cluster"), controlplane.Options{NodeAddress: testnode.Address, NodeNames: []string{"node-1", "node-2"}})
		if err != nil {
			return fail("control plane", err)
		}
		defer cp.Stop()
		pause, err := testnode.BuildPauseImage(root, filepath.Join(dir, "images"))
		if err != nil {
			return fail("pause image", err)
		}
		images := filepath.Join(root, "_output", "images", "oci")
		if _, err := os.Stat(filepath.Join(images, "index.json")); err != nil {
			return fail("scheduler image", fmt.Errorf("%w (make image IMAGE_PLATFORMS=linux/amd64 builds it; make test-node does)", err))
		}
		cluster, err = testnode.Start(ctx, cp, controlplane.BinDir(root), filepath.Join(dir, "nodes"), pause, images)
		if err != nil {
			return fail("nodes", err)
		}
		defer cluster.Stop()
		node = cluster.Nodes[0]
		// The chart's default repository is registry.example.com/wasmsched,
		// where make image-push would put the images.
		if err := cluster.PushedAs(ctx, "registry.example.com/wasmsched"); err != nil {
			return fail("images", err)
		}
		if client, err = cp.Client(); err != nil {
			return fail("client", err)
		}
		return m.Run()
	}())
}

// A pod bound to each real node starts (its sandbox is the pause image,
// its network the shared bridge, an address of its own), runs as the
// image's non-root user, and a graceful delete completes: the kubelet
// stops it and the object goes.
func TestPodRunsAndStopsGracefully(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "run")
	for _, n := range cluster.Nodes {
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p-" + n.Name, Namespace: ns},
			Spec:       v1.PodSpec{NodeName: n.Name, Containers: []v1.Container{{Name: "c", Image: testnode.SandboxImage, ImagePullPolicy: v1.PullNever}}},
		}
		if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ips := map[string]string{}
	for _, n := range cluster.Nodes {
		name := "p-" + n.Name
		var got *v1.Pod
		for deadline := time.Now().Add(40 * time.Second); ; time.Sleep(500 * time.Millisecond) {
			var err error
			if got, err = client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
				t.Fatal(err)
			}
			if got.Status.Phase == v1.PodRunning || time.Now().After(deadline) {
				break
			}
		}
		if got.Status.Phase != v1.PodRunning {
			t.Fatalf("pod %s is %s, not Running: %+v\ncontainerd:\n%s\nkubelet:\n%s", name, got.Status.Phase, got.Status, n.LogTail("containerd"), n.LogTail("kubelet"))
		}
		if got.Status.PodIP == "" {
			t.Fatalf("running pod %s has no IP: %+v", name, got.Status)
		}
		if other, dup := ips[got.Status.PodIP]; dup {
			t.Fatalf("pods %s and %s share the address %s", other, name, got.Status.PodIP)
		}
		ips[got.Status.PodIP] = name
		t.Logf("pod %s running at %s on %s", name, got.Status.PodIP, got.Spec.NodeName)
	}
	for _, n := range cluster.Nodes {
		name := "p-" + n.Name
		start := time.Now()
		if err := client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
				t.Logf("graceful delete of %s completed in %s", name, time.Since(start).Round(time.Millisecond))
				break
			}
			if time.Since(start) > 60*time.Second {
				t.Fatalf("pod %s was not gone 60s after a graceful delete", name)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// namespace creates a namespace and waits for its default ServiceAccount,
// which the controller-manager creates and admission requires of a pod.
func namespace(t *testing.T, name string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		if _, err := client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			return name
		} else if time.Since(start) > 30*time.Second {
			t.Fatalf("namespace %s has no default ServiceAccount after 30s: %v", name, err)
		}
	}
}
