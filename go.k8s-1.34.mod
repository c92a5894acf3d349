module github.com/wasmsched/wasmsched

// skew: e2e also against kube-apiserver v1.35.4

go 1.25.0

require (
	github.com/docker/cli v27.1.1+incompatible
	github.com/google/go-cmp v0.7.0
	github.com/google/go-containerregistry v0.20.2
	github.com/sigstore/sigstore v1.8.12
	github.com/spf13/cobra v1.9.1
	github.com/tetratelabs/wazero v1.12.0
	github.com/wasmsched/wasmsched/guest-sdk v0.0.0
	k8s.io/api v0.34.10
	k8s.io/apimachinery v0.34.10
	k8s.io/apiserver v0.34.10
	k8s.io/client-go v0.34.10
	k8s.io/component-base v0.34.10
	k8s.io/component-helpers v0.34.10
	k8s.io/dynamic-resource-allocation v0.34.10
	k8s.io/klog/v2 v2.130.1
	k8s.io/kube-scheduler v0.34.10
	k8s.io/kubernetes v1.34.10
	k8s.io/utils v0.0.0-20250604170112-4c0f3b243397
	sigs.k8s.io/scheduler-plugins v0.34.7
	sigs.k8s.io/yaml v1.6.0
)

require (
	cel.dev/expr v0.24.0 // indirect
	dario.cat/mergo v1.0.1 // indirect
	github.com/Azure/go-ansiterm v0.0.0-20230124172434-306776ec8161 // indirect
	github.com/NYTimes/gziphandler v1.1.1 // indirect
	github.com/OneOfOne/xxhash v1.2.8 // indirect
	github.com/antlr4-go/antlr/v4 v4.13.0 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/blang/semver/v4 v4.0.0 // indirect
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/containerd/stargz-snapshotter/estargz v0.16.3 // indirect
	github.com/containers/common v0.62.3 // indirect
	github.com/coreos/go-oidc v2.3.0+incompatible // indirect
	github.com/coreos/go-semver v0.3.1 // indirect
	github.com/coreos/go-systemd/v22 v22.5.0 // indirect
	github.com/crossplane/crossplane-runtime v1.20.0 // indirect
	github.com/davecgh/go-spew v1.1.2-0.20180830191138-d8f796af33cc // indirect
	github.com/diktyo-io/appgroup-api v1.0.1-alpha // indirect
	github.com/diktyo-io/networktopology-api v1.0.1-alpha // indirect
	github.com/distribution/reference v0.6.0 // indirect
	github.com/docker/distribution v2.8.3+incompatible // indirect
	github.com/docker/docker-credential-helpers v0.8.2 // indirect
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/emicklei/go-restful/v3 v3.12.2 // indirect
	github.com/evanphx/json-patch/v5 v5.9.11 // indirect
	github.com/felixge/httpsnoop v1.0.4 // indirect
	github.com/francoispqt/gojay v1.2.13 // indirect
	github.com/fsnotify/fsnotify v1.9.0 // indirect
	github.com/fxamacker/cbor/v2 v2.9.0 // indirect
	github.com/go-jose/go-jose/v4 v4.0.4 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/go-logr/zapr v1.3.0 // indirect
	github.com/go-openapi/jsonpointer v0.21.0 // indirect
	github.com/go-openapi/jsonreference v0.21.0 // indirect
	github.com/go-openapi/swag v0.23.0 // indirect
	github.com/gogo/protobuf v1.3.2 // indirect
	github.com/golang/protobuf v1.5.4 // indirect
	github.com/google/btree v1.1.3 // indirect
	github.com/google/cel-go v0.26.0 // indirect
	github.com/google/gnostic-models v0.7.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/gorilla/websocket v1.5.4-0.20250319132907-e064f32e3674 // indirect
	github.com/grpc-ecosystem/go-grpc-prometheus v1.2.0 // indirect
	github.com/grpc-ecosystem/grpc-gateway/v2 v2.26.3 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/josharian/intern v1.0.0 // indirect
	github.com/jpillora/backoff v1.0.0 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/k8stopologyawareschedwg/noderesourcetopology-api v0.1.2 // indirect
	github.com/k8stopologyawareschedwg/podfingerprint v0.2.2 // indirect
	github.com/klauspost/compress v1.18.0 // indirect
	github.com/kylelemons/godebug v1.1.0 // indirect
	github.com/letsencrypt/boulder v0.0.0-20240620165639-de9c06129bec // indirect
	github.com/mailru/easyjson v0.7.7 // indirect
	github.com/mitchellh/go-homedir v1.1.0 // indirect
	github.com/moby/spdystream v0.5.1 // indirect
	github.com/moby/sys/mountinfo v0.7.2 // indirect
	github.com/moby/term v0.5.0 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.3-0.20250322232337-35a7c28c31ee // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/mwitkow/go-conntrack v0.0.0-20190716064945-2f068394615f // indirect
	github.com/mxk/go-flowrate v0.0.0-20140419014527-cca7078d478f // indirect
	github.com/onsi/gomega v1.36.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	github.com/opencontainers/runtime-spec v1.2.0 // indirect
	github.com/opencontainers/selinux v1.11.1 // indirect
	github.com/patrickmn/go-cache v2.1.0+incompatible // indirect
	github.com/paypal/load-watcher v0.2.4 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/pmezard/go-difflib v1.0.1-0.20181226105442-5d4384ee4fb2 // indirect
	github.com/pquerna/cachecontrol v0.1.0 // indirect
	github.com/prometheus/client_golang v1.22.0 // indirect
	github.com/prometheus/client_model v0.6.1 // indirect
	github.com/prometheus/common v0.62.0 // indirect
	github.com/prometheus/procfs v0.15.1 // indirect
	github.com/robfig/cron/v3 v3.0.1 // indirect
	github.com/seccomp/libseccomp-golang v0.10.0 // indirect
	github.com/secure-systems-lab/go-securesystemslib v0.9.0 // indirect
	github.com/sirupsen/logrus v1.9.3 // indirect
	github.com/spf13/pflag v1.0.6 // indirect
	github.com/stoewer/go-strcase v1.3.0 // indirect
	github.com/stretchr/testify v1.11.1 // indirect
	github.com/titanous/rocacheck v0.0.0-20171023193734-afe73141d399 // indirect
	github.com/vbatts/tar-split v0.11.7 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	go.etcd.io/etcd/api/v3 v3.6.4 // indirect
	go.etcd.io/etcd/client/pkg/v3 v3.6.4 // indirect
	go.etcd.io/etcd/client/v3 v3.6.4 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc v0.60.0 // indirect
	go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp v0.58.0 // indirect
	go.opentelemetry.io/otel v1.41.0 // indirect
	go.opentelemetry.io/otel/exporters/otlp/otlptrace v1.34.0 // indirect
	go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc v1.34.0 // indirect
	go.opentelemetry.io/otel/metric v1.41.0 // indirect
	go.opentelemetry.io/otel/sdk v1.34.0 // indirect
	go.opentelemetry.io/otel/trace v1.41.0 // indirect
	go.opentelemetry.io/proto/otlp v1.5.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	go.uber.org/zap v1.27.0 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	go.yaml.in/yaml/v3 v3.0.4 // indirect
	golang.org/x/crypto v0.36.0 // indirect
	golang.org/x/exp v0.0.0-20250103183323-7d7fa50e5329 // indirect
	golang.org/x/net v0.38.0 // indirect
	golang.org/x/oauth2 v0.27.0 // indirect
	golang.org/x/sync v0.12.0 // indirect
	golang.org/x/sys v0.44.0 // indirect
	golang.org/x/term v0.30.0 // indirect
	golang.org/x/text v0.23.0 // indirect
	golang.org/x/time v0.9.0 // indirect
	golang.org/x/tools v0.28.0 // indirect
	gonum.org/v1/gonum v0.12.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20250303144028-a0af3efb3deb // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20250303144028-a0af3efb3deb // indirect
	google.golang.org/grpc v1.72.1 // indirect
	google.golang.org/protobuf v1.36.12-0.20260120151049-f2248ac996af // indirect
	gopkg.in/evanphx/json-patch.v4 v4.12.0 // indirect
	gopkg.in/go-jose/go-jose.v2 v2.6.3 // indirect
	gopkg.in/inf.v0 v0.9.1 // indirect
	gopkg.in/natefinch/lumberjack.v2 v2.2.1 // indirect
	gopkg.in/yaml.v2 v2.4.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
	k8s.io/apiextensions-apiserver v0.34.10 // indirect
	k8s.io/cloud-provider v0.34.10 // indirect
	k8s.io/cluster-bootstrap v0.34.10 // indirect
	k8s.io/controller-manager v0.34.10 // indirect
	k8s.io/csi-translation-lib v0.34.10 // indirect
	k8s.io/endpointslice v0.34.10 // indirect
	k8s.io/externaljwt v0.34.10 // indirect
	k8s.io/kms v0.34.10 // indirect
	k8s.io/kube-aggregator v0.34.10 // indirect
	k8s.io/kube-controller-manager v0.34.10 // indirect
	k8s.io/kube-openapi v0.0.0-20250710124328-f3f2b991d03b // indirect
	k8s.io/kubectl v0.34.10 // indirect
	k8s.io/kubelet v0.34.10 // indirect
	k8s.io/metrics v0.34.10 // indirect
	k8s.io/mount-utils v0.34.10 // indirect
	k8s.io/pod-security-admission v0.34.10 // indirect
	sigs.k8s.io/apiserver-network-proxy/konnectivity-client v0.31.2 // indirect
	sigs.k8s.io/controller-runtime v0.22.3 // indirect
	sigs.k8s.io/json v0.0.0-20241014173422-cfa47c3a1cc8 // indirect
	sigs.k8s.io/randfill v1.0.0 // indirect
	sigs.k8s.io/release-utils v0.3.0 // indirect
	sigs.k8s.io/security-profiles-operator v0.4.0 // indirect
	sigs.k8s.io/structured-merge-diff/v6 v6.3.0 // indirect
)

replace github.com/wasmsched/wasmsched/guest-sdk => ./guest-sdk

// k8s.io/kubernetes staging modules at v1.34.10, generated by hack/bump-k8s.sh.
// A module the proxy does not serve at that version (nothing here imports it)
// points at an empty stand-in under hack/stub, so the module graph resolves.
replace (
	k8s.io/api => k8s.io/api v0.34.10
	k8s.io/apiextensions-apiserver => k8s.io/apiextensions-apiserver v0.34.10
	k8s.io/apimachinery => k8s.io/apimachinery v0.34.10
	k8s.io/apiserver => k8s.io/apiserver v0.34.10
	k8s.io/cli-runtime => k8s.io/cli-runtime v0.34.10
	k8s.io/client-go => k8s.io/client-go v0.34.10
	k8s.io/cloud-provider => k8s.io/cloud-provider v0.34.10
	k8s.io/cluster-bootstrap => k8s.io/cluster-bootstrap v0.34.10
	k8s.io/code-generator => k8s.io/code-generator v0.34.10
	k8s.io/component-base => k8s.io/component-base v0.34.10
	k8s.io/component-helpers => k8s.io/component-helpers v0.34.10
	k8s.io/controller-manager => k8s.io/controller-manager v0.34.10
	k8s.io/cri-api => k8s.io/cri-api v0.34.10
	k8s.io/cri-client => k8s.io/cri-client v0.34.10
	k8s.io/csi-translation-lib => k8s.io/csi-translation-lib v0.34.10
	k8s.io/dynamic-resource-allocation => k8s.io/dynamic-resource-allocation v0.34.10
	k8s.io/endpointslice => k8s.io/endpointslice v0.34.10
	k8s.io/externaljwt => k8s.io/externaljwt v0.34.10
	k8s.io/kms => k8s.io/kms v0.34.10
	k8s.io/kube-aggregator => k8s.io/kube-aggregator v0.34.10
	k8s.io/kube-controller-manager => k8s.io/kube-controller-manager v0.34.10
	k8s.io/kube-proxy => k8s.io/kube-proxy v0.34.10
	k8s.io/kube-scheduler => k8s.io/kube-scheduler v0.34.10
	k8s.io/kubectl => k8s.io/kubectl v0.34.10
	k8s.io/kubelet => k8s.io/kubelet v0.34.10
	k8s.io/metrics => k8s.io/metrics v0.34.10
	k8s.io/mount-utils => k8s.io/mount-utils v0.34.10
	k8s.io/pod-security-admission => k8s.io/pod-security-admission v0.34.10
	k8s.io/sample-apiserver => ./hack/stub/k8s.io/sample-apiserver
	k8s.io/sample-cli-plugin => ./hack/stub/k8s.io/sample-cli-plugin
	k8s.io/sample-controller => ./hack/stub/k8s.io/sample-controller
)
