# The project's front door. `make help` lists the targets.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

CARGO ?= cargo
TARGET_DIR = $${CARGO_TARGET_DIR:-target}
# One build serves `make test`, the bench smoke check, `make demo` and the
# cluster targets: every target of the workspace, so Cargo resolves the
# features once (dev-dependencies add some, e.g. tokio's test-util) and
# `cargo test --workspace --all-targets` then compiles nothing. A narrower
# `cargo build` or `cargo run -p testenv` would resolve other features and
# compile much of the dependency tree a second time (minutes).
BUILD := $(CARGO) build --workspace --all-targets
TESTENV := $(BUILD) --quiet && $(TARGET_DIR)/debug/testenv
TIMINGS := .work/make-test-timings
TEST_LOG := .work/make-test-cargo-test.log
# Tests at once per test binary. The suites are few binaries of many tests
# that mostly wait on kube-apiserver, simulators and their clocks, so more
# than the 2 cores pay (docs/testing.md has the figures).
# RUST_TEST_THREADS=1 make test runs one at a time.
RUST_TEST_THREADS ?= 8
export RUST_TEST_THREADS

# $(call phase,NAME,COMMAND): runs COMMAND, printing and recording how long it took.
define phase
	@start=$$SECONDS; echo "==> $(1)"; \
	$(2); \
	line="$$(printf '%-24s %5d s' '$(1)' $$((SECONDS - start)))"; \
	echo "==> $$line"; echo "$$line" >> $(TIMINGS)
endef

.PHONY: help
help: ## Show this list
	@echo "Targets:"
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z0-9-]+):.*## (.*)/  \1\t\2/' | expand -t 18

.PHONY: control-plane
control-plane: ## Build etcd, kube-apiserver and kubectl from Go modules (cached; ~6 min the first time)
	@bash hack/control-plane/build.sh

.PHONY: node-images
node-images: node-binaries project-images ## Install a node's Debian packages, build its binaries and the Dockerfile's images with buildah (cached)

.PHONY: node-binaries
node-binaries: # The node's Debian packages, its Go binaries and the sandbox image
	@bash hack/node/install.sh
	@bash hack/node/build.sh >/dev/null
	@bash hack/node/images.sh pause >/dev/null

.PHONY: project-images
project-images: # The node's Debian packages and the Dockerfile's two images, built with buildah
	@bash hack/node/install.sh
	@mkdir -p .work && IMAGE_BUILD_LOG=.work/node-image-build.log bash hack/node/images.sh project >/dev/null

.PHONY: node-up
node-up: ## Start a real node (kubelet, containerd, kube-proxy, CoreDNS) with the Dockerfile's images, in network namespace crossplane-node
	@$(BUILD) --quiet
	@mkdir -p .work && $(MAKE) node-images
	@NODE_IMAGES="$$(bash hack/node/images.sh project | tail -1)" bash hack/node/up.sh

.PHONY: node-down
node-down: ## Stop the node of make node-up and restore the host settings it changed
	@bash hack/node/down.sh

.PHONY: node-test
node-test: ## Only the deploy test on a real node (kustomize, Helm, rollout restart; needs root)
	@mkdir -p .work && $(MAKE) node-images
	$(BUILD)
	$(CARGO) test --workspace --test deploy -- node:: --nocapture

.PHONY: crossplane-e2e
crossplane-e2e: ## Opt-in, root: the package under a real Crossplane on a real node (Crossplane built from source, or CROSSPLANE_BIN/CLI/CRDS; docs/testing.md)
	@$(BUILD) --quiet
	@bash hack/crossplane/run.sh

TOOLS := helm dockerfile-lint argocd-lua servicemonitor-crd flux-kustomization-crd lua shellcheck openssl pve-api-schema go-proxmox-lifecycle proxmoxer ansible

.PHONY: tools
tools: ## Build or install the tools the packaging tests use (cached; ~3 min the first time)
	@for tool in $(TOOLS); do bash hack/tools/ensure.sh $$tool >/dev/null; done

.PHONY: cluster-up
cluster-up: ## Start a local control plane in the background; prints the kubeconfig path last
	@$(TESTENV) up

.PHONY: cluster-down
cluster-down: ## Stop the local control plane and remove its directory
	@$(TESTENV) down

.PHONY: cluster-status
cluster-status: ## Tell whether the local control plane runs
	@$(TESTENV) status

.PHONY: demo
demo: ## Run the provider against pve-sim on a local control plane and create examples/vm-100.yaml (Ctrl-C ends it)
	@bash hack/demo.sh

.PHONY: chaos
chaos: ## Full-size chaos suite (50 VMs, kills, failovers, apiserver restart, Proxmox faults; ~10 min); figures into docs/reliability.md
	CHAOS_SIZE=full CHAOS_SHARD_VMS=6 CHAOS_REPORT="$(CURDIR)/docs/reliability.md" $(CARGO) test --workspace --test chaos -- --nocapture

# The benchmark's binaries: release builds, so CPU and memory are what a
# deployment would see (the smoke check reuses make test's debug builds).
# The provider is built for BENCH_LIBC (gnu, or musl: the static binary of
# the image, whose toolchain hack/node/install.sh installs) with
# BENCH_ALLOCATOR (system: the C library's malloc, or mimalloc); the
# simulator and the bench are the host's. The binaries go together into
# one directory whose name the report shows (e.g. release-musl-system).
BENCH_LIBC ?= gnu
BENCH_ALLOCATOR ?= system
BENCH_TRIPLE := $(shell uname -m)-unknown-linux-$(BENCH_LIBC)
BENCH_BIN_DIR := $(TARGET_DIR)/bench/release-$(BENCH_LIBC)-$(BENCH_ALLOCATOR)
# Small enough to converge with today's controller (about two minutes on 2 cores;
# the fleet variant adds about 40 s).
BENCH_SMOKE_VMS ?= 20

.PHONY: bench
bench: ## N ProxmoxVMs against pve-sim, measured; writes BENCHMARKS.md (BENCH_VMS=1000, BENCH_QUICK=1: 100; BENCH_LABEL, BENCH_VARIANTS (batched,sharded: 3 configs × 3 replicas; batched,fleet: linked clones of one ProxmoxImage), BENCH_NODES, BENCH_RPS (the config's requestsPerSecond), BENCH_IDLE, BENCH_TIMEOUT, BENCH_FIREWALL=1: every VM with a guest firewall; BENCH_SETTLE, BENCH_FULL_LOOK (the config's fullLookInterval), BENCH_DRIFT: VMs whose tags are changed by hand after the idle window; BENCH_LIBC=musl, BENCH_ALLOCATOR=mimalloc: the provider's build)
	$(if $(filter musl,$(BENCH_LIBC)),bash hack/node/install.sh)
	$(CARGO) build --release --workspace --bin pve-sim --bin provider-bench
	$(CARGO) build --release --target $(BENCH_TRIPLE) --bin proxmox-provider \
	  $(if $(filter mimalloc,$(BENCH_ALLOCATOR)),--features mimalloc)
	mkdir -p $(BENCH_BIN_DIR)
	cp $(TARGET_DIR)/release/pve-sim $(TARGET_DIR)/release/provider-bench \
	  $(TARGET_DIR)/$(BENCH_TRIPLE)/release/proxmox-provider $(BENCH_BIN_DIR)/
	BENCH_BIN_DIR=$(BENCH_BIN_DIR) $(BENCH_BIN_DIR)/provider-bench run --markdown BENCHMARKS.md

.PHONY: profile
profile: ## Where the provider's CPU (PROFILE_TOOL=perf: flame graph) or memory (PROFILE_TOOL=heap: heaptrack) goes at BENCH_VMS VMs; results in .work/profile
	@bash hack/profile/run.sh

.PHONY: bench-smoke
bench-smoke: ## make test's smoke check: BENCH_SMOKE_VMS VMs Ready and gone, one VM each, import limit held
	$(BUILD)
	$(TARGET_DIR)/debug/provider-bench run --smoke --vms $(BENCH_SMOKE_VMS) --variants batched,fleet \
	  --idle 0 --timeout 300 --label smoke --work-dir .work/bench-smoke --results .work/bench-smoke

.PHONY: fmt
fmt: ## Format all Rust code
	@$(CARGO) fmt --all

.PHONY: lint
lint: ## Check formatting and run clippy with warnings denied
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# What the tests need, in three lanes at once: they share no output, and
# each is mostly one long build or download that leaves the other core, or
# the network, idle for much of its time (docs/testing.md has the figures).
# Cargo's lint then build; the Go builds (control plane, node, tools, which
# share Go's build cache); the Dockerfile's images (a musl build in buildah).
.PHONY: prepare prepare-rust prepare-go prepare-images
prepare: ## Everything make test builds before it tests, in three lanes at once
	@mkdir -p $(dir $(TIMINGS))
	@$(MAKE) -j3 prepare-rust prepare-go prepare-images

# Cargo runs its own jobs (one per core), not make's jobserver: with the
# other lanes holding its slots it would compile one crate at a time.
prepare-rust:
	$(call phase,  lint,env -u MAKEFLAGS $(MAKE) --no-print-directory lint)
	$(call phase,  build,env -u MAKEFLAGS $(BUILD))

prepare-go:
	$(call phase,  control plane build,$(MAKE) control-plane >/dev/null)
	$(call phase,  node binaries,$(MAKE) node-binaries)
	$(call phase,  tools,$(MAKE) tools)

prepare-images:
	$(call phase,  images,$(MAKE) project-images)

.PHONY: test
test: ## Everything CI checks: lint, control plane and tools build, all unit and integration tests
	@mkdir -p $(dir $(TIMINGS)) && : > $(TIMINGS)
	$(call phase,prepare (3 lanes),$(MAKE) -j3 prepare-rust prepare-go prepare-images)
	$(call phase,cargo test,CARGO=$(CARGO) bash hack/test-suites.sh $(TEST_LOG))
	@# Each test binary's own time, from libtest's summary lines.
	@awk '/^ *Running /{bin = $$NF; gsub(/.*\/|-[0-9a-f]+\)$$/, "", bin); src = ($$2 == "unittests" ? $$3 : $$2)} \
	  /^test result:/ && $$4 > 0 {printf "  %-18s %-26s %4d tests %8s\n", bin, src, $$4, $$NF}' \
	  $(TEST_LOG) >> $(TIMINGS)
	$(call phase,doc tests,$(CARGO) test --workspace --doc)
	$(call phase,bench smoke,$(MAKE) bench-smoke)
	@echo "==> make test passed; time per phase (and per test binary):"; cat $(TIMINGS)
