# consul-gateway-controller. `make help` lists the targets.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

include tools/versions.mk

GO ?= go
BIN := $(CURDIR)/bin
CONTROLLER := $(BIN)/consul-gateway-controller
GO_TEST_FLAGS ?= -race -count=1 -timeout=30m

KUBE_CMDS := kube-apiserver kubectl kube-controller-manager kube-scheduler
KUBE_TOOLS := $(addprefix bin/,$(KUBE_CMDS)) bin/etcd
ALL_TOOLS := $(KUBE_TOOLS) bin/kwok bin/consul bin/golangci-lint bin/rvcheck bin/controller-gen bin/helm
# What make test runs against: a subset of ALL_TOOLS, so CI builds no more than it uses.
TEST_TOOLS := $(KUBE_TOOLS) bin/kwok bin/consul bin/golangci-lint bin/helm
# Tests of single packages; everything under test/ runs against the real servers. A few
# of them check a package's internals against a real Consul agent (consul/intentions),
# so the unit tests build it too.
UNIT_PKGS = $(shell $(GO) list ./... | grep -v '/test/')

.PHONY: help build tools generate test test-unit test-integration test-chaos test-xds test-rules test-conformance conformance conformance-binary test-image lint run-local bench chaos clean image fuzz

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

# The build names its commit (version command, build_info metric, start-up line):
# GOFLAGS may turn Go's own version control stamping off (-buildvcs=false).
BUILD_REVISION := $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
BUILD_LDFLAGS = -X github.com/consul-gateway-controller/consul-gateway-controller/internal/buildinfo.revision=$(BUILD_REVISION) \
  -X github.com/consul-gateway-controller/consul-gateway-controller/internal/buildinfo.version=$(IMAGE_VERSION)

build: ## build the controller into bin/
	$(GO) build -ldflags '$(BUILD_LDFLAGS)' -o $(CONTROLLER) .

tools: $(ALL_TOOLS) ## build the test servers and linters from source into bin/ (idempotent)

# Each binary is rebuilt only when its module's pins change. The Go build cache makes a
# rebuild after a pin change cheap for everything that did not change.
# The version is stamped as Kubernetes' own build does (hack/lib/version.sh), so the API
# server reports v1.37.2 and not v0.0.0: clients that check it (helm's kubeVersion)
# see the release.
KUBE_VERSION_PKGS := k8s.io/component-base/version k8s.io/client-go/pkg/version
KUBE_LDFLAGS := $(foreach p,$(KUBE_VERSION_PKGS),-X $(p).gitVersion=$(KUBERNETES_VERSION) \
  -X $(p).gitMajor=$(word 1,$(subst ., ,$(KUBERNETES_VERSION:v%=%))) \
  -X $(p).gitMinor=$(word 2,$(subst ., ,$(KUBERNETES_VERSION:v%=%))) -X $(p).gitTreeState=clean)
$(addprefix bin/,$(KUBE_CMDS)): bin/%: tools/kube/go.mod tools/kube/go.sum tools/versions.mk
	@echo "building $* $(KUBERNETES_VERSION): about 10 minutes on a cold Go build cache, seconds on a warm one"
	cd tools/kube && $(GO) build -ldflags '$(KUBE_LDFLAGS)' -o $(BIN)/$* k8s.io/kubernetes/cmd/$*

bin/etcd: tools/kube/go.mod tools/kube/go.sum tools/versions.mk
	@echo "building etcd $(ETCD_VERSION): about 2 minutes on a cold Go build cache"
	cd tools/kube && $(GO) build -o $(BIN)/etcd go.etcd.io/etcd/server/v3

# kwok plays the kubelet of the test cluster. Its stages (what it does to Nodes and
# Pods) are kwok's own fast set, taken from the same module: nodes initialise and keep
# their Lease, pods become Ready with an IP, and are deleted or completed.
KWOK_STAGES := node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease \
  pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete
bin/kwok: tools/kwok/go.mod tools/kwok/go.sum tools/versions.mk
	@echo "building kwok $(KWOK_VERSION): about 2 minutes on a cold Go build cache"
	cd tools/kwok && $(GO) build -o $(BIN)/kwok sigs.k8s.io/kwok/cmd/kwok
	cd tools/kwok && dir=$$($(GO) list -m -f '{{.Dir}}' sigs.k8s.io/kwok) && \
	  for stage in $(KWOK_STAGES); do cat "$$dir/kustomize/stage/$$stage.yaml"; echo "---"; done > $(BIN)/kwok-stages.yaml

bin/consul: tools/consul/go.mod tools/consul/go.sum tools/versions.mk
	@echo "building consul $(CONSUL_VERSION): about 5 minutes on a cold Go build cache"
	cd tools/consul && $(GO) build -o $(BIN)/consul github.com/hashicorp/consul

bin/golangci-lint: tools/lint/go.mod tools/lint/go.sum tools/versions.mk
	@echo "building golangci-lint $(GOLANGCI_LINT_VERSION): about 3 minutes on a cold Go build cache"
	cd tools/lint && $(GO) build -o $(BIN)/golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint

bin/controller-gen: tools/codegen/go.mod tools/codegen/go.sum tools/versions.mk
	@echo "building controller-gen $(CONTROLLER_TOOLS_VERSION): about a minute on a cold Go build cache"
	cd tools/codegen && $(GO) build -o $(BIN)/controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen

# Helm renders, lints and installs the chart in the tests (deploy/helm).
bin/helm: tools/helm/go.mod tools/helm/go.sum tools/versions.mk
	@echo "building helm $(HELM_VERSION): about 3 minutes on a cold Go build cache"
	cd tools/helm && $(GO) build -o $(BIN)/helm helm.sh/helm/v4/cmd/helm

# The project's own API (api/) is Go types with markers; its DeepCopy methods and its
# CRD are generated from them. The chart carries the Gateway API CRDs of the module
# go.mod pins. make lint fails when any of them is not current. The binary carries
# both (deploy/crds.go): translate validates objects by them.
CRD_DIR := deploy/crds
CHART_GATEWAY_API_CRDS := deploy/helm/consul-gateway-controller/files/gateway-api
generate: bin/controller-gen ## write api/'s DeepCopy methods and deploy/crds from the Go types, and the chart's Gateway API CRDs
	$(BIN)/controller-gen object paths=./api/...
	$(BIN)/controller-gen crd:crdVersions=v1 paths=./api/... output:crd:dir=$(CRD_DIR)
	rm -f $(CHART_GATEWAY_API_CRDS)/*.yaml
	install -m 0644 $$($(GO) list -m -f '{{.Dir}}' sigs.k8s.io/gateway-api)/config/crd/standard/*.yaml $(CHART_GATEWAY_API_CRDS)/

# The resourceVersion analyzer: its sources are this project's, so it is rebuilt when
# they change.
bin/rvcheck: tools/lint/go.mod tools/lint/go.sum $(wildcard tools/lint/rvcheck/*.go tools/lint/cmd/rvcheck/*.go)
	cd tools/lint && $(GO) build -o $(BIN)/rvcheck ./cmd/rvcheck

test: lint test-unit test-integration test-chaos test-xds test-rules test-conformance test-image ## everything CI runs: static checks, unit and integration tests

test-unit: bin/consul ## tests of single packages (a real Consul agent where one checks internals against it)
	$(GO) test $(GO_TEST_FLAGS) $(UNIT_PKGS)

# The fuzz targets, as package:Target. make test-unit runs their seed corpora (f.Add and
# testdata/fuzz); make fuzz fuzzes each in turn for FUZZTIME. FUZZ_FLAGS='-parallel=1'
# keeps it to one core.
FUZZ_TARGETS := ./sync:FuzzRouteStatus ./sync:FuzzListeners ./sync:FuzzHostnameIntersection \
  ./consul/translate:FuzzTranslate ./consul/translate:FuzzTranslator ./consul/translate:FuzzRouteHostnames ./consul/translate:FuzzEntryNames
FUZZTIME ?= 30s
FUZZ_FLAGS ?=

fuzz: ## fuzz each target for FUZZTIME (default 30s), one at a time; failing inputs land in testdata/fuzz
	for target in $(FUZZ_TARGETS); do \
	  $(GO) test -run='^$$' -fuzz='^'"$${target#*:}"'$$' -fuzztime=$(FUZZTIME) $(FUZZ_FLAGS) "$${target%%:*}" || exit 1; \
	done

test-integration: $(TEST_TOOLS) ## integration tests against real kube-apiserver, etcd and Consul
	$(GO) test $(GO_TEST_FLAGS) $$($(GO) list ./test/... | grep -v /test/chaos)

# The fault-injection suite runs alone: its faults and replicas load both cores.
test-chaos: $(TEST_TOOLS) ## the fault-injection suite, short form: one seed, every fault once
	$(GO) test $(GO_TEST_FLAGS) ./test/chaos

# The xDS proof acts as a gateway's Envoy against Consul; it is its own Go module, so
# that gRPC and Envoy's protos stay out of the product's go.mod.
test-xds: $(TEST_TOOLS) ## what Consul serves each gateway's Envoy, against what the Gateway API objects mean
	cd test/xds && $(GO) test $(GO_TEST_FLAGS) ./...

# The chart's alert rules and dashboard, checked by Prometheus's own rule and PromQL
# parsers: its own Go module, so that Prometheus stays out of the product's go.mod.
test-rules: ## the chart's alert rules and Grafana dashboard parse, and read only documented series
	cd test/rules && $(GO) test $(GO_TEST_FLAGS) ./...

# The Gateway API conformance suite needs controller-runtime: its own Go module, never
# the product's. Its binary runs the suite twice on one cluster: status only, and with
# every request answered from the xDS Consul serves (test/conformance). It is built
# first, where the module cache may be filled from the network, then run in a network
# namespace that has only loopback (unshare; a user namespace when not root), so that no
# packet can leave even by mistake: everything it talks to runs inside with it, and the
# controller it builds needs only the module cache (GOPROXY=off).
#
# The tests known to fail run too, so the binary's exit status is not the verdict. Its
# output (-test.v=test2json) becomes events (go tool test2json), and the same binary
# with -judge holds them to the known failures (test/conformance/known_test.go): a
# known test that passes or fails otherwise, any other failure, or a run that did not
# finish fails the target.
CONFORMANCE_TEST := $(CURDIR)/_output/conformance.test
CONFORMANCE_OUT := $(CURDIR)/_output/conformance
LOOPBACK_ONLY := unshare --net $(if $(filter 0,$(shell id -u)),,--map-root-user) bash -c 'ip link set lo up && exec "$$0" "$$@"'
# $(1): more flags for the run. The binary's own status is ignored here: the judge's counts.
CONFORMANCE_RUN = mkdir -p $(CONFORMANCE_OUT) && cd test/conformance && \
  { GOPROXY=off $(LOOPBACK_ONLY) $(CONFORMANCE_TEST) -test.v=test2json -test.count=1 -test.timeout=60m \
    -test.run='^TestConformance(Traffic)?$$' -results=$(CONFORMANCE_OUT)/results.json $(1) 2>&1 || true; } | \
  tee $(CONFORMANCE_OUT)/output.txt && $(GO) tool test2json -t < $(CONFORMANCE_OUT)/output.txt > $(CONFORMANCE_OUT)/events.json
# $(1): more flags for the judge.
CONFORMANCE_JUDGE = cd test/conformance && $(CONFORMANCE_TEST) -judge=$(CONFORMANCE_OUT)/events.json -results=$(CONFORMANCE_OUT)/results.json $(1)

conformance-binary:
	cd test/conformance && $(GO) test -c -race -o $(CONFORMANCE_TEST) .

test-conformance: $(TEST_TOOLS) conformance-binary ## the conformance suite, status only and through the xDS; fails on any outcome but the known failures
	cd test/conformance && $(GO) test $(GO_TEST_FLAGS) ./judge
	$(call CONFORMANCE_RUN,)
	$(call CONFORMANCE_JUDGE,)

conformance: $(TEST_TOOLS) conformance-binary ## test-conformance that also writes docs/conformance (the suite's reports and README.md)
	$(call CONFORMANCE_RUN,-report-dir=$(CURDIR)/docs/conformance)
	$(call CONFORMANCE_JUDGE,-report-dir=$(CURDIR)/docs/conformance)

lint: bin/golangci-lint bin/rvcheck bin/controller-gen ## gofmt, go vet, golangci-lint, go mod tidy, generated code, module and resourceVersion rules
	@unformatted=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go')); \
	  if [[ -n "$$unformatted" ]]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(BIN)/golangci-lint run --allow-parallel-runners ./...
	$(GO) mod tidy -diff
	@if grep -q 'sigs.k8s.io/controller-runtime' go.mod; then \
	  echo "go.mod lists sigs.k8s.io/controller-runtime; the product must not depend on it"; exit 1; fi
	$(BIN)/rvcheck ./...
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  $(BIN)/controller-gen object paths=./api/... output:object:stdout > "$$tmp/deepcopy.go" && \
	  $(BIN)/controller-gen crd:crdVersions=v1 paths=./api/... output:crd:dir="$$tmp/crds" && \
	  diff -u api/v1alpha1/zz_generated.deepcopy.go "$$tmp/deepcopy.go" && diff -ru $(CRD_DIR) "$$tmp/crds" && \
	  diff -ru $$($(GO) list -m -f '{{.Dir}}' sigs.k8s.io/gateway-api)/config/crd/standard $(CHART_GATEWAY_API_CRDS) || \
	  { echo "generated code is stale: run make generate"; exit 1; }
	for m in test/xds test/conformance test/rules; do (cd $$m && $(GO) vet ./... && $(GO) mod tidy -diff && \
	  $(BIN)/golangci-lint run --allow-parallel-runners -c ../../.golangci.yml ./...) || exit 1; done
	cd tools/lint && $(GO) vet ./... && $(GO) mod tidy -diff && \
	  $(BIN)/golangci-lint run --allow-parallel-runners -c ../../.golangci.yml ./... && $(GO) test $(GO_TEST_FLAGS) ./...

test-image: bin/golangci-lint ## lint and test tools/image, the image builder (its own module)
	cd tools/image && $(GO) vet ./... && $(GO) mod tidy -diff && \
	  $(BIN)/golangci-lint run --allow-parallel-runners -c ../../.golangci.yml ./... && \
	  $(GO) test $(GO_TEST_FLAGS) ./...

# The image is reproducible: the same source, Go toolchain, IMAGE_ARCH, IMAGE_VERSION
# and SOURCE_DATE_EPOCH (unset means Unix 0) give the same digest; see docs/image.md.
IMAGE_ARCH ?= amd64
IMAGE_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE_DIR := $(CURDIR)/_output/image

image: ## OCI layout and docker tarball of the static controller in _output/image/; prints the digest
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath -ldflags='-s -w -buildid= $(BUILD_LDFLAGS)' -o $(IMAGE_DIR)/consul-gateway-controller .
	cd tools/image && $(GO) run . -binary $(IMAGE_DIR)/consul-gateway-controller -arch $(IMAGE_ARCH) -version $(IMAGE_VERSION) \
	  -layout $(IMAGE_DIR)/layout -tarball $(IMAGE_DIR)/consul-gateway-controller.tar

# LOCAL_FLAGS=-secure runs Consul with ACLs (default deny) and TLS only, and the
# controller with deploy/'s least-privilege token and --gateway-auth-method.
LOCAL_FLAGS ?=

run-local: build $(KUBE_TOOLS) bin/kwok bin/consul ## local control plane with a fake Node, Consul and the controller, with examples/ applied (LOCAL_FLAGS=-secure: ACLs and TLS)
	$(GO) run ./test/localstack -state-dir=_output/local -controller=$(CONTROLLER) -examples=examples $(LOCAL_FLAGS)

# The bench builds the controller itself (go build of this checkout) and starts its own
# servers; BENCH_FLAGS='-sizes=100' is a smoke run. It rewrites docs/bench.md and docs/bench.svg.
BENCH_FLAGS ?=

bench: bin/kube-apiserver bin/etcd bin/consul ## cold start, edits, restart, failover and memory against raw-write floors; writes docs/bench.md
	$(GO) run ./test/bench $(BENCH_FLAGS)

# The fault-injection suite's long form: more seeds, every fault twice per seed (its
# short form is test-chaos). CHAOS_FLAGS='-chaos.seed=N -chaos.faults=a,b' replays a run.
CHAOS_FLAGS ?=

chaos: $(TEST_TOOLS) ## the fault-injection suite, long form; writes its table into docs/reliability.md
	$(GO) test -count=1 -timeout=120m ./test/chaos -run TestChaos -v -chaos.long \
	  -chaos.report=$(CURDIR)/docs/reliability.md $(CHAOS_FLAGS)

clean: ## remove bin/ and _output/
	rm -rf bin _output
