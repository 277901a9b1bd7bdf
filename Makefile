# The two commands a user needs: `make run` and `make test`. Everything else is what they call.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HARNESS := $(BIN)/rmq-harness
# The Kubernetes builder (tools/cluster): not part of the rmq-harness package.
CLUSTER := $(BIN)/python -m tools.cluster
STAMP := $(VENV)/.installed
OTAVA_VERSION := 0.8.0
# Variants `make setup` pre-fetches and `make run` starts.
VARIANTS ?= unpatched patched
VARIANT_FLAGS := $(foreach v,$(VARIANTS),--variant $(v))
# Set-up steps whose tools talk a lot say one line; their whole output goes to a log here, named when they fail.
SETUP_LOGS ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/rmq-harness/setup-logs
QUIETLY := tools/quietly.sh
# $(call apt_install,LOG,PACKAGES): apt-get install PACKAGES (a shell word list), quietly, its output in apt-LOG.log.
apt_install = $(QUIETLY) $(SETUP_LOGS)/apt-$(1).log "installing $(2) with apt" sh -c "apt-get update -qq && \
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(2)"

AGENT_JARS := broker-patches/target/pop-retry-wakeup.jar broker-patches/target/pop-retry-read.jar broker-patches/target/pop-wakeup-probe.jar \
	broker-patches/target/loopback-bind.jar broker-patches/target/pop-wakeup-delay.jar broker-patches/target/pop-fault.jar \
	broker-patches/target/pop-lock-recheck.jar
AGENT_SOURCES := broker-patches/pom.xml $(shell find broker-patches/src/main -name '*.java' 2>/dev/null)

.PHONY: setup system-packages python jars agents spark-classes browser-tools test test-fast test-agents lint run bench bench-faults bench-soak bench-gate bench-external clean \
	k8s-tools kind-up deploy loadtest collect grafana compare kind-down cluster-packages cluster-tools cluster-up cluster-images cluster-down \
	s3-tools s3-up s3-down

setup: system-packages python jars agents spark-classes

# Java 17, Maven, util-linux's setpriv and Prometheus (promtool) from Debian, only when missing.
system-packages:
	@missing=""; \
	command -v java >/dev/null || missing="$$missing openjdk-17-jre-headless"; \
	command -v mvn >/dev/null || missing="$$missing maven"; \
	command -v setpriv >/dev/null || missing="$$missing util-linux"; \
	command -v promtool >/dev/null || missing="$$missing prometheus"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "error: need root (or sudo) to apt-get install$$missing" >&2; exit 1; fi; \
	  $(call apt_install,system,$${missing# }); \
	fi

python: $(STAMP)

# Apache Otava's change point detection (rmq-harness history) goes in without its dependencies: it pins numpy
# 2.2.0 and scipy<1.17 and pulls in BigQuery, Postgres and Slack clients; otava.analysis needs only numpy and scipy.
# PYTHONWARNINGS: setuptools' twelve-line banner about editable installs is not news in a `make run` log.
$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	PYTHONWARNINGS=ignore $(BIN)/pip install -q -e '.[dev]'
	$(BIN)/pip install -q --no-deps apache-otava==$(OTAVA_VERSION)
	touch $@

# RocketMQ jars from Maven Central into the user cache (reused offline afterwards).
jars: python
	@$(HARNESS) brokers fetch $(VARIANT_FLAGS)

# Spark's class archive in the user cache (spark.jvm: a comparison's JVM starts in half the time), once for this
# java and this Spark; without it the analysis runs as well, only slower to start.
spark-classes: system-packages python
	@$(BIN)/python -m spark.jvm

# The broker patch agents (Maven, ByteBuddy from Maven Central); `make test` runs their JUnit tests.
agents: $(AGENT_JARS)

$(AGENT_JARS) &: $(AGENT_SOURCES)
	@$(QUIETLY) $(SETUP_LOGS)/maven-agents.log "building the broker agents with Maven" \
	  mvn -B -q -Dstyle.color=never -f broker-patches/pom.xml package -DskipTests
	@touch $(AGENT_JARS)

test-agents:
	set -o pipefail; mvn -B -Dstyle.color=never -f broker-patches/pom.xml test | grep -E "Tests run:|FAIL|ERROR|BUILD"

# Headless Chromium and its chromedriver from Debian, only when missing: the browser layer opens reports in them.
browser-tools:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	  if [ "$$(id -u)" != 0 ]; then echo "error: need root (or sudo) to apt-get install chromium chromium-driver" >&2; exit 1; fi; \
	  $(call apt_install,browser,chromium chromium-driver); }

lint: python
	$(BIN)/ruff check .

# Every layer (tests/conftest.py) in one pytest on TEST_WORKERS workers, the costliest first: the cluster's tests on a
# worker of their own from the start, beside the real-broker modules on the others (most of a real-broker or
# cluster test waits on timers: one after the other they took 21 min warm, side by side 16, 2026-12-07). A file's
# tests stay on one worker (--dist loadfile): a module's run of real brokers (its fixture) is made once, not once a
# worker.
TEST_WORKERS ?= 3
test: setup k8s-tools cluster-tools s3-tools browser-tools lint test-agents
	RMQ_HARNESS_HELM=$(HELM) RMQ_HARNESS_CHECKOV=$(CHECKOV) RMQ_HARNESS_PROM_CRDS=$(PROM_CRDS) $(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile

# The loop to run while working: lint and the unit layer (pure logic), under 3 minutes warm. One layer alone:
# `.venv/bin/pytest -m spark` (unit, chart, spark, integration, cluster; their budgets: tests/conftest.py).
test-fast: python lint
	$(BIN)/pytest -m unit -n $(TEST_WORKERS)

# The burst scenario against unpatched 5.3.3 and 5.3.3 + the wakeup fix agent side by side (archive in
# runs/), then the Spark comparison of the second variant against the first (report in reports/).
SCENARIO ?= burst
run: setup
	@$(HARNESS) run $(VARIANT_FLAGS) --scenario $(SCENARIO) --compare

bench: setup
	$(BIN)/python -m tests.benchmarks.bench_brokers
	$(BIN)/python -m tests.benchmarks.bench_broker_start
	$(BIN)/python -m tests.benchmarks.bench_workload
	$(BIN)/python -m tests.benchmarks.bench_spark
	$(BIN)/python -m tests.benchmarks.bench_history

# Every fault on every process of the cluster-mode deployment, unpatched and patched (about an hour).
bench-faults: setup
	$(BIN)/python -m tests.benchmarks.bench_faults

# The gate set on three variants (a planted regression among them) as a pull request runs it (~20 min).
bench-gate: setup
	$(BIN)/python -m tests.benchmarks.bench_gate

# A cluster started by `brokers up` measured as an external variant beside the same build and the fix (~8 min).
bench-external: setup
	$(BIN)/python -m tests.benchmarks.bench_external

# 30 minutes at the highest sustained mixed rate: memory of every process, every event into the archive.
bench-soak: setup
	$(BIN)/python -m tests.benchmarks.bench_soak

# What setup and the tests made. Never bench-results/: its files are committed measurements the docs quote, and a
# new one stays until it is committed; nor runs/ and reports/, which hold your results.
clean:
	-$(HARNESS) brokers down
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info broker-patches/target

# --- S3: SeaweedFS (Apache-2.0), the S3-compatible server tests start (tools/s3), built from the Go module proxy
# at a pinned version into the user cache (cold ~5 min on 2 cores). s3-up runs one in the background on
# 127.0.0.1 (data in ~/.cache/rmq-harness/s3) and prints the AWS_* exports that reach it.
s3-tools: python
	$(BIN)/python -m tools.s3 build

s3-up: s3-tools
	$(BIN)/python -m tools.s3 up

s3-down: python
	$(BIN)/python -m tools.s3 down

# --- Kubernetes: the chart onto kind (README "On Kubernetes"). Needs Docker and kubectl; helm and kind
# are built here from the Go module proxy at pinned versions, and checkov (the security linter the chart
# tests run) goes into its own venv: its pins are not ours.
TOOLS ?= $(HOME)/.cache/rmq-harness/tools
HELM_VERSION := v3.19.5
HELM ?= $(TOOLS)/helm-$(HELM_VERSION)/helm
CHECKOV_VERSION := 3.3.30
CHECKOV ?= $(TOOLS)/checkov-$(CHECKOV_VERSION)/bin/checkov
KIND_VERSION := v0.26.0
# The Prometheus Operator's CRDs (kube-prometheus-stack's) the chart's PodMonitors and PrometheusRule are
# checked against, from the operator's module on the Go module proxy.
PROM_OPERATOR_VERSION := v0.85.0
PROM_CRDS ?= $(TOOLS)/prometheus-operator-crds-$(PROM_OPERATOR_VERSION)
KIND ?= $(TOOLS)/kind-$(KIND_VERSION)/kind
KIND_CLUSTER ?= rmq-harness
# The RocketMQ versions whose broker images kind-up builds from the jars `make jars` fetched for VARIANTS.
ROCKETMQ_VERSIONS ?= 5.3.3
RELEASE ?= rmq
NAMESPACE ?= rmq-harness
IMAGE_TAG ?= dev
CHART := charts/rocketmq-pop-harness
FULLNAME = $(if $(findstring rocketmq-pop-harness,$(RELEASE)),$(RELEASE),$(RELEASE)-rocketmq-pop-harness)
K8S_FLAGS = --release $(RELEASE) --namespace $(NAMESPACE)
# The cluster `make cluster-up` starts keeps its kubeconfig in its state directory (cluster-down removes both).
# The targets that talk to a cluster use it when KUBECONFIG is unset, so `make cluster-up cluster-images deploy
# loadtest VALUES=charts/rocketmq-pop-harness/ci/04-docker-less-values.yaml` works as one line (the values: images
# from its own store, none pulled); a KUBECONFIG of your own (kind's, another cluster's) wins. Looked for when each
# recipe runs, not when make starts: in that one line the file appears only once cluster-up has run.
CLUSTER_KUBECONFIG ?= $(or $(RMQ_HARNESS_STATE),$(or $(XDG_STATE_HOME),$(HOME)/.local/state)/rmq-harness)/cluster/kubeconfig/super-admin.conf
KUBE = $(if $(KUBECONFIG),,$(shell test -f "$(CLUSTER_KUBECONFIG)" && echo 'export KUBECONFIG=$(CLUSTER_KUBECONFIG);'))
# A plain `go install` leaves helm's version empty and its default Kubernetes at 1.20; say both.
HELM_LDFLAGS := -s -w -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
	-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=32 \
	-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=32

# Go from PATH, else where the official tarball installs it.
GO ?= $(or $(shell command -v go),/usr/local/go/bin/go)

$(HELM):
	@test -x $(GO) || { echo "error: building helm $(HELM_VERSION) needs Go 1.24+ (on PATH or GO=/path/to/go), or pass HELM=/path/to/helm" >&2; exit 1; }
	GOBIN=$(abspath $(dir $@)) GOPATH=$(TOOLS)/gopath GOCACHE=$(TOOLS)/gocache GOFLAGS=-modcacherw CGO_ENABLED=0 \
	  $(GO) install -trimpath -ldflags "$(HELM_LDFLAGS)" helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

$(CHECKOV):
	rm -rf $(TOOLS)/checkov-$(CHECKOV_VERSION)
	$(PYTHON) -m venv $(TOOLS)/checkov-$(CHECKOV_VERSION)
	$(TOOLS)/checkov-$(CHECKOV_VERSION)/bin/pip install -q checkov==$(CHECKOV_VERSION)

$(KIND):
	@test -x $(GO) || { echo "error: building kind $(KIND_VERSION) needs Go 1.24+ (on PATH or GO=/path/to/go), or pass KIND=/path/to/kind" >&2; exit 1; }
	GOBIN=$(abspath $(dir $@)) GOPATH=$(TOOLS)/gopath GOCACHE=$(TOOLS)/gocache GOFLAGS=-modcacherw CGO_ENABLED=0 \
	  $(GO) install sigs.k8s.io/kind@$(KIND_VERSION)

$(PROM_CRDS):
	@test -x $(GO) || { echo "error: fetching the Prometheus Operator's CRDs needs Go 1.24+ (on PATH or GO=/path/to/go), or pass PROM_CRDS=/path/to/a/folder/of/them" >&2; exit 1; }
	dir=$$(GOPATH=$(TOOLS)/gopath GOCACHE=$(TOOLS)/gocache GOFLAGS=-modcacherw $(GO) mod download -json \
	  github.com/prometheus-operator/prometheus-operator@$(PROM_OPERATOR_VERSION) | $(PYTHON) -c 'import json, sys; print(json.load(sys.stdin)["Dir"])') && \
	  rm -rf $@.tmp && mkdir -p $@.tmp && \
	  cp $$dir/example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml \
	     $$dir/example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml $@.tmp/ && mv $@.tmp $@

k8s-tools: $(HELM) $(CHECKOV) $(PROM_CRDS)

kind-up: $(KIND) jars
	@command -v docker >/dev/null && command -v kubectl >/dev/null || \
	  { echo "error: kind-up needs docker (a running engine) and kubectl on PATH" >&2; exit 1; }
	$(KIND) get clusters | grep -qx $(KIND_CLUSTER) || $(KIND) create cluster --config charts/kind/cluster.yaml --name $(KIND_CLUSTER)
	docker build -t rmq-pop-harness:$(IMAGE_TAG) .
	$(KIND) load docker-image rmq-pop-harness:$(IMAGE_TAG) --name $(KIND_CLUSTER)
	for v in $(ROCKETMQ_VERSIONS); do \
	  docker build -f rocketmq.Dockerfile --build-arg ROCKETMQ_VERSION=$$v -t rmq-harness-rocketmq:$$v $(HOME)/.cache/rmq-harness/rocketmq/$$v && \
	  $(KIND) load docker-image rmq-harness-rocketmq:$$v --name $(KIND_CLUSTER) || exit 1; \
	done

# Not helm --wait: kind's storage class binds the runs volume only when the first run mounts it.
# VALUES=file adds a values file (the Docker-less cluster: charts/rocketmq-pop-harness/ci/04-docker-less-values.yaml).
deploy: $(HELM) python
	$(KUBE) $(HELM) upgrade --install $(RELEASE) $(CHART) --namespace $(NAMESPACE) --create-namespace \
	  $(if $(VALUES),-f $(VALUES)) --set harnessImage.tag=$(IMAGE_TAG)
	$(KUBE) $(HARNESS) k8s status $(K8S_FLAGS) --wait 900

# A run as a Job in the cluster; its archive is copied into runs/ when it ends.
loadtest: python
	$(KUBE) $(HARNESS) k8s run $(K8S_FLAGS) $(VARIANT_FLAGS) --scenario $(SCENARIO)

collect: python
	$(KUBE) $(HARNESS) k8s collect $(K8S_FLAGS)

grafana:
	@$(KUBE) kubectl -n $(NAMESPACE) get svc $(FULLNAME)-grafana >/dev/null 2>&1 || { echo "error: no Grafana in release $(RELEASE): it is AGPL-3.0 and off by default; deploy with a values file (VALUES=...) that sets grafana.enabled: true if you want it, or import dashboards/*.json into your own" >&2; exit 2; }
	@$(KUBE) echo "Grafana: http://127.0.0.1:3000  user admin  password $$(kubectl -n $(NAMESPACE) get secret $(FULLNAME)-grafana -o jsonpath='{.data.admin-password}' | base64 -d)"
	$(KUBE) kubectl -n $(NAMESPACE) port-forward --address 127.0.0.1 svc/$(FULLNAME)-grafana 3000:3000

# The newest archive in runs/ (or RUN=runs/<id>), first variant as baseline, second as candidate.
COMPARE_RUN = $(or $(RUN),$(lastword $(sort $(wildcard runs/2*))))
compare: python
	@test -n "$(COMPARE_RUN)" || { echo "error: no archive in runs/: make run or make loadtest first, or pass RUN=<archive dir>" >&2; exit 2; }
	$(HARNESS) compare $(COMPARE_RUN) --baseline $(word 1,$(VARIANTS)) --candidate $(word 2,$(VARIANTS))

kind-down:
	$(KIND) delete cluster --name $(KIND_CLUSTER)

# --- A single-node cluster without Docker (docs/kubernetes.md, "Without Docker"): containerd, runc and the
# CNI plugins from Debian; Kubernetes and etcd built from the Go module proxy into the user cache; every
# component a process. Needs root.
CLUSTER_PACKAGES := containerd runc containernetworking-plugins conntrack iptables iproute2 podman debootstrap uidmap

cluster-packages:
	@missing=""; for p in $(CLUSTER_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "error: need root to apt-get install$$missing" >&2; exit 1; fi; \
	  $(call apt_install,cluster,$${missing# }); \
	fi

# Kubernetes, etcd, CoreDNS and the pause program, built once per pinned version (cold ~15 min on 2 cores).
cluster-tools: python cluster-packages
	$(CLUSTER) build

# NODES=2: a second node in a network namespace of this machine (the chart's ci/07-two-nodes-values.yaml places
# the brokers on one and the load on the other; label them as that file says).
NODES ?= 1
cluster-up: cluster-tools
	$(CLUSTER) up --nodes $(NODES)

# The harness image and the brokers' images (rocketmq.Dockerfile over the cached jars), loaded into it.
cluster-images: python
	$(CLUSTER) images $(VARIANT_FLAGS)

cluster-down: python
	$(CLUSTER) down
