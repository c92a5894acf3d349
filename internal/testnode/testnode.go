// Package testnode runs the node side of a real one-node cluster beside a
// control plane started with controlplane.Options.NodeAddress: a bridge
// for the pods' network, containerd with runc and the CNI bridge plugin
// (Debian's, hack/install-node-deps.sh), kube-controller-manager, the
// upstream kube-scheduler as the cluster's default scheduler, kube-proxy
// and a kubelet (hack/build-node.sh) that registers a Node and
// runs its pods. Images come from OCI layouts the project builds (make
// image, the pause image of hack/pause): nothing is pulled.
//
// It needs root, as a kubelet does, and owns the machine's bridge
// Bridge, port 10250 and the iptables rules kube-proxy writes while it
// runs.
package testnode

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
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

// Node is a running node: its processes and where they keep their state.
type Node struct {
	// Name is the Node's name.
	Name string
	// Dir holds the node's state and its components' logs.
	Dir string
	// Socket is containerd's address.
	Socket string

	procs    []*exec.Cmd
	proxyBin string
	// netns are the network namespaces there were before the node started:
	// Stop removes the pods' others, which the kubelet had no time to.
	netns map[string]bool
}

// Start starts containerd, imports the images of layouts, and starts
// kube-controller-manager, kube-proxy and the kubelet of binDir against
// cp, then waits until the Node is Ready.
func Start(ctx context.Context, cp *controlplane.ControlPlane, binDir, dir string, layouts ...string) (*Node, error) {
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
	n := &Node{Name: cp.Node.Name, Dir: dir, Socket: filepath.Join(dir, "containerd", "containerd.sock"), netns: map[string]bool{}}
	if es, err := os.ReadDir(netnsDir); err == nil {
		for _, e := range es {
			n.netns[e.Name()] = true
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := n.startContainerd(ctx); err != nil {
		n.Stop()
		return nil, err
	}
	for _, l := range layouts {
		if err := n.Import(ctx, l); err != nil {
			n.Stop()
			return nil, err
		}
	}
	if err := n.startComponents(cp, binDir); err != nil {
		n.Stop()
		return nil, err
	}
	if err := n.waitReady(ctx, cp, 3*time.Minute); err != nil {
		n.Stop()
		return nil, err
	}
	return n, nil
}

func (n *Node) p(parts ...string) string { return filepath.Join(append([]string{n.Dir}, parts...)...) }

func (n *Node) startContainerd(ctx context.Context) error {
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
`, Bridge, n.p("cni", "ipam"), PodSubnet, Address)
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
	c, err := n.start("containerd", "containerd", "--config", n.p("containerd", "config.toml"))
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if exec.CommandContext(ctx, "ctr", "--address", n.Socket, "version").Run() == nil {
			return nil
		}
		if c.ProcessState != nil {
			break
		}
	}
	return fmt.Errorf("containerd did not answer on %s; %s", n.Socket, n.LogTail("containerd"))
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

func (n *Node) startComponents(cp *controlplane.ControlPlane, binDir string) error {
	c := cp.Node
	if _, err := n.start("kube-controller-manager", filepath.Join(binDir, "kube-controller-manager"),
		"--kubeconfig="+c.ControllerManager, "--authentication-skip-lookup=true",
		"--bind-address=127.0.0.1", "--secure-port=0",
		"--service-account-private-key-file="+c.ServiceAccountKeyFile, "--root-ca-file="+c.CAFile,
		"--use-service-account-credentials=true", "--leader-elect=false",
		"--controllers=*,-node-ipam-controller,-persistentvolume-binder-controller,-persistentvolume-attach-detach-controller,-persistentvolume-expander-controller",
		"--node-monitor-grace-period=20s", "--v=1"); err != nil {
		return err
	}
	// The cluster's default scheduler, upstream's, as a control plane runs
	// one: it places what names no other scheduler (the chart's pods).
	if _, err := n.start("kube-scheduler", filepath.Join(binDir, "kube-scheduler-upstream"),
		"--kubeconfig="+cp.SchedulerKubeconfig, "--leader-elect=false", "--secure-port=0", "--v=1"); err != nil {
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
`, PodSubnet, n.Name, c.Proxy)
	if err := os.WriteFile(n.p("kube-proxy.yaml"), []byte(proxyCfg), 0o600); err != nil {
		return err
	}
	n.proxyBin = filepath.Join(binDir, "kube-proxy")
	if _, err := n.start("kube-proxy", n.proxyBin, "--config="+n.p("kube-proxy.yaml"), "--v=1"); err != nil {
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
port: 10250
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
`, n.Socket, Address, c.CAFile, n.p("manifests"), n.p("pod-logs"))
	if err := os.WriteFile(n.p("kubelet.yaml"), []byte(kubeletCfg), 0o600); err != nil {
		return err
	}
	_, err := n.start("kubelet", filepath.Join(binDir, "kubelet"),
		"--config="+n.p("kubelet.yaml"), "--kubeconfig="+c.Kubelet,
		"--root-dir="+n.p("kubelet"), "--hostname-override="+n.Name, "--node-ip="+Address, "--v=1")
	return err
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

// StaticPodDir is where the kubelet reads static pod manifests.
func (n *Node) StaticPodDir() string { return n.p("manifests") }

func (n *Node) waitReady(ctx context.Context, cp *controlplane.ControlPlane, timeout time.Duration) error {
	client, err := kubernetes.NewForConfig(cp.RestConfig(controlplane.AdminUser))
	if err != nil {
		return err
	}
	last := "not registered"
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if err := ctx.Err(); err != nil {
			return err
		}
		for _, c := range n.procs {
			if c.ProcessState != nil {
				return fmt.Errorf("%s exited: %s", filepath.Base(c.Path), n.LogTail(filepath.Base(c.Path)))
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

// start runs a component with its output in Dir/<name>.log. Its process
// group dies with this process.
func (n *Node) start(name, bin string, args ...string) (*exec.Cmd, error) {
	logf, err := os.Create(n.p(name + ".log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() { _ = cmd.Wait() }()
	n.procs = append(n.procs, cmd)
	return cmd, nil
}

// Stop stops the kubelet first (its pods stay as containerd's until it
// goes too), then the rest in reverse order, and removes the pods'
// containers so that nothing of the node outlives the test.
func (n *Node) Stop() {
	for i := len(n.procs) - 1; i >= 0; i-- {
		c := n.procs[i]
		if filepath.Base(c.Path) == "containerd" {
			n.removeContainers()
		}
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
		for j := 0; j < 100 && c.ProcessState == nil; j++ {
			time.Sleep(100 * time.Millisecond)
		}
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	}
	n.procs = nil
	if n.proxyBin != "" {
		_ = exec.Command(n.proxyBin, "--cleanup").Run() // kube-proxy's iptables chains
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
	if es, err := os.ReadDir(netnsDir); err == nil && n.netns != nil {
		for _, e := range es {
			if !n.netns[e.Name()] && strings.HasPrefix(e.Name(), "cni-") {
				_ = run("ip", "netns", "delete", e.Name())
			}
		}
	}
	// Mounts of the pods' volumes and snapshots would keep the state
	// directory busy.
	if b, err := os.ReadFile("/proc/self/mounts"); err == nil {
		var ms []string
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], n.Dir+"/") {
				ms = append(ms, f[1])
			}
		}
		for i := len(ms) - 1; i >= 0; i-- {
			_ = syscall.Unmount(ms[i], syscall.MNT_DETACH)
		}
	}
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

// LogTail is the end of a component's log (containerd, kubelet, kube-proxy,
// kube-controller-manager), for a test's failure message.
func (n *Node) LogTail(name string) string {
	f, err := os.Open(n.p(name + ".log"))
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > 4000 {
		_, _ = f.Seek(st.Size()-4000, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

func run(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }
