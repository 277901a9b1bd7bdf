# A RocketMQ broker image from the jars the local backend assembles from Maven Central
# (~/.cache/rmq-harness/rocketmq/<version>/, the build context), so a variant runs the same bits on both
# backends and no apache/rocketmq image is needed. Java 17: agents join the application class path that
# loads RocketMQ, as on the local backend. The chart starts the name server and the broker with its
# proxy itself (charts/rocketmq-pop-harness/templates/rocketmq-statefulset.yaml, flavor "harness").
FROM eclipse-temurin:17-jre
ARG ROCKETMQ_VERSION
RUN groupadd --gid 3000 rocketmq \
    && useradd --uid 3000 --gid 3000 --no-create-home --home-dir /data --shell /usr/sbin/nologin rocketmq
COPY lib/ /opt/rocketmq/lib/
ENV ROCKETMQ_HOME=/opt/rocketmq ROCKETMQ_VERSION=${ROCKETMQ_VERSION}
WORKDIR /opt/rocketmq
USER 3000:3000
# Two servers per pod (name server, broker); Kubernetes probes their ports.
HEALTHCHECK NONE
