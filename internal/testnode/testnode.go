// Package testnode runs the node side of a real cluster beside a control
// plane started with controlplane.Options.NodeAddress: a bridge for the
// pods' network; once per cluster kube-controller-manager, the upstream
// kube-scheduler as the cluster's default scheduler and kube-proxy; and per
// Node its own containerd (runc, the CNI bridge plugin; Debian's,
// hack/install-node-deps.sh) and kubelet (hack/build-node.sh), which
// registers the Node and runs its pods. Images come from OCI layouts the
// project builds (make image, the pause image of hack/pause): nothing is
// pulled.
//
// The Nodes share this machine's network namespace and the bridge: each
// kubelet serves on its own port of Address, keeps its pods' cgroups under
// a cgroup root of its own and its state in its own directory, and the
// CNI's host-local allocator hands out pod addresses from one store.
//
// It needs root, as a kubelet does, and owns the machine's bridge Bridge,
// the kubelet ports from 10250 and the iptables rules kube-proxy writes
// while it runs.
package testnode

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmsched/wasmsched/internal/controlplane"
)

// The node's network: a bridge whose address the apiserver binds (pods
// reach it as their gateway, and through the kubernetes Service), and the
// pods' addresses after it.
const (
	Bridge    = "wasmsched0"
	Address   = "10.88.0.1"
	PodSubnet = "10.88.0.0/16"
)

// netnsDir is where the CRI plugin pins the pods' network namespaces.
const netnsDir = "/var/run/netns"

// SandboxImage is the pause image's name in containerd: PauseImage's
// layout holds it under this name.
const SandboxImage = "registry.k8s.io/pause:wasmsched"

// PrepareNetwork creates Bridge with Address and turns on forwarding and
// bridged traffic through iptables (kube-proxy's Service rules). It runs
// before the control plane starts, whose apiserver binds Address.
func PrepareNetwork() error {
	if os.Geteuid() != 0 {
		return errors.New("a real node needs root (the kubelet, containerd and the pods' network); run the node tests as root")
	}
	if _, err := os.Stat("/sys/class/net/" + Bridge); err != nil {
		if err := run("ip", "link", "add", Bridge, "type", "bridge"); err != nil {
			return err
		}
	}
	out, _ := exec.Command("ip", "-o", "addr", "show", "dev", Bridge).CombinedOutput()
	if !strings.Contains(string(out), " "+Address+"/") {
		if err := run("ip", "addr", "add", Address+"/16", "dev", Bridge); err != nil {
			return err
		}
	}
	if err := run("ip", "link", "set", Bridge, "up"); err != nil {
		return err
	}
	if err := run("modprobe", "br_netfilter"); err != nil && !exists("/proc/sys/net/bridge/bridge-nf-call-iptables") {
		return fmt.Errorf("bridged traffic cannot pass iptables (no br_netfilter): %w", err)
	}
	for k, v := range map[string]string{"net/ipv4/ip_forward": "1", "net/bridge/bridge-nf-call-iptables": "1"} {
		if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0o644); err != nil {
			return fmt.Errorf("sysctl %s: %w", k, err)
		}
	}
	return nil
}

// Cluster is the node side of a running cluster: the components that run
// once, and its Nodes.
type Cluster struct {
	// Nodes are the running Nodes, one per name of the control plane's
	// NodeCredentials, in that order.
	Nodes []*Node
	// Dir holds the cluster components' logs and the shared pod address
	// store; each Node's state is in Dir/<name>.
	Dir string

	procs    []*exec.Cmd
	proxyBin string
	// sched is the default scheduler's process while it runs.
	sched                     *exec.Cmd
	schedBin, schedKubeconfig string
	// netns are the network namespaces there were before the cluster
	// started: Stop removes the pods' others, which no kubelet had time to.
	netns map[string]bool
}

// Node is a running Node: its containerd and kubelet, and where they keep
// their state.
type Node struct {
	// Name is the Node's name (and its kubernetes.io/hostname label).
	Name string
	// Dir holds the node's state and its components' logs.
	Dir string
	// Socket is containerd's address.
	Socket string
	// Port is the kubelet's port on Address.
	Port int

	procs []*exec.Cmd
	// cgroupRoot is the kubelet's cgroupRoot, under which its pods run:
	// a kubelet removes the pod cgroups under its root that it does not
	// know, so two kubelets on one machine need a root each.
	cgroupRoot string
}

// cgroupHierarchies is where the machine mounts its cgroup hierarchies.
const cgroupHierarchies = "/sys/fs/cgroup"

// Start starts the cluster components of binDir against cp and one Node
// per name in cp.Node (each with containerd, the images of layouts
// imported, and a kubelet), then waits until every Node is Ready.
func Start(ctx context.Context, cp *controlplane.ControlPlane, binDir, dir string, layouts ...string) (*Cluster, error) {
	if cp.Node == nil {
		return nil, errors.New("the control plane was not started for a node (controlplane.Options.NodeAddress)")
	}
	for _, b := range []string{"kubelet", "kube-proxy", "kube-controller-manager", "kube-scheduler-upstream"} {
		if !exists(filepath.Join(binDir, b)) {
			return nil, fmt.Errorf("%s is missing: run hack/build-node.sh", filepath.Join(binDir, b))
		}
	}
	for _, b := range []string{"containerd", "ctr", "runc"} {
		if _, err := exec.LookPath(b); err != nil {
			return nil, fmt.Errorf("%s is missing: run hack/install-node-deps.sh", b)
		}
	}
	c := &Cluster{Dir: dir, netns: map[string]bool{}}
	if es, err := os.ReadDir(netnsDir); err == nil {
		for _, e := range es {
			c.netns[e.Name()] = true
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	for i, name := range cp.Node.Names {
		n := &Node{Name: name, Dir: filepath.Join(dir, name), Port: 10250 + 100*i, cgroupRoot: "/wasmsched-" + name}
		n.Socket = n.p("containerd", "containerd.sock")
		c.Nodes = append(c.Nodes, n)
		if err := os.MkdirAll(n.Dir, 0o700); err != nil {
			c.Stop()
			return nil, err
		}
		if err := n.startContainerd(ctx, filepath.Join(dir, "cni-ipam")); err != nil {
			c.Stop()
			return nil, err
		}
		for _, l := range layouts {
			if err := n.Import(ctx, l); err != nil {
				c.Stop()
				return nil, err
			}
		}
	}
	if err := c.startComponents(cp, binDir); err != nil {
		c.Stop()
		return nil, err
	}
	for _, n := range c.Nodes {
		if err := n.startKubelet(cp, binDir); err != nil {
			c.Stop()
			return nil, err
		}
	}
	for _, n := range c.Nodes {
		if err := c.waitReady(ctx, cp, n, 3*time.Minute); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

func (n *Node) p(parts ...string) string { return filepath.Join(append([]string{n.Dir}, parts...)...) }

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

// BuildPauseImage builds hack/pause of the checkout at root and its image
// layout under dir, and returns the layout: the image SandboxImage names,
// which the nodes run as every pod's sandbox (and tests as a workload).
func BuildPauseImage(root, dir string) (string, error) {
	bin, layout := filepath.Join(dir, "pause"), filepath.Join(dir, "pause-oci")
	for _, c := range [][]string{
		{"go", "build", "-o", bin, "./hack/pause"},
		{"go", "run", "./hack/image", "build", "-out", layout, "-version", "test", "-revision", "test",
			"-binary", "registry.k8s.io/pause@wasmsched=" + runtime.GOOS + "/" + runtime.GOARCH + "=" + bin},
	} {
		cmd := exec.Command(c[0], c[1:]...)
		cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("%v: %w: %s", c, err, out)
		}
	}
	return layout, nil
}

// Import loads the images of an OCI layout directory into containerd's
// k8s.io namespace, each under the name its index annotates.
func (n *Node) Import(ctx context.Context, layout string) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(layout, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(layout, path)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: rel, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		return fmt.Errorf("reading OCI layout %s: %w", layout, err)
	}
	cmd := exec.CommandContext(ctx, "ctr", "--address", n.Socket, "-n", "k8s.io", "images", "import", "--no-unpack", "-")
	cmd.Stdin = &buf
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ctr images import %s: %w: %s", layout, err, out)
	}
	// A short name ("kube-scheduler:v1.37.2-wasmsched") is what a pod's
	// image means with docker.io/library/ before it; the CRI plugin looks
	// images up by that full name only.
	names, err := n.Images(ctx)
	if err != nil {
		return err
	}
	for _, name := range names {
		if strings.Contains(name, "/") || strings.HasPrefix(name, "sha256:") {
			continue
		}
		if err := n.Tag(ctx, name, "docker.io/library/"+name); err != nil {
			return err
		}
		if out, err := exec.CommandContext(ctx, "ctr", "--address", n.Socket, "-n", "k8s.io", "images", "rm", name).CombinedOutput(); err != nil {
			return fmt.Errorf("ctr images rm %s: %w: %s", name, err, out)
		}
	}
	return nil
}

// PushedAs gives each image make image built (kube-scheduler and
// wasm-extender, imported as docker.io/library/NAME:VERSION) its name under
// registry on every Node, as make image-push REGISTRY=registry and a pull
// by the node would: registry/NAME:VERSION.
func (c *Cluster) PushedAs(ctx context.Context, registry string) error {
	for _, n := range c.Nodes {
		names, err := n.Images(ctx)
		if err != nil {
			return err
		}
		for _, name := range names {
			short, ok := strings.CutPrefix(name, "docker.io/library/")
			if ok && (strings.HasPrefix(short, "kube-scheduler:") || strings.HasPrefix(short, "wasm-extender:")) {
				if err := n.Tag(ctx, name, registry+"/"+short); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Images lists the names of the images containerd holds for the node.
func (n *Node) Images(ctx context.Context) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ctr", "--address", n.Socket, "-n", "k8s.io", "images", "ls", "-q").Output()
	if err != nil {
		return nil, fmt.Errorf("ctr images ls: %w", err)
	}
	return strings.Fields(string(out)), nil
}

// Tag gives the image src the name dst too, as a push of src to dst's
// registry and a pull by the node would.
func (n *Node) Tag(ctx context.Context, src, dst string) error {
	if out, err := exec.CommandContext(ctx, "ctr", "--address", n.Socket, "-n", "k8s.io", "images", "tag", "--force", src, dst).CombinedOutput(); err != nil {
		return fmt.Errorf("ctr images tag %s %s: %w: %s", src, dst, err, out)
	}
	return nil
}

// startComponents starts what a cluster runs once: kube-controller-manager,
// the default scheduler and kube-proxy (the Nodes share one network
// namespace, whose Service rules one kube-proxy keeps).
func (c *Cluster) startComponents(cp *controlplane.ControlPlane, binDir string) error {
	creds := cp.Node
	if _, err := startProcess(&c.procs, c.Dir, "kube-controller-manager", filepath.Join(binDir, "kube-controller-manager"),
		"--kubeconfig="+creds.ControllerManager, "--authentication-skip-lookup=true",
		"--bind-address=127.0.0.1", "--secure-port=0",
		"--service-account-private-key-file="+creds.ServiceAccountKeyFile, "--root-ca-file="+creds.CAFile,
		"--use-service-account-credentials=true", "--leader-elect=false",
		"--controllers=*,-node-ipam-controller,-persistentvolume-binder-controller,-persistentvolume-attach-detach-controller,-persistentvolume-expander-controller",
		"--node-monitor-grace-period=20s", "--v=1"); err != nil {
		return err
	}
	c.schedBin, c.schedKubeconfig = filepath.Join(binDir, "kube-scheduler-upstream"), cp.SchedulerKubeconfig
	if err := c.StartDefaultScheduler(); err != nil {
		return err
	}
	proxyCfg := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: %s
hostnameOverride: %s
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
clientConnection:
  kubeconfig: %s
conntrack:
  maxPerCore: 0
`, PodSubnet, c.Nodes[0].Name, creds.Proxy)
	if err := os.WriteFile(filepath.Join(c.Dir, "kube-proxy.yaml"), []byte(proxyCfg), 0o600); err != nil {
		return err
	}
	c.proxyBin = filepath.Join(binDir, "kube-proxy")
	_, err := startProcess(&c.procs, c.Dir, "kube-proxy", c.proxyBin, "--config="+filepath.Join(c.Dir, "kube-proxy.yaml"), "--v=1")
	return err
}

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

// StaticPodDir is where the kubelet reads static pod manifests.
func (n *Node) StaticPodDir() string { return n.p("manifests") }

func (c *Cluster) waitReady(ctx context.Context, cp *controlplane.ControlPlane, n *Node, timeout time.Duration) error {
	client, err := kubernetes.NewForConfig(cp.RestConfig(controlplane.AdminUser))
	if err != nil {
		return err
	}
	last := "not registered"
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if err := ctx.Err(); err != nil {
			return err
		}
		for _, p := range append(append([]*exec.Cmd{}, c.procs...), n.procs...) {
			if controlplane.Exited(p) {
				return fmt.Errorf("%s exited: %s", filepath.Base(p.Path), controlplane.LogTail(logPath(p), 4000))
			}
		}
		node, err := client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			continue
		}
		for _, c := range node.Status.Conditions {
			if c.Type == v1.NodeReady {
				if c.Status == v1.ConditionTrue {
					return nil
				}
				last = c.Reason + ": " + c.Message
			}
		}
	}
	return fmt.Errorf("node %s not Ready within %s (last: %s); kubelet log tail:\n%s", n.Name, timeout, last, n.LogTail("kubelet"))
}

// startProcess starts a component with its output in dir/<name>.log and
// adds it to procs.
func startProcess(procs *[]*exec.Cmd, dir, name, bin string, args ...string) (*exec.Cmd, error) {
	cmd, err := controlplane.StartProcess(false, filepath.Join(dir, name+".log"), bin, args...)
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() { _ = cmd.Wait() }()
	*procs = append(*procs, cmd)
	return cmd, nil
}

// logPath is where startProcess sends a component's output.
func logPath(cmd *exec.Cmd) string {
	if f, ok := cmd.Stdout.(*os.File); ok {
		return f.Name()
	}
	return filepath.Base(cmd.Path)
}

// stop stops processes, last started first: TERM to each group, KILL after
// 10 s.
func stop(procs []*exec.Cmd) {
	for i := len(procs) - 1; i >= 0; i-- {
		c := procs[i]
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
		for j := 0; j < 100 && !controlplane.Exited(c); j++ {
			time.Sleep(100 * time.Millisecond)
		}
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	}
}

// Stop stops every kubelet first (their pods stay as containerd's until
// it goes too), removes the pods' containers, stops the containerds and
// the cluster components, and cleans what they leave in the machine
// (iptables chains, network namespaces, mounts, cgroups), so that nothing
// of the cluster outlives the test.
func (c *Cluster) Stop() {
	for _, n := range c.Nodes {
		if len(n.procs) > 1 {
			stop(n.procs[1:]) // the kubelet
		}
	}
	for _, n := range c.Nodes {
		if len(n.procs) > 0 {
			n.removeContainers()
			stop(n.procs[:1]) // containerd
		}
		n.procs = nil
	}
	stop(c.procs)
	c.procs = nil
	if c.proxyBin != "" {
		_ = exec.Command(c.proxyBin, "--cleanup").Run() // kube-proxy's iptables chains
	}
	// The kubelet's own chains: its canaries, and the firewall that drops
	// traffic to 127.0.0.0/8 from other addresses.
	for _, c := range [][]string{
		{"-D", "INPUT", "-j", "KUBE-FIREWALL"}, {"-D", "OUTPUT", "-j", "KUBE-FIREWALL"},
		{"-F", "KUBE-FIREWALL"}, {"-X", "KUBE-FIREWALL"}, {"-X", "KUBE-KUBELET-CANARY"},
		{"-t", "nat", "-X", "KUBE-KUBELET-CANARY"}, {"-t", "mangle", "-X", "KUBE-KUBELET-CANARY"}, {"-t", "mangle", "-X", "KUBE-IPTABLES-HINT"},
	} {
		_ = exec.Command("iptables", c...).Run()
	}
	// The pods' network namespaces (their veths go with them).
	if es, err := os.ReadDir(netnsDir); err == nil && c.netns != nil {
		for _, e := range es {
			if !c.netns[e.Name()] && strings.HasPrefix(e.Name(), "cni-") {
				_ = run("ip", "netns", "delete", e.Name())
			}
		}
	}
	// Mounts of the pods' volumes and snapshots would keep the state
	// directory busy.
	if b, err := os.ReadFile("/proc/self/mounts"); err == nil {
		var ms []string
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], c.Dir+"/") {
				ms = append(ms, f[1])
			}
		}
		for i := len(ms) - 1; i >= 0; i-- {
			_ = syscall.Unmount(ms[i], syscall.MNT_DETACH)
		}
	}
	for _, n := range c.Nodes {
		n.removeCgroupRoot()
	}
}

// StartDefaultScheduler starts the cluster's default scheduler, upstream's
// kube-scheduler, as a control plane runs one: it places the pods that name
// no other scheduler (the chart's). Start starts it.
func (c *Cluster) StartDefaultScheduler() error {
	if c.sched != nil {
		return errors.New("the default scheduler runs already")
	}
	cmd, err := startProcess(&c.procs, c.Dir, "kube-scheduler", c.schedBin,
		"--kubeconfig="+c.schedKubeconfig, "--leader-elect=false", "--secure-port=0", "--v=1")
	c.sched = cmd
	return err
}

// StopDefaultScheduler stops the default scheduler, as an operator who
// replaces it with another (a static pod) moves its manifest away.
func (c *Cluster) StopDefaultScheduler() {
	if c.sched == nil {
		return
	}
	stop([]*exec.Cmd{c.sched})
	for i, p := range c.procs {
		if p == c.sched {
			c.procs = append(c.procs[:i], c.procs[i+1:]...)
			break
		}
	}
	c.sched = nil
}

// LogTail is the end of a cluster component's log (kube-controller-manager,
// kube-scheduler, kube-proxy), for a test's failure message.
func (c *Cluster) LogTail(name string) string {
	return controlplane.LogTail(filepath.Join(c.Dir, name+".log"), 4000)
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

// LogTail is the end of the Node's containerd or kubelet log, for a
// test's failure message.
func (n *Node) LogTail(name string) string {
	return controlplane.LogTail(n.p(name+".log"), 4000)
}

func run(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }
