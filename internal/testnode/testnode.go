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
	"context"
	"errors"
	"fmt"
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

// LogTail is the end of a cluster component's log (kube-controller-manager,
// kube-scheduler, kube-proxy), for a test's failure message.
func (c *Cluster) LogTail(name string) string {
	return controlplane.LogTail(filepath.Join(c.Dir, name+".log"), 4000)
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
