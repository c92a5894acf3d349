// Package testregistry runs a real OCI distribution registry for tests:
// go-containerregistry's registry (the distribution API, in memory) on
// 127.0.0.1, served over TLS with a certificate of its own CA and behind
// HTTP basic auth. It can be stopped and started again on the same address
// with its content kept, to test a registry that is down.
package testregistry

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// Registry is a running test registry.
type Registry struct {
	// Host is host:port, as references name it.
	Host string
	// CAPEM is the CA certificate the registry's certificate chains to.
	CAPEM []byte
	// User and Password are the only credentials it accepts.
	User, Password string

	handler http.Handler
	cert    tls.Certificate
	mu      sync.Mutex
	srv     *http.Server
	// Requests counts the requests it answered (authorized or not), and
	// BlobGets the blob downloads among them.
	Requests, BlobGets atomic.Int64
}

// Start runs a registry until the test ends.
func Start(t testing.TB) *Registry {
	t.Helper()
	ca, cert, err := certificates()
	if err != nil {
		t.Fatal(err)
	}
	r := &Registry{CAPEM: ca, User: "policy-puller", Password: "s3cret-" + randomHex(8), cert: cert,
		handler: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.Host = l.Addr().String()
	r.serve(l)
	t.Cleanup(r.Stop)
	return r
}

func (r *Registry) serve(l net.Listener) {
	srv := &http.Server{
		Handler:           http.HandlerFunc(r.authorize),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{r.cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		// Handshakes a test refuses on purpose (an unknown CA) are not news.
		ErrorLog: log.New(io.Discard, "", 0),
		// HTTP/1.1 only: go-containerregistry's registry holds one lock
		// while it reads an upload's body, so two uploads on one HTTP/2
		// connection exhaust its flow-control window and wait on each
		// other forever (two 50 MB layers pushed at once hung).
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	go func() { _ = srv.ServeTLS(l, "", "") }()
}

// authorize answers as a registry with basic auth does: 401 with a
// challenge, and the distribution API's error body.
func (r *Registry) authorize(w http.ResponseWriter, req *http.Request) {
	r.Requests.Add(1)
	if u, p, ok := req.BasicAuth(); !ok || u != r.User || p != r.Password {
		w.Header().Set("WWW-Authenticate", `Basic realm="wasmsched-test-registry"`)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`))
		return
	}
	if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/sha256:") {
		r.BlobGets.Add(1)
	}
	r.handler.ServeHTTP(w, req)
}

// Stop stops serving; connections are refused until Restart.
func (r *Registry) Stop() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = srv.Close()
	}
}

// Restart serves again on the same address, with the same content.
func (r *Registry) Restart(t testing.TB) {
	t.Helper()
	var l net.Listener
	var err error
	// The port was just released; another process may take it, rarely.
	for i := 0; i < 50; i++ {
		if l, err = net.Listen("tcp", r.Host); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("restarting the registry on %s: %v", r.Host, err)
	}
	r.serve(l)
}

// DockerConfigJSON is a .dockerconfigjson with the registry's credentials,
// as kubectl create secret docker-registry writes it.
func (r *Registry) DockerConfigJSON() []byte {
	auth := base64.StdEncoding.EncodeToString([]byte(r.User + ":" + r.Password))
	data, _ := json.Marshal(map[string]any{"auths": map[string]any{r.Host: map[string]string{
		"username": r.User, "password": r.Password, "auth": auth,
	}}})
	return data
}

// DockerConfigDir writes a docker config.json with the credentials into a
// new directory, for DOCKER_CONFIG.
func (r *Registry) DockerConfigDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), r.DockerConfigJSON(), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// CAFile writes the CA certificate to a file.
func (r *Registry) CAFile(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "registry-ca.pem")
	if err := os.WriteFile(p, r.CAPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// RootCAs is a pool with the registry's CA.
func (r *Registry) RootCAs() *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(r.CAPEM)
	return p
}

// certificates makes a CA and a serving certificate for 127.0.0.1 signed
// by it.
func certificates() ([]byte, tls.Certificate, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "wasmsched test registry CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	cert, err := tls.X509KeyPair(
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), cert, nil
}

// KeyPair makes an ECDSA P-256 signing key pair as PEM, unencrypted, with
// sigstore's generator (what cosign generate-key-pair uses).
func KeyPair(t testing.TB) (priv, pub []byte) {
	t.Helper()
	priv, pub, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return priv, pub
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return fmt.Sprintf("%x", b)
}
