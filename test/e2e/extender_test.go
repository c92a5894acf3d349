package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/controlplane"
)

// extenderCerts issues, into dir, a CA and what the extender and its
// callers present: the serving certificate (127.0.0.1), the scheduler's
// client certificate (kube-scheduler), another client of the same CA
// (intruder), and a client of another CA (stranger).
func extenderCerts(t *testing.T, dir string) map[string]string {
	t.Helper()
	paths := map[string]string{}
	write := func(name, typ string, der []byte) {
		paths[name] = filepath.Join(dir, name)
		if err := os.WriteFile(paths[name], pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	newCA := func(name string) (*x509.Certificate, *ecdsa.PrivateKey) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		cert, _ := x509.ParseCertificate(der)
		write(name+".crt", "CERTIFICATE", der)
		return cert, key
	}
	issue := func(ca *x509.Certificate, caKey *ecdsa.PrivateKey, name string, serial int64, usage x509.ExtKeyUsage) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		write(name+".crt", "CERTIFICATE", der)
		write(name+".key", "EC PRIVATE KEY", kb)
	}
	ca, caKey := newCA("extender-ca")
	issue(ca, caKey, "extender", 2, x509.ExtKeyUsageServerAuth)
	issue(ca, caKey, "kube-scheduler", 3, x509.ExtKeyUsageClientAuth)
	issue(ca, caKey, "intruder", 4, x509.ExtKeyUsageClientAuth)
	other, otherKey := newCA("other-ca")
	issue(other, otherKey, "stranger", 2, x509.ExtKeyUsageClientAuth)
	return paths
}

// httpsClient trusts the extender's CA and presents the named client
// certificate ("": none).
func httpsClient(t *testing.T, certs map[string]string, client string) *http.Client {
	t.Helper()
	caPEM, err := os.ReadFile(certs["extender-ca.crt"])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cfg := &tls.Config{RootCAs: pool}
	if client != "" {
		c, err := tls.LoadX509KeyPair(certs[client+".crt"], certs[client+".key"])
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
}

// The unmodified upstream kube-scheduler (at the control plane's version)
// calls bin/wasm-extender over TLS with the client certificate its
// extender tlsConfig names: pods land per policy with nodeCacheCapable
// true and false, a rejected pod's FailedScheduling carries the policy's
// reason, and a policy reload takes effect through the extender. Anyone
// else gets 401 (no certificate, or another CA's) or 403 (a name not
// allowed), runs no policy and moves no breaker.
func TestExtenderWithUpstreamScheduler(t *testing.T) {

	e := newEnv(t, "extender")
	e.node("team-a", map[string]string{"team": "a"}, "4")
	e.node("shared-1", nil, "4")
	e.node("shared-2", nil, "4")
	e.policyConfigMap("team", module(t, "team-isolation"))
	e.policyConfigMap("placement", module(t, "bin-packing"))
	// A policy that traps for pods labelled attack=panic (and answers
	// the others): its breaker opens only on failures of real callers.
	e.policyConfigMap("adversary", module(t, "testdata/adversary"))

	// The extender, with the same args the plugin takes.
	args := filepath.Join(e.dir, "policies.yaml")
	if err := os.WriteFile(args, []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: WasmPolicyArgs
compilationCacheDir: `+filepath.Join(e.dir, "ext-cache")+`
policies:
- name: team-isolation
  source: `+cmSource(e, "team")+`
  config: key=team
- name: placement
  source: `+cmSource(e, "placement")+`
  config: cpu=1
- name: adversary
  source: `+cmSource(e, "adversary")+`
  failurePolicy: Ignore
`), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	extLog := filepath.Join(e.dir, "extender.log")
	logf, _ := os.Create(extLog)
	certs := extenderCerts(t, e.dir)
	// Without TLS and a client CA it does not start.
	if out, err := exec.Command(filepath.Join(root, "bin", "wasm-extender"), "--config", args, "--kubeconfig", cp.SchedulerKubeconfig, "--listen", addr).CombinedOutput(); err == nil || !strings.Contains(string(out), "serves HTTPS with client certificates") {
		t.Errorf("the extender without TLS: %v, %s; want a refusal to start", err, out)
	}
	ext := exec.Command(filepath.Join(root, "bin", "wasm-extender"), "--config", args, "--kubeconfig", cp.SchedulerKubeconfig, "--listen", addr, "-v=2",
		"--tls-cert-file", certs["extender.crt"], "--tls-private-key-file", certs["extender.key"],
		"--client-ca-file", certs["extender-ca.crt"], "--allowed-client-names", "kube-scheduler")
	ext.Stdout, ext.Stderr = logf, logf
	if err := ext.Start(); err != nil {
		t.Fatalf("starting bin/wasm-extender (make build): %v", err)
	}
	t.Cleanup(func() { _ = ext.Process.Kill() })
	sched := httpsClient(t, certs, "kube-scheduler")
	deadline := time.Now().Add(60 * time.Second)
	for {
		// /healthz answers probes without a certificate.
		resp, err := httpsClient(t, certs, "").Get("https://" + addr + "/healthz")
		if err == nil && resp.StatusCode == http.StatusOK {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(extLog)
			t.Fatalf("extender not healthy within 60s: %v\n%s", err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Two unmodified upstream schedulers, one per nodeCacheCapable mode.
	_, _, _, err = controlplane.Binaries(controlplane.BinDir(root))
	if err != nil {
		t.Fatal(err)
	}
	upstream := filepath.Join(controlplane.BinDir(root), "kube-scheduler-upstream")
	for _, mode := range []struct {
		name      string
		cacheable bool
	}{{"ext-cache", true}, {"ext-nocache", false}} {
		cfg := filepath.Join(e.dir, mode.name+".yaml")
		if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: %q, qps: 200, burst: 400}
leaderElection: {leaderElect: false}
profiles:
- schedulerName: %s
  plugins:
    score:
      disabled: [{name: "*"}]
extenders:
- urlPrefix: https://%s
  tlsConfig: {certFile: %q, keyFile: %q, caFile: %q}
  filterVerb: filter
  prioritizeVerb: prioritize
  weight: 1
  nodeCacheCapable: %v
  ignorable: false
  httpTimeout: 5s
`, cp.SchedulerKubeconfig, mode.name, addr, certs["kube-scheduler.crt"], certs["kube-scheduler.key"], certs["extender-ca.crt"], mode.cacheable)), 0o600); err != nil {
			t.Fatal(err)
		}
		logPath := filepath.Join(e.dir, mode.name+".log")
		lf, _ := os.Create(logPath)
		cmd := exec.Command(upstream, "--config", cfg, "--secure-port", "0", "--log-flush-frequency=100ms")
		cmd.Stdout, cmd.Stderr = lf, lf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
		e.log = logPath
		e.waitLog(`"Starting Kubernetes Scheduler"`, 1, 60*time.Second)
	}

	for _, sched := range []string{"ext-cache", "ext-nocache"} {
		a := sched + "-team-a"
		e.podFor(sched, a, map[string]string{"team": "a"}, "250m")
		if got := e.placed(a); got != "team-a" {
			t.Fatalf("%s: team a pod landed on %s", sched, got)
		}
		c := sched + "-team-c"
		e.podFor(sched, c, map[string]string{"team": "c"}, "250m")
		msg := e.rejected(c)
		t.Logf("%s: FailedScheduling: %s", sched, msg)
		for _, want := range []string{"rejected by WasmPolicy/team-isolation: team label mismatch", "rejected by WasmPolicy/team-isolation: node has no team label"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: FailedScheduling %q does not contain %q", sched, msg, want)
			}
		}
	}

	// bin-packing through the extender: shared pods pile onto one node...
	e.podFor("ext-cache", "pack-1", nil, "1")
	n1 := e.placed("pack-1")
	e.podFor("ext-cache", "pack-2", nil, "1")
	if n2 := e.placed("pack-2"); n2 != n1 {
		t.Fatalf("bin-packing via extender put pack-2 on %s, pack-1 is on %s", n2, n1)
	}
	// ...until the policy's ConfigMap switches to spread: reloaded in the extender.
	e.policyConfigMap("placement", module(t, "spread"))
	e.log = extLog
	e.waitLog(`"Policy module active" policy="placement"`, 2, 30*time.Second)
	e.podFor("ext-nocache", "spread-1", nil, "1")
	if n3 := e.placed("spread-1"); n3 == n1 {
		t.Fatalf("after the reload to spread, spread-1 still joined %s", n3)
	}

	// The policy metrics are on the extender's /metrics, for the scheduler.
	scrapeExt := func() string {
		resp, err := sched.Get("https://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/metrics for the scheduler: %s", resp.Status)
		}
		return string(body)
	}
	body := scrapeExt()
	for _, want := range []string{
		`wasmsched_policy_module_loads_total{policy="placement",result="Success"} 2`,
		`wasmsched_policy_evaluations_total{extension_point="Filter",policy="team-isolation",result="Unschedulable"}`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// Anyone else runs nothing: twelve hostile requests each (a pod the
	// policies would refuse) without a certificate (401), and with one
	// whose name is not allowed (403), on /filter, /prioritize and
	// /metrics.
	evaluations := func(m string) float64 {
		return counter(m, "wasmsched_policy_evaluations_total", `extension_point="Filter",policy="team-isolation",result="Unschedulable"`) +
			counter(m, "wasmsched_policy_evaluations_total", `extension_point="Filter",policy="team-isolation",result="Success"`)
	}
	before := evaluations(scrapeExt())
	// Real node names: were it let in, the request would run the policies.
	nodeNames := fmt.Sprintf(`"NodeNames": [%q, %q]`, e.name+"-team-a", e.name+"-shared-1")
	hostile := `{"Pod": {"metadata": {"name": "x", "namespace": "default", "labels": {"team": "zz", "attack": "panic"}}}, ` + nodeNames + `}`
	for _, c := range []struct {
		client, path string
		want         int
	}{
		{"", "/filter", http.StatusUnauthorized}, {"", "/prioritize", http.StatusUnauthorized}, {"", "/metrics", http.StatusUnauthorized},
		{"intruder", "/filter", http.StatusForbidden}, {"intruder", "/metrics", http.StatusForbidden},
	} {
		for k := 0; k < 12; k++ {
			var resp *http.Response
			var err error
			if c.path == "/metrics" {
				resp, err = httpsClient(t, certs, c.client).Get("https://" + addr + c.path)
			} else {
				resp, err = httpsClient(t, certs, c.client).Post("https://"+addr+c.path, "application/json", strings.NewReader(hostile))
			}
			if err != nil {
				t.Fatalf("%s as %q: %v", c.path, c.client, err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Fatalf("%s as %q: %s, want %d", c.path, c.client, resp.Status, c.want)
			}
		}
	}
	// A client of another CA is not let in either (Go's client does not
	// offer a certificate the server's CAs did not sign: 401), and plain
	// HTTP is not served.
	if resp, err := httpsClient(t, certs, "stranger").Post("https://"+addr+"/filter", "application/json", strings.NewReader(hostile)); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("a client certificate of another CA: %s, want 401", resp.Status)
		}
	}
	if resp, err := http.Post("http://"+addr+"/filter", "application/json", strings.NewReader(hostile)); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP was served")
		}
	}
	m := scrapeExt()
	if after := evaluations(m); after != before {
		t.Errorf("the refused requests ran policies: %v evaluations before, %v after", before, after)
	}
	for _, p := range []string{"team-isolation", "adversary"} {
		if !strings.Contains(m, `wasmsched_policy_circuit_breaker_state{policy="`+p+`",state="closed"} 1`) {
			t.Errorf("a breaker moved: %s", grep(m, "circuit_breaker_state"))
		}
	}

	// The scheduler's own requests do count: distinct pods the adversary
	// policy traps on open its breaker, and the extender records the
	// Event on the policy's ConfigMap, where kubectl describe shows it.
	for k := 0; k < 40; k++ {
		pod := fmt.Sprintf(`{"Pod": {"metadata": {"name": "crash-%d", "namespace": "default", "uid": "crash-%d", "labels": {"attack": "panic", "n": "%d"}}}, %s}`, k, k, k, nodeNames)
		resp, err := sched.Post("https://"+addr+"/filter", "application/json", strings.NewReader(pod))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/filter for the scheduler: %s", resp.Status)
		}
	}
	if m := scrapeExt(); !strings.Contains(m, `wasmsched_policy_circuit_breaker_state{policy="adversary",state="open"} 1`) {
		b, _ := os.ReadFile(extLog)
		t.Errorf("40 failing pods from the scheduler did not open the adversary's breaker: %s\n%s", grep(m, "circuit_breaker_state"), tailOf(grep(string(b), "adversary"), 3000))
	}
	cmName := e.name + "-adversary"
	var opened *eventsv1.Event
	for wait := time.Now().Add(30 * time.Second); opened == nil && time.Now().Before(wait); time.Sleep(200 * time.Millisecond) {
		evs, err := client.EventsV1().Events(policyNS).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range evs.Items {
			if ev := &evs.Items[i]; ev.Reason == "PolicyCircuitBreakerOpen" && ev.Regarding.Kind == "ConfigMap" && ev.Regarding.Name == cmName {
				opened = ev
			}
		}
	}
	if opened == nil {
		b, _ := os.ReadFile(extLog)
		t.Errorf("no PolicyCircuitBreakerOpen Event on ConfigMap %s/%s\n%s", policyNS, cmName, tailOf(grep(string(b), "vent"), 3000))
	} else {
		t.Logf("Event %s %s on %s/%s: %s", opened.Type, opened.Reason, opened.Regarding.Kind, opened.Regarding.Name, opened.Note)
	}

	// SIGTERM shuts it down cleanly.

	if err := ext.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ext.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("extender exited with %v after SIGTERM", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("extender did not exit within 20s of SIGTERM")
	}
	e.log = extLog
	e.waitLog("Shutting down: finishing requests in flight", 1, 5*time.Second)
}

// tailOf is the last n bytes of s.
func tailOf(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
