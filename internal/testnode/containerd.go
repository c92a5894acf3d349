package testnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/wasmsched/wasmsched/internal/controlplane"
)

func (n *Node) startContainerd(ctx context.Context, ipam string) error {
	cni := n.p("cni", "net.d")
	if err := os.MkdirAll(cni, 0o755); err != nil {
		return err
	}
	conflist := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "wasmsched",
  "plugins": [
    {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q, "gateway": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, Bridge, ipam, PodSubnet, Address)
	if err := os.WriteFile(filepath.Join(cni, "10-wasmsched.conflist"), []byte(conflist), 0o644); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  # The machine may lack CAP_SYS_RESOURCE (this one does), without which
  # no process may lower its oom_score_adj below containerd's: the
  # kubelet's -998 for a sandbox would fail every pod.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
`, n.p("containerd", "root"), n.p("containerd", "state"), n.Socket, SandboxImage, cni)
	if err := os.MkdirAll(n.p("containerd"), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(n.p("containerd", "config.toml"), []byte(cfg), 0o600); err != nil {
		return err
	}
	c, err := startProcess(&n.procs, n.Dir, "containerd", "containerd", "--config", n.p("containerd", "config.toml"))
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if exec.CommandContext(ctx, "ctr", "--address", n.Socket, "version").Run() == nil {
			return nil
		}
		if controlplane.Exited(c) {
			break
		}
	}
	return fmt.Errorf("containerd did not answer on %s; %s", n.Socket, n.LogTail("containerd"))
}

// KillContainer kills a container through the runtime (not the API), as a
// crash would: the kubelet restarts it in the same pod.
func (n *Node) KillContainer(ctx context.Context, containerID string) error {
	id := strings.TrimPrefix(containerID, "containerd://")
	if out, err := exec.CommandContext(ctx, "ctr", "--address", n.Socket, "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", id).CombinedOutput(); err != nil {
		return fmt.Errorf("ctr tasks kill %s: %w: %s", id, err, out)
	}
	return nil
}

// ContainerPID is the host PID of a running container's main process.
func (n *Node) ContainerPID(ctx context.Context, containerID string) (int, error) {
	id := strings.TrimPrefix(containerID, "containerd://")
	out, err := exec.CommandContext(ctx, "ctr", "--address", n.Socket, "-n", "k8s.io", "tasks", "ls").Output()
	if err != nil {
		return 0, fmt.Errorf("ctr tasks ls: %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == id {
			var pid int
			if _, err := fmt.Sscan(f[1], &pid); err == nil {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("container %s has no task on %s", id, n.Name)
}

// removeContainers stops and deletes every task and container containerd
// runs for the node.
func (n *Node) removeContainers() {
	out, err := exec.Command("ctr", "--address", n.Socket, "-n", "k8s.io", "tasks", "ls", "-q").Output()
	if err == nil {
		for _, id := range strings.Fields(string(out)) {
			_ = exec.Command("ctr", "--address", n.Socket, "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", id).Run()
		}
	}
	time.Sleep(200 * time.Millisecond)
	out, err = exec.Command("ctr", "--address", n.Socket, "-n", "k8s.io", "containers", "ls", "-q").Output()
	if err == nil {
		for _, id := range strings.Fields(string(out)) {
			_ = exec.Command("ctr", "--address", n.Socket, "-n", "k8s.io", "tasks", "delete", "-f", id).Run()
			_ = exec.Command("ctr", "--address", n.Socket, "-n", "k8s.io", "containers", "delete", id).Run()
		}
	}
}
