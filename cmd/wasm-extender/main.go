// Command wasm-extender serves WasmPolicy policies as a kube-scheduler HTTP
// extender (verbs filter and prioritize), for clusters where the scheduler
// binary cannot be replaced. It takes the same WasmPolicyArgs as the plugin.
//
//	wasm-extender --config policies.yaml [--kubeconfig ...] [--listen :8888]
//	              [--tls-cert-file ... --tls-private-key-file ...]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/component-base/metrics/legacyregistry"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics on /metrics
	"k8s.io/klog/v2"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
	"github.com/wasmsched/wasmsched/pkg/apis/config/scheme"
	"github.com/wasmsched/wasmsched/pkg/apis/config/validation"
	"github.com/wasmsched/wasmsched/pkg/extender"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"
)

func main() {
	klog.InitFlags(nil)
	cfgPath := flag.String("config", "", "WasmPolicyArgs file (apiVersion kubescheduler.config.k8s.io/v1, kind WasmPolicyArgs): the same args as the WasmPolicy plugin")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig; empty means in-cluster")
	listen := flag.String("listen", ":8888", "address to serve on")
	certFile := flag.String("tls-cert-file", "", "serve HTTPS with this certificate (and --tls-private-key-file); required unless --insecure-serve-http")
	keyFile := flag.String("tls-private-key-file", "", "private key for --tls-cert-file")
	clientCA := flag.String("client-ca-file", "", "CA bundle that signed the clients allowed to call /filter, /prioritize and /metrics (the scheduler's extender tlsConfig certFile); required with TLS")
	allowed := flag.String("allowed-client-names", "", "comma-separated common or DNS names of the client certificates allowed (empty: any the CA signed)")
	insecure := flag.Bool("insecure-serve-http", false, "serve plain HTTP to anyone who reaches the port: tests only")
	maxBytes := flag.Int64("max-request-bytes", 32<<20, "largest accepted request body")
	timeout := flag.Duration("request-timeout", 10*time.Second, "time limit for one request; set the scheduler's httpTimeout below it")
	parallelism := flag.Int("parallelism", 16, "nodes evaluated at once per request")
	flag.Parse()
	auth := &authOptions{certFile: *certFile, keyFile: *keyFile, clientCAFile: *clientCA, allowedNames: splitNames(*allowed), insecureHTTP: *insecure}
	if err := run(*cfgPath, *kubeconfig, *listen, auth, *maxBytes, *timeout, *parallelism); err != nil {
		klog.ErrorS(err, "wasm-extender failed")
		klog.Flush()
		os.Exit(1)
	}
}

// loadArgs decodes the args strictly through the scheduler's scheme, so
// defaults apply exactly as in the plugin, and validates them.
func loadArgs(path string) (*config.WasmPolicyArgs, error) {
	if path == "" {
		return nil, errors.New("--config is required")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	obj, err := runtime.Decode(serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDecoder(), data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	args, ok := obj.(*config.WasmPolicyArgs)
	if !ok {
		return nil, fmt.Errorf("%s: kind %T, want WasmPolicyArgs", path, obj)
	}
	if errs := validation.ValidateWasmPolicyArgs(field.NewPath(path), args); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	// The extender's container must hold the policies' budget too.
	if why := wasmpolicy.FitContainer(klog.Background(), args.MemoryBudget); why != "" {
		return nil, field.Invalid(field.NewPath(path).Child("memoryBudget"), resource.NewQuantity(args.MemoryBudget, resource.BinarySI).String(), why)
	}
	return args, nil
}

func run(cfgPath, kubeconfig, listen string, auth *authOptions, maxBytes int64, timeout time.Duration, parallelism int) error {
	tlsConfig, err := auth.serverTLS()
	if err != nil {
		return err
	}
	args, err := loadArgs(cfgPath)
	if err != nil {
		return err
	}
	rest, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(rest)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return err
	}
	defer broadcaster.Shutdown()
	// Events are recorded on core objects (a policy's ConfigMap, pods):
	// the client's scheme knows them, the args' scheme does not ("no kind
	// is registered for the type v1.ConfigMap").
	recorder := broadcaster.NewRecorder(clientgoscheme.Scheme, "wasm-extender")
	srv, err := extender.New(ctx, client, recorder, args, extender.Options{MaxRequestBytes: maxBytes, RequestTimeout: timeout, Parallelism: parallelism})
	if err != nil {
		return err
	}
	defer srv.Close()

	mux := http.NewServeMux()
	mux.Handle("/filter", auth.authenticated(srv.Handler()))
	mux.Handle("/prioritize", auth.authenticated(srv.Handler()))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.Handle("/metrics", auth.authenticated(legacyregistry.Handler()))
	hs := &http.Server{Addr: listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second, TLSConfig: tlsConfig}
	errc := make(chan error, 1)
	go func() {
		klog.InfoS("Serving scheduler extender", "address", listen, "tls", tlsConfig != nil, "clientCertificates", tlsConfig != nil, "allowedClients", auth.allowedNames, "policies", len(args.Policies))
		if tlsConfig != nil {
			errc <- hs.ListenAndServeTLS("", "")
		} else {
			klog.InfoS("Serving plain HTTP to anyone who reaches the port (--insecure-serve-http)")
			errc <- hs.ListenAndServe()
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	klog.InfoS("Shutting down: finishing requests in flight")
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return hs.Shutdown(sctx)
}
