# podpatch — see README.md. `make demo` runs the main job, `make test` runs every test.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
# A count, not a duration: duration-based -fuzztime fails spuriously with "context deadline
# exceeded" when the budget ends under load (golang/go#75804, fixed only in Go 1.27).
FUZZTIME ?= 20000x
# FuzzKeyedLists builds objects with hundreds of list items: fewer, larger executions.
FUZZTIME_LISTS ?= 2000x

.PHONY: test-faults test-faults-short
.PHONY: all build demo dev test vet fmt-check lint unit fuzz bench bench-engine clean control-plane image test-bench test-chart test-image test-managers fixtures

all: build

build: bin/podpatch

bin/podpatch: $(shell find cmd policies webhook certs lifecycle externalurl audit internal -name '*.go' -not -name '*_test.go') go.mod go.sum
	$(GO) build -ldflags '$(LDFLAGS)' -o $@ ./cmd/podpatch

## demo: a real kube-apiserver calling podpatch over TLS with the example policies; prints what
## podpatch changed in each Dask, Spark, Ray and Flink object the API server stored, then tears down.
demo: control-plane bin/podpatch
	@$(GO) run ./test/demo --root .

## dev: the same, but keeps running and prints a kubeconfig for kubectl.
dev: control-plane bin/podpatch
	@$(GO) run ./test/demo --root . --keep

## test: vet, formatting, unit and golden tests, CLI tests against the built binary, end-to-end
## tests against a real kube-apiserver (built from source on first use), the Helm chart and the
## image (modules of their own), brief fuzzing, and the real cluster managers behind podpatch.
test: vet fmt-check lint unit test-versions-quick test-bench bench-check test-chart test-image fuzz test-managers

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## lint: staticcheck, goimports (grouping: standard library, others, podpatch), pinned in
## test/tools/lint and built into bin/ once, and test/arch's name rules: no exported name
## repeating its package's, no export without a product caller, no engine function over 80
## lines or 5 parameters, no command file referring to another's.
lint:
	@hack/build-lint.sh bin
	bin/staticcheck ./...
	$(GO) test -count=1 -run '^(TestNoStutter|TestExportsHaveProductCallers|TestEngineFunctionsAreSmall|TestCommandFilesIndependent)$$' ./test/arch
	@out=$$(bin/goimports -l -local github.com/podpatch/podpatch $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "goimports needed (-local github.com/podpatch/podpatch):"; echo "$$out"; exit 1; fi

## control-plane: kube-apiserver, kube-controller-manager, kube-scheduler, etcd, kwok and kubectl for the
## end-to-end tests, built from source once into bin/.
control-plane bin/kube-apiserver bin/kube-controller-manager bin/kube-scheduler bin/etcd bin/kwok bin/kubectl:
	@hack/build-control-plane.sh bin

## test-managers: the real KubeRay operator, Dask operator, spark-submit and Flink client against the
## test control plane (with kube-controller-manager) and podpatch; every Pod and Service they make
## must be stored as `podpatch render` predicts; and the real Kueue (hack/build-kueue.sh builds bin/kueue)
## with KubeRay, Jobs and plain Pods. hack/build-managers.sh builds bin/ray-operator and a
## virtualenv cached by its pins. MANAGERS_WINDOW: how long each cluster is watched for a fight.
MANAGERS_WINDOW ?= 15s
test-managers: control-plane
	@venv=$$(hack/build-managers.sh bin) && kueue=$$(hack/build-kueue.sh bin) && \
	PODPATCH_MANAGERS=1 PODPATCH_MANAGERS_VENV=$$venv PODPATCH_KUEUE_BIN=$$kueue PODPATCH_MANAGERS_WINDOW=$(MANAGERS_WINDOW) \
		$(GO) test -count=1 -timeout 40m ./test/managers

## test-faults: the fault tier (test/faults, docs/faults.md): three podpatch replicas behind a load
## balancer under continuous Dask/Spark/Ray/Flink admissions and policy churn, through restarts of
## kube-apiserver and etcd, an etcd compaction, killed replicas and leader, rolling updates, a
## partition, policy bursts, a certificate rotation and a 3-minute soak. FAULTS_REPORT: the table.
FAULTS_REPORT ?=
test-faults: control-plane
	PODPATCH_FAULTS=long PODPATCH_FAULTS_REPORT=$(FAULTS_REPORT) $(GO) test -count=1 -timeout 60m -v -run TestFaults ./test/faults

## test-faults-short: the same faults, two replicas, shorter phases and a 60 s soak (about 6 minutes; its own
## tier since `make test` runs the emulated 1.34 lane, to keep a fresh machine's CI under 60 minutes).
test-faults-short: control-plane
	PODPATCH_FAULTS=short PODPATCH_FAULTS_REPORT=$(FAULTS_REPORT) $(GO) test -count=1 -timeout 20m ./test/faults

## fixtures: the same run, writing each manager's objects as podpatch receives them (the unpatched
## control copies) into policies/testdata/fixtures/.
fixtures: control-plane
	@venv=$$(hack/build-managers.sh bin) && \
	PODPATCH_MANAGERS=1 PODPATCH_MANAGERS_VENV=$$venv PODPATCH_MANAGERS_WINDOW=1s PODPATCH_MANAGERS_FIXTURES=1 \
		$(GO) test -count=1 -timeout 40m ./test/managers

# PROPERTY_SEED: the seed of the valid-in-valid-out property test (test/property), from the commit
# (its first 15 hex digits), so that a failure in CI reproduces from the commit alone.
PROPERTY_SEED ?= $(shell printf '%d' 0x$$(git rev-parse --short=15 HEAD 2>/dev/null || echo 1))

unit: control-plane
	PODPATCH_E2E=required PODPATCH_PROPERTY_SEED=$(PROPERTY_SEED) $(GO) test -count=1 ./...

.PHONY: test-property-long

## test-property-long: the engine's seeded property tests (the fixed point, valid in valid out,
## Kueue placement, namespace policies never leaving enforce out) over PROPERTY_LONG_SEEDS
## consecutive seeds each from the commit's, where `make test` runs the commit's seed and the
## regression seeds (hack/property-long.sh, docs/development.md). No control plane needed.
PROPERTY_LONG_SEEDS ?= 2000
test-property-long:
	@PODPATCH_PROPERTY_SEED=$(PROPERTY_SEED) PODPATCH_PROPERTY_SEEDS=$(PROPERTY_LONG_SEEDS) hack/property-long.sh

.PHONY: test-versions test-versions-quick

## test-versions: the version matrix (docs/development.md "The version matrix"): the
## version tests and the property test on 1.33 (real v1.33.13, also all of test/e2e and the real
## Dask operator and KubeRay), 1.34 (real v1.34.4 and emulated), 1.35 and 1.36 (emulated), 1.37
## (as 1.33), the alpha feature gates and the 1.38 preview (its failures not counted); builds
## the other minors' binaries into bin/kube-v1.3x once (hack/build-kube-version.sh). Ends with a
## table. VERSIONS_LANES picks lanes (hack/test-versions.sh lists them), e.g. "1.33 alpha".
VERSIONS_LANES ?=
test-versions: control-plane
	@PODPATCH_PROPERTY_SEED=$(PROPERTY_SEED) hack/test-versions.sh $(VERSIONS_LANES)

## test-versions-quick: the matrix's cheap lane, part of `make test`: emulated 1.34 on bin/'s
## kube-apiserver (version tests and property test).
test-versions-quick: control-plane
	@PODPATCH_PROPERTY_SEED=$(PROPERTY_SEED) hack/test-versions.sh 1.34-emu

## test-bench: the benchmark harness's own tests (module test/bench: report, plots, policy sets).
test-bench:
	@hack/build-lint.sh bin
	cd test/bench && GOWORK=off $(GO) vet ./... && GOWORK=off ../../bin/staticcheck ./... && GOWORK=off $(GO) test -count=1 ./...

## test-chart: the Helm chart with the Helm SDK against kube-apiserver: a values matrix dry-run,
## agreement with the kustomize overlays, install/test/upgrade/uninstall, dashboard and alert metrics.
test-chart: control-plane
	cd test/chart && GOWORK=off $(GO) vet ./... && GOWORK=off $(GO) test -count=1 ./...

## test-image: builds the image tarball and checks its config, layer and binary.
test-image:
	cd hack/image && GOWORK=off $(GO) vet ./... && GOWORK=off $(GO) test -count=1 ./...

## image: podpatch's OCI image as a tarball, built without a Docker engine (go-containerregistry);
## `docker load -i $(IMAGE_TAR)` or `ctr images import $(IMAGE_TAR)`. IMAGE_ARCH picks the GOARCH.
IMAGE_TAR  ?= dist/podpatch-image.tar
IMAGE_ARCH ?= $(shell $(GO) env GOARCH)
image:
	cd hack/image && GOWORK=off $(GO) run . --root ../.. --out $(abspath $(IMAGE_TAR)) --version $(VERSION) --arch $(IMAGE_ARCH)

fuzz:
	@for pkg in ./policies ./policies/checks ./internal/jsontree ./internal/yamljson ./externalurl/urltemplate; do \
		for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			n=$(FUZZTIME); [ $$t = FuzzKeyedLists ] && n=$(FUZZTIME_LISTS); \
			echo "fuzz $$pkg $$t ($$n)"; \
			$(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $$n $$pkg || exit 1; \
		done; \
	done

## bench: one run of every benchmark (stages, whole handler, HTTPS load against podpatch and two
## reference servers, end to end through kube-apiserver, the policy store with up to 10,000
## ConfigMaps and the scale test at that size); regenerates docs/benchmarks/benchmarks.md and the plots.
bench:
	@hack/bench.sh

.PHONY: bench-compare bench-check bench-baseline bench-second-line bench-native

## bench-second-line: what the second line adds to a create through the real API server at 1,
## 10, 100 and 300 enforce policies, beside podpatch's webhook and no admission, interleaved in
## one run (test/e2e's BenchmarkSecondLineCreate; docs/benchmarks/second-line.md). About two
## minutes; SECOND_LINE_ROUNDS creates of each kind per policy count.
SECOND_LINE_ROUNDS ?= 300
bench-second-line: control-plane
	PODPATCH_E2E=required $(GO) test -count=1 -run '^$$' -bench '^BenchmarkSecondLineCreate$$' -benchtime $(SECOND_LINE_ROUNDS)x ./test/e2e

## bench-native: what native admission (the MAPs `podpatch map` compiles) adds to a create through
## the real API server at 1, 10, 100 and 300 policies, beside podpatch's webhook, both and no
## admission, interleaved in one run (test/e2e's BenchmarkNativeCreate; docs/benchmarks/native.md).
## About three minutes; NATIVE_ROUNDS creates of each kind per policy count.
NATIVE_ROUNDS ?= 300
bench-native: control-plane
	PODPATCH_E2E=required $(GO) test -count=1 -run '^$$' -bench '^BenchmarkNativeCreate$$' -benchtime $(NATIVE_ROUNDS)x ./test/e2e

## bench-compare: the in-process benchmarks (whole handler, engine, worst case), 6 runs each,
## against docs/benchmarks/baseline.txt with benchstat; fails on a significant regression beyond
## +15 % sec/op or +10 % allocs/op or B/op (hack/bench-compare.sh, docs/development.md).
bench-compare:
	@hack/bench-compare.sh full

## bench-check: the quick version `make test` runs: each benchmark once, allocs/op only (+10 %).
bench-check:
	@hack/bench-compare.sh quick

## bench-baseline: rewrites docs/benchmarks/baseline.txt (on the machine you compare on).
bench-baseline:
	@hack/bench-compare.sh baseline

## bench-engine: the policy engine's own Go benchmarks only.
bench-engine:
	$(GO) -C test/bench test -run '^$$' -bench '^Benchmark(Apply|Compile)$$' -benchmem .
	$(GO) test -run '^$$' -bench . -benchmem ./policies

clean:
	rm -rf bin
