package testnode

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/wasmsched/wasmsched/internal/controlplane"
)

// cgroupHierarchies is where the machine mounts its cgroup hierarchies.
const cgroupHierarchies = "/sys/fs/cgroup"

// startKubelet starts the Node's kubelet on its port, with its own cgroup
// root, static pod directory and state.
func (n *Node) startKubelet(cp *controlplane.ControlPlane, binDir string) error {
	if err := n.makeCgroupRoot(); err != nil {
		return err
	}
	if err := os.MkdirAll(n.p("manifests"), 0o755); err != nil {
		return err
	}
	kubeletCfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://%s
address: %s
port: %d
healthzPort: %d
cgroupRoot: %s
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %s}
authorization: {mode: AlwaysAllow}
staticPodPath: %s
podLogsDir: %s
failSwapOn: false
resolvConf: ""
evictionHard: {memory.available: "100Mi", nodefs.available: "0%%", imagefs.available: "0%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
shutdownGracePeriod: 0s
`, n.Socket, Address, n.Port, n.Port-2, n.cgroupRoot, cp.Node.CAFile, n.p("manifests"), n.p("pod-logs"))
	if err := os.WriteFile(n.p("kubelet.yaml"), []byte(kubeletCfg), 0o600); err != nil {
		return err
	}
	_, err := startProcess(&n.procs, n.Dir, "kubelet", filepath.Join(binDir, "kubelet"),
		"--config="+n.p("kubelet.yaml"), "--kubeconfig="+cp.Node.Kubelets[n.Name],
		"--root-dir="+n.p("kubelet"), "--cert-dir="+n.p("kubelet-pki"),
		"--hostname-override="+n.Name, "--node-ip="+Address, "--v=1")
	return err
}

// makeCgroupRoot creates the kubelet's cgroup root in every hierarchy (the
// kubelet refuses a root that does not exist), with the machine's CPUs and
// memory nodes in its cpuset.
func (n *Node) makeCgroupRoot() error {
	hs, err := os.ReadDir(cgroupHierarchies)
	if err != nil {
		return err
	}
	for _, h := range hs {
		d := filepath.Join(cgroupHierarchies, h.Name(), n.cgroupRoot)
		if !h.IsDir() || exists(d) {
			continue
		}
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("cgroup root for %s: %w", n.Name, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if b, err := os.ReadFile(filepath.Join(cgroupHierarchies, h.Name(), f)); err == nil {
				if err := os.WriteFile(filepath.Join(d, f), b, 0o644); err != nil {
					return fmt.Errorf("cgroup root for %s: %w", n.Name, err)
				}
			}
		}
	}
	return nil
}

// removeCgroupRoot removes the kubelet's cgroup root and the pods' cgroups
// under it, deepest first, once their processes are gone.
func (n *Node) removeCgroupRoot() {
	hs, _ := os.ReadDir(cgroupHierarchies)
	for _, h := range hs {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(cgroupHierarchies, h.Name(), n.cgroupRoot), func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			_ = syscall.Rmdir(dirs[i])
		}
	}
}

// EmptyDir is where the kubelet keeps a pod's emptyDir volume.
func (n *Node) EmptyDir(podUID, volume string) string {
	return n.p("kubelet", "pods", podUID, "volumes", "kubernetes.io~empty-dir", volume)
}

// StaticPodDir is where the kubelet reads static pod manifests.
func (n *Node) StaticPodDir() string { return n.p("manifests") }
