# The two commands a user needs: `make run` and `make test`. Everything else is what they call.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HARNESS := $(BIN)/rmq-harness
STAMP := $(VENV)/.installed
# Variants `make setup` pre-fetches and `make run` starts.
VARIANTS ?= unpatched patched
VARIANT_FLAGS := $(foreach v,$(VARIANTS),--variant $(v))

AGENT_JARS := broker-patches/target/pop-retry-wakeup.jar broker-patches/target/pop-wakeup-probe.jar \
	broker-patches/target/loopback-bind.jar
AGENT_SOURCES := broker-patches/pom.xml $(shell find broker-patches/src/main -name '*.java' 2>/dev/null)

.PHONY: setup system-packages python jars agents test test-agents lint run bench clean

setup: system-packages python jars agents

# Java 17, Maven, util-linux's setpriv and Prometheus (promtool) from Debian, only when missing.
system-packages:
	@missing=""; \
	command -v java >/dev/null || missing="$$missing openjdk-17-jre-headless"; \
	command -v mvn >/dev/null || missing="$$missing maven"; \
	command -v setpriv >/dev/null || missing="$$missing util-linux"; \
	command -v promtool >/dev/null || missing="$$missing prometheus"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  if [ "$$(id -u)" != 0 ]; then echo "error: need root (or sudo) to apt-get install$$missing" >&2; exit 1; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

python: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

# RocketMQ jars from Maven Central into the user cache (reused offline afterwards).
jars: python
	$(HARNESS) brokers fetch $(VARIANT_FLAGS)

# The broker patch agents (Maven, ByteBuddy from Maven Central); `make test` runs their JUnit tests.
agents: $(AGENT_JARS)

$(AGENT_JARS) &: $(AGENT_SOURCES)
	mvn -B -q -f broker-patches/pom.xml package -DskipTests
	touch $(AGENT_JARS)

test-agents:
	set -o pipefail; mvn -B -f broker-patches/pom.xml test | grep -E "Tests run:|FAIL|ERROR|BUILD"

lint: python
	$(BIN)/ruff check .

test: setup lint test-agents
	$(BIN)/pytest

# The burst scenario against unpatched 5.3.3 and 5.3.3 + the wakeup fix agent side by side (archive in
# runs/), then the Spark comparison of the second variant against the first (report in reports/).
SCENARIO ?= burst
run: setup
	$(HARNESS) run $(VARIANT_FLAGS) --scenario $(SCENARIO) --compare

bench: setup
	$(BIN)/python -m tests.benchmarks.bench_brokers
	$(BIN)/python -m tests.benchmarks.bench_workload
	$(BIN)/python -m tests.benchmarks.bench_spark

clean:
	-$(HARNESS) brokers down
	rm -rf $(VENV) bench-results .pytest_cache .ruff_cache *.egg-info broker-patches/target
