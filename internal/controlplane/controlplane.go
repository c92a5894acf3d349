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
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Environment variables that point the e2e tests at another build line
// (docs/kubernetes.md): the Kubernetes version of the control plane to start
// and the kube-scheduler binary to test.
const (
	KubeVersionEnv = "WASMSCHED_KUBE_VERSION"
	SchedulerEnv   = "WASMSCHED_SCHEDULER"
)

// Version returns the Kubernetes version of the control plane to run:
// $WASMSCHED_KUBE_VERSION, or else ModuleVersion(root).
func Version(root string) string {
	if v := os.Getenv(KubeVersionEnv); v != "" {
		return "v" + strings.TrimPrefix(v, "v")
	}
	return ModuleVersion(root)
}

// ModuleVersion returns the k8s.io/kubernetes version root/go.mod pins: the
// main build line's version, which bin/kube-scheduler reports. The version
// is stated once, in the module file (docs/kubernetes.md).
func ModuleVersion(root string) string {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == "k8s.io/kubernetes" && strings.HasPrefix(f[1], "v1.") {
			return f[1]
		}
	}
	return "unknown (go.mod requires no k8s.io/kubernetes)"
}

// SchedulerBinary returns the kube-scheduler under test: $WASMSCHED_SCHEDULER
// (absolute, or relative to root), or root/bin/kube-scheduler.
func SchedulerBinary(root string) string {
	if p := os.Getenv(SchedulerEnv); p != "" {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(root, p)
	}
	return filepath.Join(root, "bin", "kube-scheduler")
}

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

// BinDir returns the directory hack/build-controlplane.sh builds the
// binaries of Version into: etcd, kube-apiserver, kubectl and the upstream
// kube-scheduler.
func BinDir(root string) string { return filepath.Join(root, ".cache", "bin", Version(root)) }

// Binaries returns the paths of etcd, kube-apiserver and kubectl, and an error
// naming the first that is missing.
func Binaries(binDir string) (etcd, apiserver, kubectl string, err error) {
	etcd = filepath.Join(binDir, "etcd")
	apiserver = filepath.Join(binDir, "kube-apiserver")
	kubectl = filepath.Join(binDir, "kubectl")
	for _, p := range []string{etcd, apiserver, kubectl} {
		if _, e := os.Stat(p); e != nil {
			return "", "", "", fmt.Errorf("%s is missing: run hack/build-controlplane.sh %s (make controlplane)", p, filepath.Base(binDir))
		}
	}
	return etcd, apiserver, kubectl, nil
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

// StartProcess starts bin with args, its output in logPath, in a process
// group of its own (so a stop reaches its children). Unless detach, it is
// killed when this process dies, so a crashed test leaves nothing running.
func StartProcess(detach bool, logPath, bin string, args ...string) (*exec.Cmd, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if !detach {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, err
	}
	_ = logf.Close()
	return cmd, nil
}

// Exited reports whether a started process has exited (it may not have been
// reaped yet: a zombie counts as exited).
func Exited(cmd *exec.Cmd) bool {
	if cmd.ProcessState != nil {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		return true
	}
	// The state follows the command name in parentheses: "pid (comm) S ...".
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X'
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

// LogTail is the last n bytes of a component's log file (or why it cannot
// be read), for an error message.
func LogTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
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

// writeCredentials creates the CA, the serving certificate (SAN 127.0.0.1,
// or the node address and the kubernetes Service's IP), the
// service-account key, the token file and two kubeconfigs; with a node,
// also its components' kubeconfigs and the apiserver's kubelet client
// certificate.
func (cp *ControlPlane) writeCredentials() error {
	p := func(name string) string { return filepath.Join(cp.Dir, name) }
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "wasmsched-local-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	files := map[string][]byte{"ca.crt": pemBlock("CERTIFICATE", caDER)}
	keys := map[string]*ecdsa.PrivateKey{}
	issue := func(name string, serial int64, tmpl *x509.Certificate) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(365*24*time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		files[name+".crt"], keys[name+".key"] = pemBlock("CERTIFICATE", der), key
		return nil
	}
	ips := []net.IP{net.ParseIP("127.0.0.1")}
	dns := []string{"localhost", "kubernetes.default.svc"}
	if cp.Node != nil {
		ips = append(ips, net.ParseIP(cp.Node.Address), serviceIP())
		dns = append(dns, "kubernetes", "kubernetes.default", "kubernetes.default.svc.cluster.local")
	}
	if err := issue("apiserver", 2, &x509.Certificate{Subject: pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IPAddresses: ips, DNSNames: dns}); err != nil {
		return err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	keys["sa.key"] = saKey
	cp.adminToken, cp.schedToken = randomToken(), randomToken()
	tokens := fmt.Sprintf("%s,%s,admin-uid,\"system:masters\"\n%s,%s,scheduler-uid\n", cp.adminToken, AdminUser, cp.schedToken, SchedulerUser)
	cp.caFile = p("ca.crt")
	cp.AdminKubeconfig, cp.SchedulerKubeconfig = p("admin.kubeconfig"), p("scheduler.kubeconfig")
	files["admin.kubeconfig"] = kubeconfig(cp.URL, cp.caFile, AdminUser, cp.adminToken)
	files["scheduler.kubeconfig"] = kubeconfig(cp.URL, cp.caFile, "scheduler", cp.schedToken)
	if n := cp.Node; n != nil {
		if err := issue("apiserver-kubelet-client", 3, &x509.Certificate{Subject: pkix.Name{CommonName: "kube-apiserver-kubelet-client"},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			return err
		}
		if err := issue("front-proxy-client", 4, &x509.Certificate{Subject: pkix.Name{CommonName: "front-proxy-client"},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			return err
		}
		keys["ca.key"] = caKey
		n.CAFile, n.CAKeyFile, n.ServiceAccountKeyFile = cp.caFile, p("ca.key"), p("sa.key")
		type cred struct {
			file, user, group string
			path              *string
		}
		creds := []cred{
			{"controller-manager.kubeconfig", "system:kube-controller-manager", "", &n.ControllerManager},
			{"proxy.kubeconfig", "system:kube-proxy", "", &n.Proxy},
		}
		kubelets := make([]string, len(n.Names))
		for i, name := range n.Names {
			creds = append(creds, cred{"kubelet-" + name + ".kubeconfig", "system:node:" + name, "system:nodes", &kubelets[i]})
		}
		for _, c := range creds {
			t := randomToken()
			line := fmt.Sprintf("%s,%s,%s-uid", t, c.user, strings.NewReplacer(":", "-").Replace(c.user))
			if c.group != "" {
				line += fmt.Sprintf(",%q", c.group)
			}
			tokens += line + "\n"
			files[c.file], *c.path = kubeconfig(cp.URL, cp.caFile, strings.NewReplacer(":", "-").Replace(c.user), t), p(c.file)
		}
		for i, name := range n.Names {
			n.Kubelets[name] = kubelets[i]
		}
	}
	files["tokens.csv"] = []byte(tokens)
	for name, k := range keys {
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return err
		}
		files[name] = pemBlock("EC PRIVATE KEY", der)
	}
	for name, b := range files {
		if err := os.WriteFile(p(name), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// serviceIP is the kubernetes Service's cluster IP, the first of ServiceCIDR.
func serviceIP() net.IP {
	_, n, _ := net.ParseCIDR(ServiceCIDR)
	ip := n.IP.To4()
	return net.IPv4(ip[0], ip[1], ip[2], ip[3]+1)
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}

func kubeconfig(url, ca, user, token string) []byte {
	return []byte(strings.TrimSpace(fmt.Sprintf(`
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: %q, certificate-authority: %q}
users:
- name: %s
  user: {token: %q}
contexts:
- name: local
  context: {cluster: local, user: %s}
current-context: local
`, url, ca, user, token, user)) + "\n")
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
