# wasmsched — see README.md. Everything this Makefile needs is installed by hack/.
SHELL := /bin/bash
.DEFAULT_GOAL := build

K8S_VERSION   := v1.34.10
GO            ?= go
BIN           := $(CURDIR)/bin
OUT           := $(CURDIR)/_output
CACHE         := .cache
TINYGO        := $(CURDIR)/.cache/tinygo/v0.41.1/bin/tinygo
POLICIES      := team-isolation bin-packing maintenance-avoidance gpu-fit spread
VERSION_PKGS  := k8s.io/component-base/version k8s.io/client-go/pkg/version
LDFLAGS       := $(foreach p,$(VERSION_PKGS),-X $(p).gitVersion=$(K8S_VERSION) -X $(p).gitMajor=1 -X $(p).gitMinor=34 -X $(p).gitTreeState=clean -X $(p).buildDate=1970-01-01T00:00:00Z)
GO_GUESTS     := $(foreach p,$(POLICIES),$(OUT)/guests/go/$(p).wasm)
TINYGO_GUESTS := $(foreach p,$(POLICIES),$(OUT)/guests/tinygo/$(p).wasm)
TIMING_TESTS  := TestInfiniteLoopEndsWithinTimeout|TestBatchDeadlinePerNode|TestAdversaryGuest|TestAdversarialPolicyIsolation
GUEST_SRCS    := $(shell find guest-sdk -name '*.go') guest-sdk/go.mod plugins-wasm/go.mod

.PHONY: build guests guests-tinygo tinygo deps fixtures test e2e soak bench bench-smoke fuzz controlplane demo clean

## build: bin/kube-scheduler (with version ldflags) and bin/wasm-extender
build: $(BIN)/kube-scheduler $(BIN)/wasm-extender $(BIN)/wasmsched

$(BIN)/kube-scheduler: $(shell find cmd host pkg guest-sdk/abi -name '*.go' -not -name '*_test.go') go.mod go.sum
	$(GO) build -ldflags '$(LDFLAGS)' -o $@ ./cmd/kube-scheduler

$(BIN)/wasm-extender: $(shell find cmd host pkg guest-sdk/abi -name '*.go' -not -name '*_test.go') go.mod go.sum
	$(GO) build -ldflags '$(LDFLAGS)' -o $@ ./cmd/wasm-extender

$(BIN)/wasmsched: $(shell find cmd host pkg guest-sdk/abi -name '*.go' -not -name '*_test.go') go.mod go.sum
	$(GO) build -ldflags '$(LDFLAGS)' -o $@ ./cmd/wasmsched

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

## controlplane: etcd, kube-apiserver and kubectl from Go modules, cached in .cache/bin
controlplane:
	./hack/build-controlplane.sh

## demo: a local control plane, the example policies, a workload and a hot reload (KEEP=1 keeps it running)
demo: deps guests-tinygo build controlplane
	$(GO) run ./hack/demo

## fixtures: recompile the hand-written .wat test fixtures (needs wabt)
fixtures:
	@for f in $$(find . -path ./.cache -prune -o -name '*.wat' -print); do wat2wasm $$f -o $${f%.wat}.wasm; done

## test: everything CI runs: native SDK and policy tests, host and plugin tests
## under -race with real TinyGo and Go guests, the scheduler binary checks, and
## the end-to-end tests against a real kube-apiserver and etcd (make e2e)
test: deps guests guests-tinygo build controlplane
	cd guest-sdk && $(GO) test -count=1 ./...
	cd plugins-wasm && $(GO) test -count=1 ./...
	$(GO) test -race -count=1 -skip '$(TIMING_TESTS)' $$($(GO) list ./... | grep -v -e /test/e2e -e /test/perf)
	# Deadline acceptance tests (a loop ends within timeout + 10ms) run alone,
	# so no other test binary competes for the 2 cores while they measure.
	set -o pipefail; $(GO) test -count=1 -v -run '$(TIMING_TESTS)' ./host/ ./pkg/wasmpolicy/ | grep -E '^(\s+--- FAIL|\s+(host|adversary|adversarial)_test.go|--- |ok|FAIL|PASS)'
	set -o pipefail; $(GO) test -count=1 -v -run 'TestExamplePoliciesAsWasm' ./test/policies/ | grep -E '^(\s+--- |\s+policies_test.go|ok|FAIL|PASS)'
	$(MAKE) --no-print-directory fuzz
	$(MAKE) --no-print-directory bench-smoke
	$(MAKE) --no-print-directory e2e

## fuzz: each fuzz target for FUZZTIME (seed corpora in testdata/fuzz run in every go test)
FUZZTIME ?= 10s
fuzz:
	$(GO) test -run XXX -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME) ./host/
	$(GO) test -run XXX -fuzz '^FuzzHostFunctions$$' -fuzztime $(FUZZTIME) ./host/
	$(GO) test -run XXX -fuzz '^FuzzArgs$$' -fuzztime $(FUZZTIME) ./pkg/apis/config/scheme/

## e2e: bin/kube-scheduler against a real kube-apiserver and etcd on 127.0.0.1
e2e: build guests-tinygo controlplane
	set -o pipefail; $(GO) test -count=1 -v ./test/e2e/ | grep -E '^(--- |\s+\w+_test.go|ok|FAIL|PASS)'

## bench: every benchmark at full length (about 10 minutes); regenerates
## the tables of docs/performance.md and the charts in docs/perf/
BENCH_OUT := $(OUT)/bench
# scheduler_perf runs are noisy on 2 cores: the doc shows the median of BENCH_COUNT runs.
BENCH_COUNT ?= 3
bench: build guests guests-tinygo controlplane $(CACHE)/bin/path/etcd
	mkdir -p $(BENCH_OUT)
	set -o pipefail; $(GO) test -run XXX -bench . -benchmem ./test/perf/ | tee $(BENCH_OUT)/perf.txt
	set -o pipefail; $(GO) test -run XXX -bench Cycle -benchtime 200x ./pkg/extender/ | tee $(BENCH_OUT)/extender.txt
	rm -rf $(BENCH_OUT)/cluster && mkdir -p $(BENCH_OUT)/cluster
	set -o pipefail; PATH=$(CURDIR)/$(CACHE)/bin/path:$$PATH $(GO) test -run XXX -bench BenchmarkPerfScheduling -benchtime 1ns -count $(BENCH_COUNT) -timeout 90m ./test/perf/cluster/ \
		-args -perf-scheduling-label-filter=performance -data-items-dir $(BENCH_OUT)/cluster 2>&1 | grep -E '^(Benchmark|ok|FAIL|PASS|---)' | tee $(BENCH_OUT)/cluster.txt
	$(GO) run ./hack/benchreport

## bench-smoke: each benchmark once, so they keep compiling and running
bench-smoke: build guests guests-tinygo controlplane $(CACHE)/bin/path/etcd
	$(GO) test -run XXX -bench . -benchtime 1x ./test/perf/ ./pkg/extender/ ./host/
	set -o pipefail; PATH=$(CURDIR)/$(CACHE)/bin/path:$$PATH $(GO) test -run XXX -bench BenchmarkPerfScheduling -benchtime 1ns -timeout 20m ./test/perf/cluster/ \
		-args -perf-scheduling-label-filter=smoke -data-items-dir $$(mktemp -d) 2>&1 | grep -E '^(Benchmark|ok|FAIL|PASS|---)' | cut -c1-120

# scheduler_perf looks for etcd on PATH.
$(CACHE)/bin/path/etcd: | controlplane
	mkdir -p $(CACHE)/bin/path && ln -sf ../etcd-v3.6.4 $@

## soak: the load, reload and failover run at full size (500 nodes, 2000 pods;
## make e2e runs it at 100 nodes and 400 pods)
soak: build guests-tinygo controlplane
	set -o pipefail; SOAK_NODES=$${SOAK_NODES:-500} SOAK_PODS=$${SOAK_PODS:-2000} $(GO) test -count=1 -v -timeout 30m -run 'TestSoak' ./test/e2e/ | grep -E '^(--- |\s+\w+_test.go|ok|FAIL|PASS)'

clean:
	rm -rf $(BIN) $(OUT)
