package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

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
