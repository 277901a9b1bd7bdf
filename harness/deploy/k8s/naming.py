"""Names, labels and ports the Helm chart gives its objects, in one place for the k8s backend.

The chart's templates and these functions must agree; tests render the chart and compare.
"""

from __future__ import annotations

from harness.contracts import pod_env
from harness.contracts.endpoints import BrokerNode, Endpoints

CHART = "rocketmq-pop-harness"
# Label keys (app.kubernetes.io/* are Kubernetes' recommended ones).
INSTANCE = "app.kubernetes.io/instance"
COMPONENT = "app.kubernetes.io/component"
VARIANT = "rmq-harness/variant"
PROBE = "rmq-harness/probe"
TOPOLOGY = "rmq-harness/topology"  # harness.deploy.k8s.pod.key: single, cluster, 2m, slave, 2m-slave
SINGLE = "single"
RUN_ID = "rmq-harness/run-id"
# Components.
ROCKETMQ = "rocketmq"
LOADTEST = "loadtest"
LOADTEST_WORKER = "loadtest-worker"  # a run's Locust worker pods, and the PodTemplate they are made from
ANALYSIS = "analysis"  # the comparison in the cluster: its CronJob, the driver's Jobs
# RocketMQ's own default ports, the same in every variant's pod (each pod has its own IP).
PORTS = {"namesrv": 9876, "broker": 10911, "remoting": 8080, "grpc": 8081, "metrics": 5557, "probe": 5558}
# The load-test pod: its http_sd endpoint and the first Locust worker's metrics port.
SD_PORT = 9099
WORKER_PORT_BASE = 9100
# Locust's web UI per variant (`k8s run --ui`): 8089 is Locust's own default; the load-test Service forwards
# UI_PORTS of them (templates/loadtest-service.yaml).
UI_PORT_BASE = 8089
UI_PORTS = 4
BROKER_CONTAINER = "broker"  # the first broker's (in single, the proxy's JVM with the broker inside)


def server_logs(process: str) -> str:
    """Where a process of the chart's pods writes RocketMQ's own logs: its user.home is /data/<process>."""
    return f"/data/{process}/logs/rocketmqlogs"

RUNS_MOUNT = "/runs"
# Where a comparison in the cluster writes its report: on the runs volume, under a dot name (not a run).
REPORTS_DIR = f"{RUNS_MOUNT}/.reports"
# The API server as a pod reaches it: the Spark master of a comparison in the cluster.
IN_CLUSTER_MASTER = "k8s://https://kubernetes.default.svc:443"


def fullname(release: str, override: str = "") -> str:
    """The chart's fullname helper: the release name, suffixed with the chart's unless it contains it."""
    if override:
        name = override
    elif CHART in release:
        name = release
    else:
        name = f"{release}-{CHART}"
    return name[:63].rstrip("-")


def variant_name(full: str, variant: str, topology: str = SINGLE) -> str:
    """The StatefulSet, Service and ConfigMap of one variant in one topology (Service names allow no dots)."""
    base = f"{full}-{variant.replace('.', '-')}"
    return base if topology == SINGLE else f"{base}-{topology}"


def endpoints(full: str, namespace: str, variant: str, version: str, probe: bool, topology: str = SINGLE,
              nodes: tuple[tuple[str, int, int, int], ...] = ()) -> Endpoints:
    """How a pod in the cluster reaches one variant: its Service's DNS name and RocketMQ's ports; ``nodes``
    (name, listen, metrics, probe port) when the topology has more than one broker."""
    host = f"{variant_name(full, variant, topology)}.{namespace}.svc"
    brokers = tuple(BrokerNode(n, f"{host}:{listen}", f"http://{host}:{metrics}/metrics",
                               f"http://{host}:{probe_port}/metrics" if probe else "", master=n != "slave")
                    for n, listen, metrics, probe_port in nodes)
    return Endpoints(
        variant=variant,
        version=version,
        grpc=f"{host}:{PORTS['grpc']}",
        remoting=f"{host}:{PORTS['remoting']}",
        broker=f"{host}:{PORTS['broker']}",
        namesrv=f"{host}:{PORTS['namesrv']}",
        metrics=f"http://{host}:{PORTS['metrics']}/metrics",
        probe=f"http://{host}:{PORTS['probe']}/metrics" if probe else "",
        nodes=brokers if len(brokers) > 1 else (),
    )


def ui_port(n: int) -> int:
    """Where the run's n-th variant (0-based, in the run's order) serves Locust's web UI in the load-test pod with
    `k8s run --ui`: the chart's load-test Service forwards these ports (UI_PORTS of them)."""
    if not 0 <= n < UI_PORTS:
        raise ValueError(f"the chart forwards Locust's UI for {UI_PORTS} variants, not the {n + 1}th")
    return UI_PORT_BASE + n


def worker_port(n: int) -> int:
    """The metrics port of the run's n-th Locust worker (0-based) when it runs inside the load-test pod."""
    return WORKER_PORT_BASE + n


def loadtest_service(full: str) -> str:
    """The Service in front of the running load test (Prometheus's discovery, Locust's UI)."""
    return f"{full}-{LOADTEST}"


def worker_template(full: str) -> str:
    """The PodTemplate a run's worker pods are made from."""
    return f"{full}-{LOADTEST_WORKER}"


# What the chart tells the load-test pod about where it runs (harness.contracts.pod_env).
ENV_FULLNAME = pod_env.FULLNAME
ENV_NAMESPACE = pod_env.NAMESPACE
ENV_POD_IP = pod_env.POD_IP
ENV_POD_NAME = pod_env.POD_NAME
ENV_POD_UID = pod_env.POD_UID
ENV_PROMETHEUS = pod_env.PROMETHEUS
# Where the load-test pod mounts the release's variants and the run's scenario.
VARIANTS_FILE = "/etc/rmq-harness/variants/variants.yaml"
SCENARIO_DIR = "/etc/rmq-harness/scenario"
SCENARIO_VOLUME = "scenario"
