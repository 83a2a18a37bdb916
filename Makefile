# planmode-operator Makefile (kubebuilder layout).

# The Kubernetes version of envtest, kubectl and the API comes from go.mod: k8s.io/api v0.X.Y -> 1.X.Y.
K8S_VERSION ?= $(shell go list -m -f '{{.Version}}' k8s.io/api | sed 's/^v0\./1./')
ETCD_VERSION ?= 3.7.3
ENVTEST_DIR ?= $(CURDIR)/bin/k8s/$(K8S_VERSION)-$(shell go env GOOS)-$(shell go env GOARCH)
CONTROLLER_GEN ?= go tool controller-gen
GINKGO_FLAGS ?=
# Extra go test flags for make test, e.g. TEST_FLAGS=-v (ginkgo flags go with a single package: TEST_PKGS=./controllers TEST_FLAGS='-args -ginkgo.v').
TEST_FLAGS ?=
TEST_TIMEOUT ?= 30m
# Packages the unit and envtest suites cover. test/e2e runs with the same command.
TEST_PKGS ?= ./...
# Extra golangci-lint run flags for make lint, e.g. LINT_FLAGS=./webhooks/... (the default lints ./...).
LINT_FLAGS ?=
# Flags for test/bench, e.g. BENCH_FLAGS="-sessions 1,100 -store postgres://...".
BENCH_FLAGS ?=

# Every binary's --version (internal/version), from git when it is there.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
VERSION_PKG := github.com/harness-dev/planmode-operator/internal/version
LDFLAGS ?= -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).Commit=$(COMMIT)
# make run against an existing cluster instead of the local control plane (an explicit choice:
# KUBECONFIG alone is ignored), e.g. make run CLUSTER_KUBECONFIG=$$HOME/.kube/config.
CLUSTER_KUBECONFIG ?=

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Display this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

# The packages that carry kubebuilder markers, named: "./..." would also read the Go sources that
# hack/modbuild.sh unpacks under bin/ (Flux's controllers and their RBAC markers).
MARKER_PATHS ?= ./api/...;./controllers/...;./webhooks/...

.PHONY: manifests
manifests: ## Generate CRDs, RBAC and webhook manifests with controller-gen.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd webhook paths="$(MARKER_PATHS)" output:crd:artifacts:config=config/crd/bases
	go run ./hack/crddescriptions config/crd/bases/*.yaml

.PHONY: generate
generate: ## Generate deepcopy code with controller-gen.
	$(CONTROLLER_GEN) object paths="./api/..."

.PHONY: docs
docs: manifests ## Render docs/api.md from the generated CRDs.
	go run ./hack/apidocs config/crd/bases docs/api.md

.PHONY: fmt
fmt: ## Run go fmt.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: golangci-lint
golangci-lint: ## Build golangci-lint at the version hack/tools/go.mod pins into bin/ (cached by version).
	@hack/golangci-lint.sh >/dev/null

.PHONY: lint
lint: ## Run golangci-lint (.golangci.yml), building it first if needed.
	hack/golangci-lint.sh run $(LINT_FLAGS)

.PHONY: lint-fix
lint-fix: ## Run golangci-lint and apply the fixes its linters offer.
	hack/golangci-lint.sh run --fix $(LINT_FLAGS)

.PHONY: envtest-assets
envtest-assets: ## Build kube-apiserver, etcd and kubectl from Go modules into bin/k8s (cached).
	@hack/envtest-binaries.sh $(K8S_VERSION) $(ETCD_VERSION) >/dev/null

.PHONY: harness
harness: ## Install the real DeepSeek harness (dsh) and Node 22 from npm into bin/harness (pinned by hack/harness/package-lock.json; cached).
	@hack/harness.sh >/dev/null

.PHONY: dsh-plugin
dsh-plugin: harness ## Build the dsh plugin (agents/dsh-plugin: npm ci from its lockfile, tsc; cached under its node_modules and dist).
	@hack/dsh-plugin.sh >/dev/null

.PHONY: test-dsh-plugin
test-dsh-plugin: harness postgres ## Build the dsh plugin and run its TypeScript tests (node --test, on the harness's Node 22; a throwaway PostgreSQL server for its pg store).
	hack/dsh-plugin.sh test >/dev/null

.PHONY: postgres
postgres: ## Make sure PostgreSQL server binaries are installed (Debian packages).
	@hack/ensure-postgres.sh

.PHONY: chromium
chromium: ## Make sure Chromium is installed (Debian's chromium package), for test/webreview.
	@hack/ensure-chromium.sh

.PHONY: webreview-screenshots
webreview-screenshots: envtest-assets chromium ## Re-make docs/images/webreview-*.png (test/webreview in headless Chromium, WEBREVIEW_SCREENSHOTS=docs/images).
	WEBREVIEW_SCREENSHOTS="$(CURDIR)/docs/images" KUBEBUILDER_ASSETS="$(ENVTEST_DIR)" PATH="$(ENVTEST_DIR):$$PATH" \
		go test ./test/webreview -count=1 -timeout 10m $(TEST_FLAGS)

.PHONY: test
test: manifests generate fmt vet envtest-assets postgres chromium harness test-dsh-plugin ## Run every test suite (unit, envtest, both log stores, the real harness, the dsh plugin, kubectl plan --web in headless Chromium, e2e).
	KUBEBUILDER_ASSETS="$(ENVTEST_DIR)" PATH="$(ENVTEST_DIR):$(CURDIR)/bin:$$PATH" \
		go test $(TEST_PKGS) -timeout $(TEST_TIMEOUT) -count=1 $(TEST_FLAGS)

.PHONY: test-harness
test-harness: harness envtest-assets ## Run test/harness alone (scenarios through the real harness against a scripted model; the runs mostly wait, hence -parallel 6).
	KUBEBUILDER_ASSETS="$(ENVTEST_DIR)" PATH="$(ENVTEST_DIR):$$PATH" go test ./test/harness -count=1 -timeout 10m -parallel 6 $(TEST_FLAGS)

.PHONY: bench
bench: envtest-assets ## Boundary benchmark: real reconciler vs floor controller (latency p50/p99 at 1 and 100 sessions, API writes per toggle/step).
	KUBEBUILDER_ASSETS="$(ENVTEST_DIR)" go run ./test/bench $(BENCH_FLAGS)

# make bench-dsh: the real harness with the dsh plugin against the harness with its stock
# plan-mode plugin (same scripted model, nothing pending), then, with a selection pending, the
# plugin's boundary ack latency beside a Go SDK agent's on the real manager binary (-pending K
# boundaries each, default 20; 0 skips it). DSH_BENCH_FLAGS e.g. "-turns 20 -steps 20 -pending 50".
DSH_BENCH_FLAGS ?= -turns 10 -steps 20

.PHONY: bench-dsh
bench-dsh: envtest-assets harness dsh-plugin ## dsh plugin benchmark: per-step time vs the stock plan-mode plugin, API requests per step (counted by a proxy in front of the API server); then ack latency with a selection pending vs the Go SDK on the real manager.
	KUBEBUILDER_ASSETS="$(ENVTEST_DIR)" go run ./test/dshbench $(DSH_BENCH_FLAGS)

# make bench-scale: storms with SESSIONS sessions (SESSIONS=10000 for the large run), idle
# phase (start-up, restart, footprint) at each of IDLE_SESSIONS; SCALE_FLAGS are passed on (e.g. "-runs 3 -profile-dir bin/pprof",
# or "-phases all" to add the two-shard storms).
SESSIONS ?= 1000
IDLE_SESSIONS ?= 1000,10000
SCALE_FLAGS ?=

.PHONY: bench-scale
bench-scale: envtest-assets postgres ## Scale benchmark: manager and floor processes side by side (boundary/toggle storms, API writes, RSS/CPU, log stores, webhooks).
	KUBEBUILDER_ASSETS="$(ENVTEST_DIR)" go run ./test/scale -sessions $(SESSIONS) -idle-sessions $(IDLE_SESSIONS) $(SCALE_FLAGS)

# make bench-shards: the shards phase alone, SHARDS manager processes with --shard-selector,
# SHARD_SESSIONS sessions each, on one PostgreSQL log, beside as many floor processes; the
# sides run in turn. 4 x 5,000 takes 30 minutes or more on two cores; SHARD_FLAGS are passed on
# (e.g. "-runs 3", or "-timeout 30m").
SHARDS ?= 4
SHARD_SESSIONS ?= 5000
SHARD_FLAGS ?=

.PHONY: bench-shards
bench-shards: envtest-assets postgres ## Sharded scale benchmark: SHARDS (4) managers x SHARD_SESSIONS (5,000) sessions on one PostgreSQL beside as many floors (per-shard storms, API server CPU per session, RSS).
	KUBEBUILDER_ASSETS="$(ENVTEST_DIR)" go run ./test/scale -phases shards -stores postgres -shards $(SHARDS) -shard-sessions $(SHARD_SESSIONS) $(SHARD_FLAGS)

BENCH_COUNT ?= 5
BENCH_TIME ?= 1s

.PHONY: bench-log
bench-log: postgres ## Session-log benchmarks on SQLite and PostgreSQL (append; Tail at 10/10k/1M events); medians of BENCH_COUNT separate runs.
	@mkdir -p bin
	go test -c -o bin/sessionlog.test ./pkg/sessionlog/
	@: > bin/bench-log.txt; for i in $$(seq $(BENCH_COUNT)); do \
		echo "run $$i/$(BENCH_COUNT): bin/sessionlog.test -test.bench . -test.benchtime $(BENCH_TIME) >> bin/bench-log.txt"; \
		(cd pkg/sessionlog && ../../bin/sessionlog.test -test.run '^$$' -test.bench . -test.benchtime $(BENCH_TIME) -test.timeout 60m -test.v) \
			>> bin/bench-log.txt 2>&1 || { tail -50 bin/bench-log.txt; exit 1; }; \
	done
	@grep -E '^\s+bench_test' bin/bench-log.txt
	go run ./hack/benchmedian < bin/bench-log.txt

.PHONY: soak-outage
soak-outage: envtest-assets postgres ## Protocol v2 outage soak: the manager SIGSTOPped/SIGKILLed across 1,000 toggles (OUTAGE_TOGGLES=n to change; figures to bin/reliability-outage.jsonl).
	@mkdir -p bin; : > bin/reliability-outage.jsonl
	RELIABILITY_OUTAGE_TOGGLES=$(or $(OUTAGE_TOGGLES),1000) RELIABILITY_REPORT=$(CURDIR)/bin/reliability-outage.jsonl KUBEBUILDER_ASSETS="$(ENVTEST_DIR)" \
		go test ./test/reliability -count=1 -timeout 2h -v -args -ginkgo.focus="manager outage"
	@cat bin/reliability-outage.jsonl

.PHONY: soak
soak: envtest-assets postgres ## Reliability soak: 1,000 manager crash injections, 30 s outages, 10 patchers x 1,000 toggles (test/reliability; figures to bin/reliability-soak.jsonl).
	@mkdir -p bin; : > bin/reliability-soak.jsonl
	RELIABILITY_SOAK=1 RELIABILITY_REPORT=$(CURDIR)/bin/reliability-soak.jsonl KUBEBUILDER_ASSETS="$(ENVTEST_DIR)" \
		go test ./test/reliability -count=1 -timeout 6h -v $(if $(GINKGO_FLAGS),-args $(GINKGO_FLAGS))
	@cat bin/reliability-soak.jsonl

# The figures in docs/reliability.md: the reliability suite on a clean, committed tree, its rows
# written beside the docs as docs/results/reliability-<commit>.jsonl with a header naming the
# commit, the sizes and the machine. Sizes default to the short run; raise them with
# RELIABILITY_CRASHES, RELIABILITY_AGENT_KILLS, RELIABILITY_TOGGLES, RELIABILITY_OUTAGE_SECONDS
# (or RELIABILITY_SOAK=1).
.PHONY: reliability-report
reliability-report: envtest-assets postgres ## Run test/reliability on the committed tree; rows to docs/results/reliability-<commit>.jsonl.
	@git diff --quiet HEAD -- && test -z "$$(git status --porcelain --untracked-files=no)" || { echo "reliability-report: commit or stash your changes first: the figures must come from a commit" >&2; exit 1; }
	@mkdir -p docs/results
	@c=$$(git rev-parse --short HEAD); out=docs/results/reliability-$$c.jsonl; \
	printf '{"commit":"%s","command":"make reliability-report","sizes":{"crashes":"%s","agentKills":"%s","toggles":"%s","outageSeconds":"%s","soak":"%s"},"cores":%s,"go":"%s"}\n' \
		"$$(git rev-parse HEAD)" "$$RELIABILITY_CRASHES" "$$RELIABILITY_AGENT_KILLS" "$$RELIABILITY_TOGGLES" "$$RELIABILITY_OUTAGE_SECONDS" "$$RELIABILITY_SOAK" \
		"$$(nproc)" "$$(go env GOVERSION)" > $$out; \
	RELIABILITY_REPORT=$(CURDIR)/$$out KUBEBUILDER_ASSETS="$(ENVTEST_DIR)" \
		go test ./test/reliability -count=1 -timeout 6h -v > docs/results/reliability-$$c.log 2>&1; rc=$$?; \
	grep -E '^(ok|FAIL|--- )|Ran [0-9]+ of' docs/results/reliability-$$c.log > docs/results/reliability-$$c.txt; rm -f docs/results/reliability-$$c.log; \
	cat $$out docs/results/reliability-$$c.txt; exit $$rc

.PHONY: verify-generated
verify-generated: manifests generate docs ## Fail if generated files differ from what is committed.
	@git diff --exit-code -- api config docs/api.md || { echo "generated files are stale: run 'make manifests generate' and commit the result" >&2; exit 1; }

##@ Build

.PHONY: build
build: ## Build the binaries into bin/.
	go build -ldflags "$(LDFLAGS)" -o bin/ ./cmd/...

# make run AGENT=dsh: the demo agent is the real DeepSeek harness with agents/dsh-plugin, on a
# scripted local model unless DEEPSEEK_API_KEY (and DEEPSEEK_BASE_URL) are set (docs/agents.md).
AGENT ?= refagent

.PHONY: run
run: envtest-assets build $(if $(filter dsh,$(AGENT)),dsh-plugin) ## Run the operator on an embedded default (local control plane, SQLite log, demo agent; state kept in .planmode). CLUSTER_KUBECONFIG=path runs it against that cluster; AGENT=dsh makes the real harness the demo agent.
	bin/localenv --assets "$(ENVTEST_DIR)" $(if $(CLUSTER_KUBECONFIG),--cluster-kubeconfig="$(CLUSTER_KUBECONFIG)") \
		$(if $(filter dsh,$(AGENT)),--agent=dsh --dsh-root="$$(hack/harness.sh 2>/dev/null | tail -1)" --dsh-overlay="$$(hack/dsh-plugin.sh overlay 2>/dev/null | tail -1)") $(RUN_ARGS)

.PHONY: build-installer
build-installer: manifests envtest-assets ## Render config/default with the hack-built kubectl into dist/install.yaml (commit it).
	@mkdir -p dist
	"$(ENVTEST_DIR)/kubectl" kustomize config/default > dist/install.yaml
	@echo "wrote dist/install.yaml ($$(grep -c '^kind:' dist/install.yaml) objects)"

.PHONY: chart
chart: build-installer ## Generate the Helm chart dist/chart from dist/install.yaml (hack/chart; commit it: test/chart checks it is fresh).
	go run ./hack/chart

.PHONY: helm
helm: ## Build Helm v4 at the version go.mod requires into bin/helm-<version> (cached by version).
	@hack/helm.sh >/dev/null

.PHONY: helm-lint
helm-lint: helm ## helm lint and helm template of dist/chart with each certificate source (test/chart checks the same with Helm's Go packages).
	@set -e; helm=$$(hack/helm.sh); for src in cert-manager self-signed "secret --set certificates.caBundle=x"; do \
		$$helm lint --strict dist/chart --set certificates.source=$$src; \
		$$helm template planmode dist/chart -n planmode-system --set certificates.source=$$src >/dev/null; done

# make release VERSION=v0.3.0: the release's files in RELEASE_DIR (default bin/release/VERSION):
# the manager image as an OCI archive, install.yaml and the Helm chart with that image pinned by
# digest, kubectl-plan for linux/darwin amd64/arm64, the krew manifest, checksums (hack/release.sh).
# IMAGE_REPOSITORY names the registry repository the image will be pushed to.
.PHONY: release
release: envtest-assets helm ## Write a versioned release into bin/release/VERSION (make release VERSION=vX.Y.Z; needs podman: make cluster-deps).
	KUBECTL="$(ENVTEST_DIR)/kubectl" VERSION="$(VERSION)" hack/release.sh

.PHONY: test-release
test-release: ## Run test/release: make release into a temporary directory, then check its files, digests, versions, platforms and the krew manifest (with krew, built from Go modules; needs podman).
	go test -tags release ./test/release -count=1 -timeout 60m -v

.PHONY: docker-build
docker-build: ## Build the manager image (needs a Docker engine; none runs on the dev machines).
	docker build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t $${IMG:-planmode-operator:dev} .

##@ Test cluster (a real single-node Kubernetes built from Go modules and Debian packages; root)

# Where the running cluster keeps its state (ignored by git); the binaries are cached in bin/cluster.
CLUSTER_DIR ?= $(CURDIR)/.cluster

.PHONY: cluster-deps
cluster-deps: ## Install the Debian packages the test cluster needs when missing (containerd, runc, CNI plugins, iptables, podman).
	@hack/cluster/deps.sh

.PHONY: cluster-build
cluster-build: cluster-deps envtest-assets ## Build kubelet, controller-manager, scheduler, kube-proxy, crictl, CoreDNS and the pause/CoreDNS images into bin/cluster (cached by version).
	@hack/cluster/build.sh >/dev/null

.PHONY: cluster-up
cluster-up: cluster-build ## Start the test cluster under CLUSTER_DIR (admin kubeconfig: CLUSTER_DIR/pki/admin.kubeconfig); a running one is reused.
	@CLUSTER_DIR="$(CLUSTER_DIR)" hack/cluster/up.sh >/dev/null

.PHONY: cluster-images
cluster-images: dsh-plugin ## Build the manager, reference-agent, probe and dsh-agent (the real harness with agents/dsh-plugin) images FROM scratch and load them into the running test cluster.
	@CLUSTER_DIR="$(CLUSTER_DIR)" hack/cluster/images.sh >/dev/null

.PHONY: cluster-down
cluster-down: ## Stop the test cluster: processes by PID, pods, mounts, bridges, iptables chains (CLUSTER_DOWN_FLAGS=--purge also drops its PKI and image store).
	@CLUSTER_DIR="$(CLUSTER_DIR)" hack/cluster/down.sh $(CLUSTER_DOWN_FLAGS)

.PHONY: flux
flux: ## Build Flux's source-controller and kustomize-controller from Go modules into bin/flux (cached by version; test/cluster runs them).
	@hack/flux.sh >/dev/null

.PHONY: test-cluster
test-cluster: cluster-up cluster-images postgres helm flux ## Run test/cluster: the operator from dist/install.yaml and with Helm on the test cluster, an upgrade with agents running, Flux syncing from Git (starts it when needed; make cluster-down stops it).
	KUBEBUILDER_ASSETS="$(ENVTEST_DIR)" CLUSTER_DIR="$(CLUSTER_DIR)" \
		go test -tags cluster ./test/cluster -count=1 -timeout 30m -v -args -ginkgo.v $(GINKGO_FLAGS)
