// Package controlplane runs a real, local Kubernetes control plane for the
// demo and the end-to-end tests: etcd and kube-apiserver built from Go
// modules (hack/build-controlplane.sh), listening only on 127.0.0.1 on free
// ports, with TLS from a CA generated here, token authentication and RBAC.
//
// There is no kubelet and no controller-manager, so the ServiceAccount and
// TaintNodesByCondition admission plugins are disabled (the first needs the
// token controller, the second would taint every new node not-ready).
// StartWith's NodeAddress prepares it for a real node instead (package
// testnode): see Options.
package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ServiceCIDR is the Services' cluster IP range; its first address is the
// kubernetes Service's.
const ServiceCIDR = "10.96.0.0/24"

// Identities with static tokens.
const (
	// AdminUser is in system:masters.
	AdminUser = "admin"
	// SchedulerUser is the identity kube-scheduler's bootstrap RBAC binds to.
	SchedulerUser = "system:kube-scheduler"
)

// ControlPlane is a running etcd + kube-apiserver.
type ControlPlane struct {
	// Dir holds certificates, tokens, kubeconfigs, etcd data and logs.
	Dir string
	// URL is the apiserver's https URL.
	URL string
	// AdminKubeconfig and SchedulerKubeconfig authenticate as AdminUser and SchedulerUser.
	AdminKubeconfig, SchedulerKubeconfig string

	// Node holds the credentials of a real node's components when the
	// control plane was started with Options.NodeAddress.
	Node *NodeCredentials

	caFile      string
	adminToken  string
	schedToken  string
	etcd, apisv *exec.Cmd
}

// Options shape a control plane beyond Start's.
type Options struct {
	// Detach lets the processes outlive this one (the cluster-up command).
	Detach bool
	// NodeAddress, when set, prepares the control plane for a real node
	// whose pods reach the apiserver at this address, a local bridge's
	// (package testnode creates it first): the apiserver binds and
	// advertises it instead of 127.0.0.1, the kubernetes Service gets its
	// endpoint (so in-cluster clients reach it through kube-proxy), kubelets
	// are authorized by the Node authorizer and NodeRestriction, the
	// ServiceAccount and TaintNodesByCondition admission plugins stay on,
	// and NodeCredentials are written for the node's components.
	NodeAddress string
	// NodeNames are the Nodes kubelets register, one kubeconfig each (the
	// identity system:node:<name>); ["node-1"] when empty.
	NodeNames []string
}

// NodeCredentials are the kubeconfigs and files of a real node's
// components, all under the control plane's Dir.
type NodeCredentials struct {
	// Names are the Nodes' names, in Options.NodeNames' order.
	Names []string
	// Address is the apiserver's (and the node's) address.
	Address string
	// Kubelets are the kubeconfigs of each Node's kubelet by name, as
	// system:node:<name> in group system:nodes, which the Node authorizer
	// and NodeRestriction confine to that Node and its pods.
	Kubelets map[string]string
	// ControllerManager and Proxy are kubeconfigs of
	// system:kube-controller-manager and system:kube-proxy, which
	// kube-apiserver's bootstrap RBAC binds.
	ControllerManager, Proxy string
	// CAFile signs every certificate here; CAKeyFile is its key (the
	// controller-manager's signing controller uses both).
	CAFile, CAKeyFile string
	// ServiceAccountKeyFile signs service-account tokens.
	ServiceAccountKeyFile string
}

// Start starts etcd and kube-apiserver with state in dir and waits until
// /readyz answers. With detach the processes outlive this process (the
// cluster-up command); otherwise Stop must be called.
func Start(ctx context.Context, binDir, dir string, detach bool) (*ControlPlane, error) {
	return StartWith(ctx, binDir, dir, Options{Detach: detach})
}

// StartWith is Start with Options.
func StartWith(ctx context.Context, binDir, dir string, o Options) (*ControlPlane, error) {
	detach := o.Detach
	etcdBin, apiBin, _, err := Binaries(binDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	cp := &ControlPlane{Dir: dir}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, apiPort := ports[0], ports[1], ports[2]
	address := "127.0.0.1"
	if o.NodeAddress != "" {
		address = o.NodeAddress
		cp.Node = &NodeCredentials{Names: o.NodeNames, Address: o.NodeAddress, Kubelets: map[string]string{}}
		if len(cp.Node.Names) == 0 {
			cp.Node.Names = []string{"node-1"}
		}
	}
	cp.URL = "https://" + net.JoinHostPort(address, strconv.Itoa(apiPort))
	if err := cp.writeCredentials(); err != nil {
		return nil, err
	}

	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdClient)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(etcdPeer)
	cp.etcd, err = StartProcess(detach, filepath.Join(dir, "etcd.log"), etcdBin,
		"--name=wasmsched", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=wasmsched="+peerURL, "--unsafe-no-fsync", "--log-level=warn")
	if err != nil {
		return nil, fmt.Errorf("starting etcd: %w", err)
	}
	p := func(name string) string { return filepath.Join(dir, name) }
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=" + address, "--advertise-address=" + address, "--secure-port=" + strconv.Itoa(apiPort),
		"--tls-cert-file=" + p("apiserver.crt"), "--tls-private-key-file=" + p("apiserver.key"),
		"--client-ca-file=" + p("ca.crt"),
		"--token-auth-file=" + p("tokens.csv"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + p("sa.key"), "--service-account-signing-key-file=" + p("sa.key"),
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--allow-privileged=true", "--profiling=false", "--v=1"}
	if cp.Node == nil {
		args = append(args, "--authorization-mode=RBAC",
			"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
			// Since v1.37 the endpoint reconciler refuses a loopback advertise
			// address; nothing here needs the kubernetes Service's endpoints.
			"--endpoint-reconciler-type=none")
	} else {
		// The apiserver reaches the kubelet (logs, exec) with a client
		// certificate the kubelet's client CA verifies.
		// The node's name resolves nowhere: the apiserver dials its
		// InternalIP.
		args = append(args, "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
			"--kubelet-client-certificate="+p("apiserver-kubelet-client.crt"), "--kubelet-client-key="+p("apiserver-kubelet-client.key"),
			"--kubelet-preferred-address-types=InternalIP",
			// The front proxy's CA, which kubeadm configures and every
			// component with delegated authentication (kube-scheduler's
			// secure port) loads from kube-system's
			// extension-apiserver-authentication ConfigMap. The local CA
			// signs its one client, front-proxy-client.
			"--requestheader-client-ca-file="+p("ca.crt"), "--requestheader-allowed-names=front-proxy-client",
			"--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--proxy-client-cert-file="+p("front-proxy-client.crt"), "--proxy-client-key-file="+p("front-proxy-client.key"))
	}
	cp.apisv, err = StartProcess(detach, p("kube-apiserver.log"), apiBin, args...)
	if err != nil {
		cp.Stop()
		return nil, fmt.Errorf("starting kube-apiserver: %w", err)
	}
	if err := cp.writeState(); err != nil {
		cp.Stop()
		return nil, err
	}
	if err := cp.waitReady(ctx, 90*time.Second); err != nil {
		cp.Stop()
		return nil, err
	}
	return cp, nil
}

// writeState records the PIDs and URL, for Stop from another process.
func (cp *ControlPlane) writeState() error {
	s := fmt.Sprintf("%d %d %s\n", cp.etcd.Process.Pid, cp.apisv.Process.Pid, cp.URL)
	return os.WriteFile(filepath.Join(cp.Dir, "state"), []byte(s), 0o600)
}

// StopDir stops a control plane started (detached) with state in dir.
func StopDir(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "state"))
	if err != nil {
		return err
	}
	var etcdPid, apiPid int
	var url string
	if _, err := fmt.Sscan(string(b), &etcdPid, &apiPid, &url); err != nil {
		return fmt.Errorf("%s/state: %w", dir, err)
	}
	for _, pid := range []int{apiPid, etcdPid} {
		terminate(pid)
	}
	return os.Remove(filepath.Join(dir, "state"))
}

func terminate(pid int) {
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for i := 0; i < 100; i++ {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// Stop terminates the apiserver, then etcd.
func (cp *ControlPlane) Stop() {
	for _, c := range []*exec.Cmd{cp.apisv, cp.etcd} {
		if c == nil || c.Process == nil {
			continue
		}
		_ = c.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _, _ = c.Process.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = c.Process.Kill()
			<-done
		}
	}
	_ = os.Remove(filepath.Join(cp.Dir, "state"))
}

func (cp *ControlPlane) waitReady(ctx context.Context, timeout time.Duration) error {
	ca, err := os.ReadFile(cp.caFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if Exited(cp.apisv) {
			last = "kube-apiserver exited"
			break
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cp.URL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+cp.adminToken)
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("kube-apiserver not ready within %s (last: %s); log tail:\n%s", timeout, last, LogTail(filepath.Join(cp.Dir, "kube-apiserver.log"), 3000))
}

// RestConfig returns a client config for user (AdminUser or SchedulerUser).
func (cp *ControlPlane) RestConfig(user string) *rest.Config {
	token := cp.adminToken
	if user == SchedulerUser {
		token = cp.schedToken
	}
	return &rest.Config{Host: cp.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAFile: cp.caFile}, QPS: 200, Burst: 400}
}

// Client returns an admin clientset.
func (cp *ControlPlane) Client() (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(cp.RestConfig(AdminUser))
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	if len(ports) != n {
		return nil, errors.New("no free ports")
	}
	return ports, nil
}
