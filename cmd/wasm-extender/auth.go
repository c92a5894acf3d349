package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"

	"k8s.io/klog/v2"
)

// The extender runs every policy on whatever pod a request names and reads
// the cluster for it, so it answers only the scheduler: over TLS, with a
// client certificate its CA signed (the scheduler's extender tlsConfig
// presents one), and optionally only for the names allowed. A request
// without one gets 401 and one with another name 403, before its body is
// read: it runs no policy, and counts toward no breaker or quarantine.
// /healthz stays open for probes (kubelets present no certificate), as
// kube-scheduler's own /healthz does; /metrics is the scheduler's only.

// authOptions are the flags that decide who may call the extender.
type authOptions struct {
	certFile, keyFile string
	clientCAFile      string
	allowedNames      []string
	insecureHTTP      bool
}

// serverTLS returns the TLS configuration the extender serves with, or nil
// for plain HTTP (only with --insecure-serve-http), or why it cannot start.
func (o *authOptions) serverTLS() (*tls.Config, error) {
	if o.insecureHTTP {
		if o.certFile != "" || o.clientCAFile != "" {
			return nil, errors.New("--insecure-serve-http serves plain HTTP: leave out --tls-cert-file and --client-ca-file, or drop it")
		}
		return nil, nil
	}
	if o.certFile == "" || o.keyFile == "" {
		return nil, errors.New("the extender serves HTTPS with client certificates: set --tls-cert-file, --tls-private-key-file and --client-ca-file (the CA that signed the scheduler's extender client certificate); --insecure-serve-http serves anyone over plain HTTP, for tests only")
	}
	if o.clientCAFile == "" {
		return nil, errors.New("--client-ca-file is required: the CA that signed the client certificate the scheduler presents (its extender tlsConfig certFile); without it anyone who reaches the port could run every policy")
	}
	pem, err := os.ReadFile(o.clientCAFile)
	if err != nil {
		return nil, fmt.Errorf("--client-ca-file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--client-ca-file %s holds no PEM certificate", o.clientCAFile)
	}
	cert, err := tls.LoadX509KeyPair(o.certFile, o.keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert-file/--tls-private-key-file: %w", err)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientCAs:    pool,
		// Verified when given; the handlers require one (authenticated),
		// but /healthz, which probes call without one.
		ClientAuth: tls.VerifyClientCertIfGiven,
		MinVersion: tls.VersionTLS12,
	}, nil
}

// authenticated wraps next: over TLS, a request must carry a client
// certificate the client CA verified, whose common name or a DNS name is
// allowed (any, when none are named). Plain HTTP (--insecure-serve-http)
// lets every request through.
func (o *authOptions) authenticated(next http.Handler) http.Handler {
	if o.insecureHTTP {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			klog.V(2).InfoS("Extender request refused: no client certificate", "path", r.URL.Path, "remote", r.RemoteAddr)
			http.Error(w, "a client certificate signed by the extender's --client-ca-file is required", http.StatusUnauthorized)
			return
		}
		leaf := r.TLS.VerifiedChains[0][0]
		if len(o.allowedNames) > 0 && !slices.Contains(o.allowedNames, leaf.Subject.CommonName) &&
			!slices.ContainsFunc(leaf.DNSNames, func(n string) bool { return slices.Contains(o.allowedNames, n) }) {
			klog.V(2).InfoS("Extender request refused: client not allowed", "path", r.URL.Path, "remote", r.RemoteAddr, "client", leaf.Subject.CommonName)
			http.Error(w, fmt.Sprintf("client %q is not in --allowed-client-names", leaf.Subject.CommonName), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// splitNames parses a comma-separated flag value.
func splitNames(s string) []string {
	var out []string
	for _, n := range strings.Split(s, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}
