# The harness image for the Kubernetes side (charts/rocketmq-pop-harness): `rmq-harness run` in the
# load-test pod (Locust master and workers, the run orchestrator), `rmq-harness compare` in the analysis
# pods (Spark's driver and executors), and the agent jars that the brokers' init containers copy. Built
# and loaded into kind by `make kind-up`; where no registry serves the base images, `make cluster-images`
# builds it on local stand-ins of them.

# The broker agents, built as `make setup` builds them (Java 8 bytecode: the apache/rocketmq image
# runs Java 8).
FROM maven:3.9.9-eclipse-temurin-17 AS agents
WORKDIR /src
COPY broker-patches/pom.xml broker-patches/pom.xml
RUN mvn -q -B -f broker-patches/pom.xml dependency:go-offline
COPY broker-patches/src broker-patches/src
RUN mvn -q -B -f broker-patches/pom.xml package -DskipTests

FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/tmp
RUN groupadd --gid 10001 harness \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin harness
# Java for Spark (pyspark's jars): the comparison in the cluster runs its driver and executors in pods of this
# image (spark/k8s_executor.py). Its own layer, before the dependencies: it changes with the base only.
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*
# The repository's layout under /app: the harness finds workloads/ and broker-patches/ next to its code.
WORKDIR /app
COPY pyproject.toml ./
# The dependencies in a layer of their own (it changes with pyproject.toml only): a code change rebuilds
# the small layers below, not pyspark and grpcio (1.2 GB, a minute and more). README.md (the package's
# readme, which `pip install -e .` reads) comes after it: an edit of the README rebuilt this layer too.
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
      > /tmp/requirements.txt \
    && pip install --no-compile -r /tmp/requirements.txt && rm /tmp/requirements.txt
COPY README.md ./
COPY harness harness
COPY spark spark
COPY dashboards dashboards
COPY workloads workloads
RUN pip install --no-compile --no-deps -e . && python -m compileall -q harness spark dashboards workloads
COPY --from=agents /src/broker-patches/target/pop-retry-wakeup.jar /src/broker-patches/target/pop-wakeup-probe.jar \
     /src/broker-patches/target/pop-retry-read.jar broker-patches/target/
USER 10001:10001
# A batch job: Kubernetes decides liveness from the process; there is no server to probe.
HEALTHCHECK NONE
ENTRYPOINT ["rmq-harness"]
CMD ["--help"]
