# wasmsched — see README.md. Everything this Makefile needs is installed by hack/.
SHELL := /bin/bash
.DEFAULT_GOAL := build

# Every version is derived from the module files (hack/lib/k8s.sh): go.mod is
# the main line, go.k8s-1.MINOR.mod an older line (docs/kubernetes.md).
K8SLIB        := . hack/lib/k8s.sh
K8S_VERSION   := $(shell $(K8SLIB); modfile_k8s go.mod)
ETCD_PATH      = $(CACHE)/bin/$(K8S_VERSION)
LINES         := $(patsubst go.%.mod,%,$(wildcard go.k8s-*.mod))
line_modfile   = go.$(1).mod
line_version   = $(shell $(K8SLIB); modfile_k8s go.$(1).mod)
line_tag       = $(shell $(K8SLIB); line_tag go.$(1).mod)
GO            ?= go
# Static binaries, as Kubernetes releases them and as the images need
# (make image). Tests without -race build the same way, so they share the
# build cache with the binaries; -race needs cgo, and its line says so.
export CGO_ENABLED ?= 0
BIN           := $(CURDIR)/bin
OUT           := $(CURDIR)/_output
CACHE         := .cache
TINYGO        := $(CURDIR)/.cache/tinygo/v0.41.1/bin/tinygo
POLICIES      := team-isolation bin-packing maintenance-avoidance gpu-fit spread node-health team-pod-cap zone-spread freeze-window placement-recorder licence-count gang lease-freshness node-drain dra-devices
LDFLAGS       := $(shell $(K8SLIB); version_ldflags $(K8S_VERSION))
GO_GUESTS     := $(foreach p,$(POLICIES),$(OUT)/guests/go/$(p).wasm)
TINYGO_GUESTS := $(foreach p,$(POLICIES),$(OUT)/guests/tinygo/$(p).wasm)
# Ports of kube-scheduler's default plugins (plugins-wasm/ports), checked
# against upstream by test/ports.
PORTS         := volumezone nodeunschedulable nodename tainttoleration nodeaffinity nodeports noderesourcesfit balancedallocation imagelocality podtopologyspread interpodaffinity
PORT_GUESTS   := $(foreach p,$(PORTS),$(OUT)/guests/go/$(p).wasm $(OUT)/guests/tinygo/$(p).wasm)
# team-isolation written without the Go SDK: C without a libc, and hand-written WAT.
OTHER_GUESTS  := $(OUT)/guests/c/team-isolation.wasm $(OUT)/guests/wat/team-isolation.wasm
CLANG         ?= clang-19
WAT2WASM      ?= wat2wasm
# make test picks its stages by build tag (hack/tagged-tests.sh): tests in
# files tagged "timing" (deadline and containment claims, and the
# warm-start crash test) run alone and without -race, and those tagged
# "norace" (too slow under the race detector) in stages of their own;
# every other test runs in the race stage.
TIMING_PKGS   := host host/internal/fuel pkg/wasmpolicy
GUEST_SRCS    := $(shell find guest-sdk -name '*.go') guest-sdk/go.mod plugins-wasm/go.mod

# Images (make image): each binary for each platform, static, with the
# version ldflags; the host's platform reuses the build cache of bin/.
IMAGE_PLATFORMS ?= linux/amd64 linux/arm64
HOST_PLATFORM := $(shell $(GO) env GOOS)/$(shell $(GO) env GOARCH)
IMAGE_VERSION := $(K8S_VERSION)-wasmsched
IMAGE_DIR     := $(OUT)/images
# The older lines whose kube-scheduler make image builds: make test builds
# none (their compiles are make test-lines'), make image every one.
IMAGE_LINES   ?= $(LINES)
IMAGES        := kube-scheduler wasm-extender
image_bin      = $(IMAGE_DIR)/$(subst /,-,$(2))/$(1)

.PHONY: test-lines bench-reads bench-rollout node test-node image image-push cosign-interop build build-lines e2e-lines controlplane-lines verify-k8s verify generate tools help test-deadlines-loaded guests guests-tinygo guests-other ports tinygo deps fixtures test check e2e soak bench bench-smoke fuzz controlplane demo demo-node clean

## build: bin/kube-scheduler (with version ldflags) and bin/wasm-extender
build: $(BIN)/kube-scheduler $(BIN)/wasm-extender $(BIN)/wasmsched

# Pinned tools built from hack/tools/<name> (hack/install-tools.sh). Defined
# here, before any rule names them as prerequisites: make expands a rule's
# prerequisites when it reads the rule, so a later definition leaves them empty.
HELM          := $(CURDIR)/.cache/tools/bin/helm
COSIGN        := $(CURDIR)/.cache/tools/bin/cosign
GO_SRCS       := $(shell find cmd host pkg internal policytest guest-sdk -name '*.go' -not -name '*_test.go')

$(BIN)/kube-scheduler: $(GO_SRCS) go.mod go.sum
	$(GO) build -ldflags '$(LDFLAGS)' -o $@ ./cmd/kube-scheduler

## build-lines: bin/kube-scheduler-k8s-1.MINOR for each older build line
## (its module file, its build tag, its version ldflags)
build-lines: $(foreach l,$(LINES),$(BIN)/kube-scheduler-$(l))
$(BIN)/kube-scheduler-k8s-%: $(GO_SRCS) go.k8s-%.mod go.k8s-%.sum
	$(GO) build -modfile=go.k8s-$*.mod -tags $(call line_tag,k8s-$*) \
		-ldflags '$(shell $(K8SLIB); version_ldflags $(call line_version,k8s-$*))' -o $@ ./cmd/kube-scheduler

$(BIN)/wasm-extender: $(GO_SRCS) go.mod go.sum
	$(GO) build -ldflags '$(LDFLAGS)' -o $@ ./cmd/wasm-extender

$(BIN)/wasmsched: $(GO_SRCS) go.mod go.sum
	$(GO) build -ldflags '$(LDFLAGS)' -o $@ ./cmd/wasmsched

## image: OCI images of kube-scheduler and wasm-extender for IMAGE_PLATFORMS
## (default linux/amd64 linux/arm64), without Docker: an OCI layout in
## _output/images/oci, tagged IMAGE_VERSION, and the kube-scheduler of each
## older build line in IMAGE_LINES (default: all) tagged with its own
## version (hack/image)
image: deps $(foreach i,$(IMAGES),$(foreach p,$(IMAGE_PLATFORMS),$(call image_bin,$(i),$(p)))) \
		$(foreach l,$(IMAGE_LINES),$(foreach p,$(IMAGE_PLATFORMS),$(call image_bin,kube-scheduler-$(l),$(p))))
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct) $(GO) run ./hack/image build -out $(IMAGE_DIR)/oci \
		-version $(IMAGE_VERSION) -revision $$(git rev-parse HEAD) \
		$(foreach i,$(IMAGES),$(foreach p,$(IMAGE_PLATFORMS),-binary $(i)=$(p)=$(call image_bin,$(i),$(p)))) \
		$(foreach l,$(IMAGE_LINES),$(foreach p,$(IMAGE_PLATFORMS),-binary kube-scheduler@$(call line_version,$(l))-wasmsched=$(p)=$(call image_bin,kube-scheduler-$(l),$(p))))

$(IMAGE_DIR)/linux-%/kube-scheduler: $(GO_SRCS) go.mod go.sum
	GOOS=linux GOARCH=$* $(GO) build -ldflags '$(LDFLAGS)' -o $@ ./cmd/kube-scheduler
$(IMAGE_DIR)/linux-%/wasm-extender: $(GO_SRCS) go.mod go.sum
	GOOS=linux GOARCH=$* $(GO) build -ldflags '$(LDFLAGS)' -o $@ ./cmd/wasm-extender
# An older line's kube-scheduler for its image, per platform.
define line_image_rule
$(IMAGE_DIR)/linux-%/kube-scheduler-$(1): $(GO_SRCS) go.$(1).mod go.$(1).sum
	GOOS=linux GOARCH=$$* $(GO) build -modfile=go.$(1).mod -tags $(call line_tag,$(1)) \
		-ldflags '$(shell $(K8SLIB); version_ldflags $(call line_version,$(1)))' -o $$@ ./cmd/kube-scheduler
endef
$(foreach l,$(LINES),$(eval $(call line_image_rule,$(l))))

## image-push: push make image's images to REGISTRY (REGISTRY=registry.example.com/wasmsched:
## REGISTRY/kube-scheduler:IMAGE_VERSION ...) with the docker config's
## credentials; IMAGE_PUSH_FLAGS for -tag, -ca-file, -insecure
image-push:
	@test -n "$(REGISTRY)" || { echo "make image-push REGISTRY=registry.example.com/wasmsched" >&2; exit 2; }
	$(GO) run ./hack/image push -out $(IMAGE_DIR)/oci -registry $(REGISTRY) $(IMAGE_PUSH_FLAGS)

## deps: Debian packages (LLVM 19, wasi-libc, binaryen, wabt, openssl)
deps:
	./hack/install-deps.sh

## tinygo: TinyGo v0.41.1 built from its Go module into .cache/tinygo
tinygo: $(TINYGO)
$(TINYGO):
	./hack/install-tinygo.sh

## guests: the example policies built with standard Go (GOOS=wasip1)
guests: $(GO_GUESTS)
$(OUT)/guests/go/%.wasm: plugins-wasm/%/main.go $(GUEST_SRCS)
	@mkdir -p $(dir $@)
	cd plugins-wasm/$* && GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -o $@ .

## guests-tinygo: the example policies built with TinyGo (installed first if missing)
guests-tinygo: $(TINYGO_GUESTS)
$(OUT)/guests/tinygo/%.wasm: plugins-wasm/%/main.go $(GUEST_SRCS) | $(TINYGO)
	@mkdir -p $(dir $@)
	cd plugins-wasm/$* && $(TINYGO) build -target=wasip1 -buildmode=c-shared -scheduler=none -no-debug -opt=2 -o $@ . 2> >(grep -v 'is not a recognized feature' >&2)

## ports: the ports of kube-scheduler's default plugins, with Go and TinyGo
ports: $(PORT_GUESTS)
$(OUT)/guests/go/%.wasm: plugins-wasm/ports/%/main.go $(GUEST_SRCS)
	@mkdir -p $(dir $@)
	cd plugins-wasm/ports/$* && GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -o $@ .
$(OUT)/guests/tinygo/%.wasm: plugins-wasm/ports/%/main.go $(GUEST_SRCS) | $(TINYGO)
	@mkdir -p $(dir $@)
	cd plugins-wasm/ports/$* && $(TINYGO) build -target=wasip1 -buildmode=c-shared -scheduler=none -no-debug -opt=2 -o $@ . 2> >(grep -v 'is not a recognized feature' >&2)

## guests-other: team-isolation in C (clang-19, no libc) and in hand-written
## WAT (wat2wasm); clang-19, lld-19 and wabt come from make deps
guests-other: $(OTHER_GUESTS)
# Each flag is explained in plugins-wasm/team-isolation-c/README.md. clang-19
# finds lld-19's wasm-ld itself (/usr/bin/wasm-ld-19): no -fuse-ld needed.
$(OUT)/guests/c/team-isolation.wasm: plugins-wasm/team-isolation-c/team_isolation.c
	@mkdir -p $(dir $@)
	$(CLANG) --target=wasm32 -nostdlib -O2 -mbulk-memory -Wall -Wextra \
		-Wl,--no-entry -Wl,--export=abi_version -Wl,--export=capabilities -Wl,--export=filter -Wl,--export=filter_nodes \
		-Wl,--stack-first -Wl,-z,stack-size=8192 -Wl,--strip-all -o $@ $<

$(OUT)/guests/wat/team-isolation.wasm: plugins-wasm/team-isolation-wat/team_isolation.wat
	@mkdir -p $(dir $@)
	$(WAT2WASM) $< -o $@

## controlplane: etcd, kube-apiserver and kubectl from Go modules, cached in .cache/bin/<version>
controlplane:
	./hack/build-controlplane.sh

## node: what a real test node needs beside the control plane: containerd,
## runc, the CNI plugins, iptables (Debian), and the kubelet, kube-proxy and
## kube-controller-manager from Go modules, cached in .cache/bin/<version>
node: controlplane
	./hack/install-node-deps.sh
	./hack/build-node.sh

## test-node: the scheduler on a real two-node cluster (test/node, as
## root): the image of make image run by kubelets, installed by the chart,
## the kustomize base and the replace-default static pod
test-node: node guests-tinygo $(HELM)
	$(MAKE) --no-print-directory image IMAGE_PLATFORMS=$(HOST_PLATFORM) IMAGE_LINES=
	hack/filtered.sh test-node '^(\s+--- |\s+(node|chart|manifests)_test.go|--- |ok|FAIL|PASS)' $(GO) test -count=1 -v ./test/node/

## controlplane-lines: the control planes the older lines' e2e runs against
## (each line's own minor and the next one, the version skew policy, of the
## supported minors: hack/lib/k8s.sh e2e_versions)
controlplane-lines:
	./hack/build-controlplane.sh $(foreach l,$(LINES),$(shell $(K8SLIB); e2e_versions go.$(l).mod))

## e2e-lines: the e2e suite with each older line's scheduler (but the soak,
## the extender test, the many-policies, startup and OCI runs, which
## exercise the plugin's own code, the same on every line, and the Helm
## chart's), against a kube-apiserver of each minor the line serves; the
## containment run (TestBadPolicyIsContained, a minute at 1000 tenant pods)
## against the line's own minor only, as the plugin's own code it is. The
## tenant run has 1000 pods per run: older apiservers create pods faster,
## and the 5 looping pods' one timed-out cycle each (0.5 s in all) must be
## measured against a run long enough (500 pods took 1.5 s on 1.34: 73-75%
## in one pair of runs; 1000 pods: 98-101%).
e2e-lines: build build-lines guests-tinygo controlplane-lines
	@set -eo pipefail; for l in $(LINES); do \
	  skip='TestSoak|TestGrowingPolicyStaysWithinTheContainer|TestExtenderWithUpstreamScheduler|TestPolicyObjectChurn|TestPolicyObjectsWithTwoReplicas|TestManyPoliciesFitTheDeployment|TestStartupWaitsForLoadingPolicies|TestHelmChart|TestLineOverlays|TestOCIPolicies'; \
	  for v in $$($(K8SLIB); e2e_versions go.$$l.mod); do \
	    echo "e2e: bin/kube-scheduler-$$l against kube-apiserver $$v"; \
	    WASMSCHED_SCHEDULER=bin/kube-scheduler-$$l WASMSCHED_KUBE_VERSION=$$v TENANT_PODS=1000 \
	      hack/filtered.sh e2e-$$l-$$v '^(--- |\s+\w+_test.go|ok|FAIL|PASS)' $(GO) test -count=1 -v -skip "$$skip" ./test/e2e/; \
	    skip="$$skip|TestBadPolicyIsContained"; \
	  done; \
	done

## verify-k8s: module files, generated plugin registrations and the docs' matrix agree
verify-k8s:
	./hack/verify-k8s.sh

## verify: the gate make test runs first: gofmt, go vet, staticcheck, tidy
## modules, generated files current, build lines consistent
verify:
	./hack/verify.sh

## generate: everything derived: the config API's deepcopy, conversion and
## defaulters (k8s.io/code-generator), the policy CRDs and their deepcopy
## (controller-gen), docs/abi.md's tables, the Helm chart (from
## manifests/base), the version matrix
generate:
	./hack/update-codegen.sh
	$(GO) run ./hack/gen-abi-docs
	$(GO) run ./hack/gen-chart
	./hack/gen-k8s-matrix.sh

## tools: the pinned developer tools (staticcheck, code-generator, controller-gen, helm) in .cache/tools/bin
tools:
	./hack/install-tools.sh

## help: list the targets
help:
	@awk '/^## / { sub(/^## /, ""); if (match($$0, /^[a-z0-9-]+:/)) { if (t) print t; t = $$0 } else t = t " " $$0; next } { if (t) print t; t = "" }' $(MAKEFILE_LIST) | \
		awk -F': ' '{ printf "  %-20s %s\n", $$1, substr($$0, length($$1) + 3) }'

## demo: a local control plane, the example policies, a workload and a hot reload (KEEP=1 keeps it running)
demo: deps guests-tinygo build controlplane
	$(GO) run ./hack/demo

## demo-node: the scheduler as it ships, run as pods by real kubelets (as
## root): two Nodes with containerd, the image of make image, the chart
## installed with helm, pods placed and refused (about 3 minutes warm)
demo-node: node guests-tinygo $(HELM)
	$(MAKE) --no-print-directory image IMAGE_PLATFORMS=$(HOST_PLATFORM) IMAGE_LINES=
	$(GO) run ./hack/demo-node

## fixtures: recompile the hand-written .wat test fixtures (needs wabt)
fixtures:
	@# A fixture's first line may give wat2wasm flags: ";; wat2wasm: --enable-tail-call".
	@# plugins-wasm/ holds policy sources, built into _output by guests-other.
	@for f in $$(find . \( -path ./.cache -o -path ./plugins-wasm \) -prune -o -name '*.wat' -print); do wat2wasm $$(sed -n '1s/^;; wat2wasm: //p' $$f) $$f -o $${f%.wat}.wasm; done

## test: everything CI runs: native SDK and policy tests, host and plugin tests
## under -race with real TinyGo and Go guests, the scheduler binary checks, and
## the end-to-end tests against a real kube-apiserver and etcd (make e2e)
# The packages whose code shares memory between goroutines (the engine's
# pools, reloads and deadlines, the plugin's parallel Filter and Score, the
# module sources and policy objects fed by informers, the extender's server,
# the OCI cache, policytest's build cache, the CLI against a control plane):
# make test runs their tests under -race. Every other package's tests run
# once without it: the CLIs, API types, models and policy suites, whose race
# build would compile another ~450 packages of kube-scheduler's app and the
# apiserver libraries (docs/kubernetes.md, the cold run).
RACE_PKGS := host/... pkg/wasmpolicy/ pkg/policyobjects/ pkg/source/ pkg/extender/ pkg/oci/ pkg/nodeinfo/ policytest/ test/cmd/

test: verify deps guests guests-tinygo guests-other ports build controlplane node $(HELM)
	cd guest-sdk && $(GO) test -count=1 ./...
	cd plugins-wasm && $(GO) test -count=1 ./... ./testdata/fields/ ./testdata/authors/...
	CGO_ENABLED=1 $(GO) test -race -count=1 $(addprefix ./,$(RACE_PKGS))
	$(GO) test -count=1 $$($(GO) list ./... | grep -v -e /test/e2e -e /test/perf -e /test/ports -e /test/image -e /test/node | grep -vxF -e "$$($(GO) list $(addprefix ./,$(RACE_PKGS)))")
	# The instrumentation rewriter against the WebAssembly spec suite in
	# wazero's module: every module instrumented, every command's outcome
	# the same as the module's own.
	hack/filtered.sh spectest '(spectest_test.go|^ok|FAIL|^PASS)' $(GO) test -count=1 -v -tags norace -run "$$(hack/tagged-tests.sh norace host/internal/fuel)" ./host/internal/fuel/
	# The ports' differential test against the upstream plugins, without
	# -race (it compares 12,000+ pairs per port); prints each port's pairs,
	# agreement and the generated mix.
	hack/filtered.sh ports '(ports_test.go|generated:|pod:|^\s*--- |^ok|FAIL|^PASS)' $(GO) test -count=1 -v ./test/ports/
	# Remembered verdicts under the memory budget: 200 policies and pods
	# that all differ, peak RSS with verdictReuse on and off, each in a
	# process of its own (make soak: 1,500 pods).
	hack/filtered.sh reuse-memory '(reuse_memory_test.go|^ok|FAIL|^PASS)' $(GO) test -count=1 -v -run '^TestVerdictReuseMemoryIsBudgeted$$' ./test/perf/
	# Deadline acceptance tests (a loop ends within timeout + 10ms) run alone,
	# so no other test binary competes for the 2 cores while they measure.
	hack/filtered.sh timing '^(\s+--- FAIL|\s+\w+_test.go|--- |ok|FAIL|PASS)' $(GO) test -count=1 -v -tags timing -run "$$(hack/tagged-tests.sh timing $(TIMING_PKGS))" $(addprefix ./,$(addsuffix /,$(TIMING_PKGS)))
	hack/filtered.sh policies '^(\s+--- |\s+(policies|aswasm)_test.go|ok|FAIL|PASS)' $(GO) test -count=1 -v -tags norace -run "$$(hack/tagged-tests.sh norace test/policies)" ./test/policies/
	# The conformance kit as an author runs it: team-isolation's case table
	# against its Go, TinyGo, C and WAT builds (docs/sdk.md).
	for b in go tinygo c wat; do echo "team-isolation ($$b):"; $(BIN)/wasmsched test --cases plugins-wasm/team-isolation/testdata.json $(OUT)/guests/$$b/team-isolation.wasm || exit 1; done
	@# The fuzz targets' seed corpora ran with the packages' tests above;
	@# fuzzing itself is make fuzz (its instrumented builds cost a cold CI
	@# run five minutes).
	# The main line's images for this machine's platform (make image
	# builds every platform and line), pushed to a registry, pulled back
	# and run.
	$(MAKE) --no-print-directory image IMAGE_PLATFORMS=$(HOST_PLATFORM) IMAGE_LINES=
	WASMSCHED_IMAGE_LINES= $(GO) test -count=1 ./test/image/
	hack/filtered.sh test-node '^(\s+--- |\s+(node|chart|manifests)_test.go|--- |ok|FAIL|PASS)' $(GO) test -count=1 -v ./test/node/
	$(MAKE) --no-print-directory bench-smoke
	$(MAKE) --no-print-directory e2e

## test-lines: the older build lines as make test does not run them: each
## line's kube-scheduler and its image, and its e2e against every minor it
## serves (make test type-checks every line in verify, docs/kubernetes.md);
## run it when a line's module file, internal/framework or what the
## plugin calls of the framework changes, and before a release
test-lines: deps build-lines
	$(MAKE) --no-print-directory image IMAGE_PLATFORMS=$(HOST_PLATFORM)
	$(GO) test -count=1 ./test/image/
	$(MAKE) --no-print-directory e2e-lines

## check: the inner loop, under 5 minutes warm: verify, then every
## package's tests but the clusters', the timing and norace stages and the
## images (make test runs them all, the race detector included)
check: verify guests guests-tinygo guests-other
	cd guest-sdk && $(GO) test ./...
	$(GO) test $$($(GO) list ./... | grep -v -e /test/e2e -e /test/perf -e /test/ports -e /test/image -e /test/node)

## test-deadlines-loaded: the deadline tests while busy loops load every core
## (hack/with-cpu-load.sh): the timing claims must hold on a busy machine
test-deadlines-loaded: guests guests-tinygo
	./hack/with-cpu-load.sh $(GO) test -count=1 -v -tags timing -run "$$(hack/tagged-tests.sh timing $(TIMING_PKGS))" $(addprefix ./,$(addsuffix /,$(TIMING_PKGS))) | grep -E '^(\s+--- FAIL|\s+\w+_test.go:[0-9]+: .*(overrun|FAIL|want)|--- |ok|FAIL|PASS)'

## fuzz: each fuzz target for FUZZTIME (seed corpora in testdata/fuzz run in
## every go test, make test included; fuzzing is this target's alone)
FUZZTIME ?= 10s
fuzz:
	$(GO) test -run XXX -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME) ./host/
	$(GO) test -run XXX -fuzz '^FuzzHostFunctions$$' -fuzztime $(FUZZTIME) ./host/
	$(GO) test -run XXX -fuzz '^FuzzInstrument$$' -fuzztime $(FUZZTIME) ./host/
	$(GO) test -run XXX -fuzz '^FuzzDeclarations$$' -fuzztime $(FUZZTIME) ./host/
	$(GO) test -run XXX -fuzz '^FuzzArgs$$' -fuzztime $(FUZZTIME) ./pkg/apis/config/scheme/

# The pinned helm, for the chart's tests (hack/tools/helm).
$(HELM): hack/tools/helm/go.mod hack/tools/helm/go.sum
	./hack/install-tools.sh helm

# The pinned cosign, for make cosign-interop (hack/tools/cosign).
$(COSIGN): hack/tools/cosign/go.mod hack/tools/cosign/go.sum
	./hack/install-tools.sh cosign

## cosign-interop: a real cosign (v2, pinned) verifies what wasmsched push
## signs, and wasmsched validate verifies what cosign sign signs, against a
## registry with TLS and basic auth (not in make test: cosign builds in
## about 2.5 minutes)
cosign-interop: build guests-tinygo $(COSIGN)
	$(GO) test -count=1 -v -tags cosign -run TestCosignInterop ./test/image/

## e2e: bin/kube-scheduler against a real kube-apiserver and etcd on 127.0.0.1
## (and the Helm chart, with the pinned helm)
e2e: build guests-tinygo controlplane $(HELM)
	hack/filtered.sh e2e '^(--- |\s+\w+_test.go|ok|FAIL|PASS)' $(GO) test -count=1 -timeout 30m -v ./test/e2e/

## bench: every benchmark at full length (about 40 minutes); regenerates
## the tables of docs/performance.md and the charts in docs/perf/
BENCH_OUT := $(OUT)/bench
# scheduler_perf runs are noisy on 2 cores: the doc shows the median of BENCH_COUNT runs.
BENCH_COUNT ?= 3
# Native / WasmTinyGo pairs at 5000 nodes, run alternately (median and spread
# of the ratios; five pairs spread 69%-117% on one day, so nine).
BENCH_PAIRS ?= 9
# Native / WasmTinyGo pairs at 500 nodes, each run its own process and the
# order swapped every pair: a run measures about two seconds there, and
# eight pairs spread 68%-133% on one day.
BENCH_PAIRS_500 ?= 16
# The per-node and cycle benchmarks the targets table judges run this many
# more times; the table takes each one's median over all its runs.
BENCH_REPEAT ?= 4
# Alternated runs of each pod-group case per profile (make bench).
BENCH_PAIRS_PODGROUP ?= 6
BENCH_REPEATED := BenchmarkShapes|BenchmarkCycle/nodes=1000/|BenchmarkManyPolicies/policies=200/
bench: build guests guests-tinygo ports controlplane $(ETCD_PATH)/etcd
	mkdir -p $(BENCH_OUT)
	set -o pipefail; $(GO) test -run XXX -bench . -benchmem ./test/perf/ | tee $(BENCH_OUT)/perf.txt
	set -o pipefail; $(GO) test -run XXX -bench '$(BENCH_REPEATED)' -benchmem -count $(BENCH_REPEAT) ./test/perf/ | tee -a $(BENCH_OUT)/perf.txt
	set -o pipefail; $(GO) test -run XXX -bench Cycle -benchtime 200x ./pkg/extender/ | tee $(BENCH_OUT)/extender.txt
	set -o pipefail; $(GO) test -run XXX -bench Ports ./test/ports/ | tee $(BENCH_OUT)/ports.txt
	rm -rf $(BENCH_OUT)/cluster && mkdir -p $(BENCH_OUT)/cluster
	set -o pipefail; PATH=$(CURDIR)/$(ETCD_PATH):$$PATH $(GO) test -run XXX -bench BenchmarkPerfScheduling -benchtime 1ns -count $(BENCH_COUNT) -timeout 90m ./test/perf/cluster/ \
		-args -perf-scheduling-label-filter=performance -data-items-dir $(BENCH_OUT)/cluster 2>&1 | grep -E '^(Benchmark|ok|FAIL|PASS|---)|placement:|batching:' | tee $(BENCH_OUT)/cluster.txt
	@# A/B alternation for the 5000-node target: BENCH_PAIRS runs of the
	@# native profile and WasmTinyGo one after the other (go test's -count
	@# repeats each case back to back, which is not a pair).
	rm -rf $(BENCH_OUT)/pairs $(BENCH_OUT)/pairs.txt
	set -o pipefail; for i in $$(seq $(BENCH_PAIRS)); do \
		PATH=$(CURDIR)/$(ETCD_PATH):$$PATH $(GO) test -run XXX -bench 'BenchmarkPerfScheduling$$/^(Native|WasmTinyGo)$$/^5000Nodes$$' -benchtime 1ns -count 1 -timeout 30m ./test/perf/cluster/ \
			-args -perf-scheduling-label-filter=performance -data-items-dir $(BENCH_OUT)/pairs/$$i 2>&1 | grep -E '^(Benchmark|ok|FAIL|PASS|---)' | tee -a $(BENCH_OUT)/pairs.txt || exit 1; \
	done
	rm -rf $(BENCH_OUT)/pairs500 $(BENCH_OUT)/pairs500.txt && mkdir -p $(BENCH_OUT)/pairs500
	$(GO) test -c -o $(BENCH_OUT)/pairs500/cluster.test ./test/perf/cluster/
	set -o pipefail; cd test/perf/cluster && for i in $$(seq $(BENCH_PAIRS_500)); do \
		order="Native WasmTinyGo"; if [ $$((i % 2)) = 0 ]; then order="WasmTinyGo Native"; fi; \
		for p in $$order; do \
			PATH=$(CURDIR)/$(ETCD_PATH):$$PATH $(BENCH_OUT)/pairs500/cluster.test -test.run XXX -test.bench 'BenchmarkPerfScheduling$$/^'$$p'$$/^500Nodes$$' -test.benchtime 1ns -test.timeout 10m \
				-perf-scheduling-label-filter=performance -data-items-dir $(BENCH_OUT)/pairs500/$$i 2>&1 | grep -E '^(Benchmark|ok|FAIL|PASS|---)|placement:' | tee -a $(BENCH_OUT)/pairs500.txt || exit 1; \
		done; \
	done
	rm -f $(BENCH_OUT)/pairs500/cluster.test
	@# Pod-group cycles: each of upstream's pod-group cases at 500 nodes under
	@# the default profile and the two with WasmPolicy, in its own process,
	@# the order rotated every pair.
	rm -rf $(BENCH_OUT)/pairspg $(BENCH_OUT)/pairspg.txt && mkdir -p $(BENCH_OUT)/pairspg
	$(GO) test -c -o $(BENCH_OUT)/pairspg/cluster.test ./test/perf/cluster/
	set -o pipefail; cd test/perf/cluster && for i in $$(seq $(BENCH_PAIRS_PODGROUP)); do \
		order="Default DefaultNative DefaultWasm PortsTinyGo"; if [ $$((i % 2)) = 0 ]; then order="PortsTinyGo DefaultWasm DefaultNative Default"; fi; \
		for p in $$order; do \
			PATH=$(CURDIR)/$(ETCD_PATH):$$PATH $(BENCH_OUT)/pairspg/cluster.test -test.run XXX -test.bench 'BenchmarkPerfSchedulingPodGroups/.*/^'$$p'$$/^500Nodes_225Groups$$' -test.benchtime 1ns -test.timeout 20m \
				-perf-scheduling-label-filter=performance -data-items-dir $(BENCH_OUT)/pairspg/$$i 2>&1 | grep -E '^(Benchmark|ok|FAIL|PASS|---)|placement:' | tee -a $(BENCH_OUT)/pairspg.txt || exit 1; \
		done; \
	done
	rm -f $(BENCH_OUT)/pairspg/cluster.test
	$(MAKE) --no-print-directory bench-rollout
	$(GO) run ./hack/benchreport

## bench-rollout: wasmsched rollout-report on a 5000-node, 50,000-pod
## snapshot file (hack/rollout-snapshot): wall time, CPU and peak memory
## on this machine, into $(BENCH_OUT)/rollout (docs/performance.md)
bench-rollout: deps build guests-tinygo
	$(GO) run ./hack/rollout-snapshot -nodes 5000 -pods 50000 -pending 500 -out $(BENCH_OUT)/rollout
	/usr/bin/time -v -o $(BENCH_OUT)/rollout/time.txt $(BIN)/wasmsched rollout-report --scheduler-config $(BENCH_OUT)/rollout/config.yaml \
		--snapshot $(BENCH_OUT)/rollout/snapshot.json --policy team-isolation --config 'key=team,spill=true,require=true' -o json > $(BENCH_OUT)/rollout/report.json
	@grep -E 'Elapsed|User time|System time|Maximum resident' $(BENCH_OUT)/rollout/time.txt
	@grep -m1 -E '"durationSeconds"' $(BENCH_OUT)/rollout/report.json

## bench-reads: what each kind of read costs a Filter per node
## (BenchmarkReadCost, three runs), into docs/performance.md's read table
bench-reads: guests-tinygo
	mkdir -p $(BENCH_OUT)
	set -o pipefail; $(GO) test -run XXX -bench BenchmarkReadCost -benchtime 6400x -count 3 ./test/perf/ | tee $(BENCH_OUT)/reads.txt
	$(GO) run ./hack/benchreport -reads $(BENCH_OUT)/reads.txt

## bench-smoke: each benchmark once, so they keep compiling and running
## (the cluster benchmark's ports workloads with the TinyGo ports only:
## -perf-scheduling-label-filter=smoke-all runs every profile)
bench-smoke: build guests guests-tinygo ports controlplane $(ETCD_PATH)/etcd
	$(GO) test -short -run XXX -bench . -benchtime 1x ./test/perf/ ./pkg/extender/ ./host/ ./test/ports/
	@# With the cluster benchmark, TestPlacementChecks: the checks it applies after each ports workload.
	set -o pipefail; PATH=$(CURDIR)/$(ETCD_PATH):$$PATH hack/filtered.sh bench-smoke-cluster '^(Benchmark|ok|FAIL|PASS|---)|placement:|batching:|^\s+\w+_test.go:[0-9]+' \
		$(GO) test -run TestPlacementChecks -bench BenchmarkPerfScheduling -benchtime 1ns -timeout 20m ./test/perf/cluster/ \
		-args -perf-scheduling-label-filter=smoke -data-items-dir $$(mktemp -d) | cut -c1-200

# scheduler_perf looks for etcd on PATH: the one built for the main line.
$(ETCD_PATH)/etcd: | controlplane

## soak: the load, reload and failover run at full size (500 nodes, 2000 pods;
## the tenant-isolation run with 5 pairs instead of 3; the teams run at 200
## nodes, 500 pods and 4 pairs; the growing-memory run at 200 nodes and 5
## pairs; make e2e runs them smaller)
soak: build guests-tinygo controlplane
	set -o pipefail; REUSE_MEMORY_PODS=1500 $(GO) test -count=1 -v -run '^TestVerdictReuseMemoryIsBudgeted$$' ./test/perf/ | grep -E '^(--- |\s+\w+_test.go|ok|FAIL|PASS)'
	set -o pipefail; SOAK_NODES=$${SOAK_NODES:-500} SOAK_PODS=$${SOAK_PODS:-2000} TENANT_PAIRS=$${TENANT_PAIRS:-5} TEAMS_NODES=$${TEAMS_NODES:-200} TEAMS_PODS=$${TEAMS_PODS:-500} TEAMS_PAIRS=$${TEAMS_PAIRS:-4} MEMORY_NODES=$${MEMORY_NODES:-200} MEMORY_PAIRS=$${MEMORY_PAIRS:-5} $(GO) test -count=1 -v -timeout 45m -run 'TestSoak|TestBadPolicyIsContained|TestTeamsCannotStallSpyOnOrCrowdOutEachOther|TestGrowingPolicyStaysWithinTheContainer' ./test/e2e/ | grep -E '^(--- |\s+\w+_test.go|ok|FAIL|PASS)'

clean:
	rm -rf $(BIN) $(OUT)
