package testnode

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/wasmsched/wasmsched/internal/controlplane"
)

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
