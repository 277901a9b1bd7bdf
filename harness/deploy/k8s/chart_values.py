"""The Helm chart's values as a pydantic model: the source of charts/rocketmq-pop-harness/values.schema.json.

`python -m harness.deploy.k8s.chart_values` prints the schema; a test keeps the committed file equal to
it. Helm checks values against the schema on lint, template and install, so a bad value fails there
with the field's name, before anything reaches a cluster.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, WithJsonSchema, model_validator

from harness.contracts.metrics import LATENCY_BUCKETS_S
from harness.inputs.brokers import Topology
from harness.inputs.variants import (
    HARNESS_BROKER_KEYS,
    HARNESS_PROXY_KEYS,
    BrokerOverrides,
    ExternalEndpoints,
    ProxyOverrides,
    VariantName,
)

Quantity = Annotated[str, StringConstraints(pattern=r"^[0-9]+(\.[0-9]+)?(m|k|Ki|Mi|Gi|Ti|M|G|T)?$")]
ImageTag = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")]
Repository = Annotated[str, StringConstraints(pattern=r"^[a-z0-9]+([._/:-][a-z0-9]+)*$")]
JarName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._-]+\.jar$")]
PullPolicy = Literal["Always", "IfNotPresent", "Never"]
Duration = Annotated[str, StringConstraints(pattern=r"^[0-9]+(ms|s|m|h|d|w|y)$")]
ScenarioName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9]([a-z0-9-]{0,48}[a-z0-9])?$")]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Resources(Strict):
    requests: dict[Literal["cpu", "memory", "ephemeral-storage"], Quantity | int]
    limits: dict[Literal["cpu", "memory", "ephemeral-storage"], Quantity | int]


class Image(Strict):
    repository: Repository
    tag: ImageTag
    pullPolicy: PullPolicy = "IfNotPresent"  # noqa: N815 - Helm values are camelCase


class RocketMQImage(Strict):
    flavor: Literal["harness", "apache"] = Field(
        "harness", description="harness: rocketmq.Dockerfile over the Maven Central jars (Java 17); apache: the "
                               "official image and its scripts (Java 8)")
    repository: Repository = Field(description="the brokers' image; each variant's version is its tag")
    pullPolicy: PullPolicy = "IfNotPresent"  # noqa: N815


class Agent(Strict):
    jar: JarName = Field(description="a jar of broker-patches/target/ in the harness image")
    options: str = Field("", description="the agent's argument string", pattern=r"^[^\s]*$")


class ChartVariant(Strict):
    # A build the chart deploys (version), or a cluster of yours it only measures (endpoints): one of the two.
    model_config = ConfigDict(extra="forbid", json_schema_extra={"oneOf": [
        {"required": ["version"], "not": {"required": ["endpoints"]}},
        {"required": ["endpoints"], "not": {"anyOf": [{"required": [k]} for k in ("version", "agents", "broker",
                                                                                     "proxy")]}},
    ]})

    name: VariantName
    version: ImageTag | None = Field(None, description="RocketMQ version = the broker image's tag, e.g. 5.3.3")
    endpoints: ExternalEndpoints | None = Field(
        None, description="a RocketMQ cluster of yours (name server, proxy, cluster name), measured as deployed: "
        "the chart deploys nothing for it and the harness sets nothing on it (workloads/variants.yaml's meaning)")
    description: str = ""
    agents: list[Agent] = Field(default_factory=list)
    broker: BrokerOverrides = Field(default_factory=dict, description="broker.conf overrides")
    proxy: ProxyOverrides = Field(default_factory=dict, description="rmq-proxy.json overrides")

    @model_validator(mode="after")
    def _deployed_or_yours(self) -> ChartVariant:
        # As for a variant of workloads/variants.yaml, which the load-test pod reads this one as.
        if self.endpoints is None and self.version is None:
            raise ValueError("version: required (the broker image's tag, e.g. 5.3.3), or endpoints: for a cluster "
                             "of yours the chart deploys nothing for")
        built = [k for k in ("version", "agents", "broker", "proxy") if getattr(self, k)]
        if self.endpoints is not None and built:
            raise ValueError(f"endpoints: a cluster of yours runs as deployed; remove {', '.join(built)}")
        return self


class Probe(Strict):
    enabled: bool = False


HEAP_DESCRIPTION = "JVM heap flags; empty: the local backend's (harness/deploy/local/config.py)"


class Broker(Strict):
    config: BrokerOverrides
    heapOptions: str = Field("", description=HEAP_DESCRIPTION)  # noqa: N815
    resources: Resources


class NameServer(Strict):
    heapOptions: str = Field("", description=HEAP_DESCRIPTION)  # noqa: N815
    resources: Resources


class RunsVolume(Strict):
    size: Quantity
    storageClassName: str = ""  # noqa: N815
    accessMode: Literal["ReadWriteOnce", "ReadWriteMany"] = Field(  # noqa: N815
        "ReadWriteOnce", description="ReadWriteOnce: one node at a time (placement.loadtest and placement.analysis "
        "must be the same); ReadWriteMany: the load test and the comparison may run on different nodes (a storage "
        "class that offers it)")


class LoadTestWorkers(Strict):
    resources: Resources = Field(description="each Locust worker pod's (one per worker per variant)")


class LoadTest(Strict):
    scenario: ScenarioName
    variants: list[VariantName] = Field(min_length=1)
    extraScenarios: dict[ScenarioName, str] = Field(default_factory=dict)  # noqa: N815
    activeDeadlineSeconds: int = Field(ge=60)  # noqa: N815
    ttlSecondsAfterFinished: int = Field(ge=0)  # noqa: N815
    resources: Resources
    workers: LoadTestWorkers
    runsVolume: RunsVolume  # noqa: N815


SparkMemory = Annotated[str, StringConstraints(pattern=r"^[0-9]+[kmgt]$")]


class AnalysisDriver(Strict):
    memory: SparkMemory = Field(description="the driver JVM's heap (spark.driver.memory), e.g. 1g")
    resources: Resources


class AnalysisExecutors(Strict):
    instances: int = Field(ge=1, description="executor pods per comparison")
    cores: int = Field(ge=1, description="task slots per executor (spark.executor.cores)")
    requestCores: Quantity = Field(description="the CPU an executor pod requests")  # noqa: N815
    limitCores: Quantity = Field(description="the CPU it may use")  # noqa: N815
    memory: SparkMemory = Field(description="the executor JVM's heap (spark.executor.memory)")
    memoryOverhead: SparkMemory = Field(description="beyond the heap: the Python workers, off-heap")  # noqa: N815


class Analysis(Strict):
    enabled: bool = Field(True, description="the comparison in the cluster (rmq-harness k8s compare)")
    activeDeadlineSeconds: int = Field(ge=60)  # noqa: N815
    ttlSecondsAfterFinished: int = Field(ge=0)  # noqa: N815
    driver: AnalysisDriver
    executors: AnalysisExecutors


class PrometheusValues(Strict):
    image: Image
    scrapeInterval: Duration  # noqa: N815
    retention: Duration
    resources: Resources


class GrafanaValues(Strict):
    enabled: bool = Field(True, description="off where no registry serves the Grafana image (the Docker-less "
                                            "cluster); its provisioning stays checked by rendering")
    image: Image
    adminUser: Annotated[str, StringConstraints(min_length=1)]  # noqa: N815
    resources: Resources


LabelName = Annotated[str, StringConstraints(
    pattern=r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")]
LabelValue = Annotated[str, StringConstraints(pattern=r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")]


def _a_bucket_bound(v: float) -> float:
    if v not in LATENCY_BUCKETS_S:
        raise ValueError(f"{v} is not a bound of the wakeup histogram; one of {', '.join(map(str, LATENCY_BUCKETS_S))}")
    return v


# An alert can only count what falls beyond a bound of the histogram (harness/contracts/metrics.py).
BucketBound = Annotated[float, AfterValidator(_a_bucket_bound), WithJsonSchema(
    {"type": "number", "enum": list(LATENCY_BUCKETS_S)})]


class PodMonitors(Strict):
    enabled: bool = Field(False, description="PodMonitors (monitoring.coreos.com/v1) for the workers' pods and the "
                                             "brokers' exporters (and probes with probe.enabled)")
    interval: Duration = Field(description="their scrape interval")


class PrometheusRuleValues(Strict):
    enabled: bool = Field(False, description="a PrometheusRule (monitoring.coreos.com/v1) with the alerts; the "
                                             "chart's own Prometheus evaluates them whatever this says")
    for_: Duration = Field(alias="for", description="how long a condition holds before its alert fires")
    window: Duration = Field(description="the rate window of every alert")
    wakeupP99Seconds: float = Field(gt=0, description="RmqHarnessRetryWakeupSlow: a group's p99 retry wakeup "  # noqa: N815
                                                      "above this")
    waitBucketSeconds: BucketBound = Field(description="RmqHarnessRetriesWaitForAPoll: a retry woken later than "  # noqa: N815
                                                       "this waited for a poll (a bucket bound of the wakeup "
                                                       "histogram)")
    waitingShare: float = Field(gt=0, le=1, description="RmqHarnessRetriesWaitForAPoll: the share of a group's "  # noqa: N815
                                                        "retry wakeups later than waitBucketSeconds that fires it")


class DashboardConfigMaps(Strict):
    enabled: bool = Field(False, description="every dashboard as a ConfigMap the Grafana sidecar loads (no CRD)")
    label: LabelName = Field(description="the sidecar's label (kube-prometheus-stack: grafana_dashboard)")
    labelValue: LabelValue = Field(description="its value")  # noqa: N815
    folder: str = Field(description="the folder, as the annotation grafana_folder (the sidecar's "
                                    "folderAnnotation); empty: none")


class Monitoring(Strict):
    labels: dict[LabelName, LabelValue] = Field(
        default_factory=dict, json_schema_extra={"additionalProperties": False},
        description="on every object below: what your Prometheus selects them by "
        "(kube-prometheus-stack: release: <its release>)")
    podMonitors: PodMonitors  # noqa: N815
    prometheusRule: PrometheusRuleValues  # noqa: N815
    dashboards: DashboardConfigMaps


class Toleration(Strict):
    key: str = ""
    operator: Literal["Exists", "Equal", ""] = "Equal"  # "": Equal, as Kubernetes reads it
    value: str = ""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""
    tolerationSeconds: int | None = None  # noqa: N815


class Affinity(Strict):
    nodeAffinity: dict[str, Any] | None = None  # noqa: N815
    podAffinity: dict[str, Any] | None = None  # noqa: N815
    podAntiAffinity: dict[str, Any] | None = None  # noqa: N815


class PodPlacement(Strict):
    """Where a part's pods go: the pod spec's fields of the same names (the API server checks affinity's inside)."""

    nodeSelector: dict[LabelName, LabelValue] = Field(  # noqa: N815
        default_factory=dict, json_schema_extra={"additionalProperties": False})
    affinity: Affinity = Field(default_factory=lambda: Affinity())
    tolerations: list[Toleration] = Field(default_factory=list)


class Placements(Strict):
    brokers: PodPlacement = Field(default_factory=PodPlacement, description="every variant's name servers, brokers and "
                                                                      "proxies")
    loadtest: PodPlacement = Field(default_factory=PodPlacement, description="a run's pod and its Locust worker pods")
    analysis: PodPlacement = Field(default_factory=PodPlacement,
                                   description="the comparison's Spark driver and executors")
    monitoring: PodPlacement = Field(default_factory=PodPlacement, description="Prometheus and Grafana")
    canary: PodPlacement = Field(default_factory=PodPlacement, description="the canary's pod")


class CanaryValues(Strict):
    enabled: bool = Field(False, description="rmq-harness canary as a Deployment")
    variant: VariantName = Field(description="the variant it drives: one of `variants`")
    scenario: ScenarioName = Field(description="what it sends and how it nacks (produce.pattern steady)")
    resources: Resources


class ChartValues(Strict):
    """values.yaml of charts/rocketmq-pop-harness."""

    nameOverride: str = ""  # noqa: N815
    fullnameOverride: str = ""  # noqa: N815
    harnessImage: Image  # noqa: N815
    rocketmqImage: RocketMQImage  # noqa: N815
    variants: list[ChartVariant] = Field(min_length=1)
    topologies: list[Topology] = Field(
        default_factory=list, description="every variant's topologies besides single, as a scenario's `topology:` "
        "(a StatefulSet each, at zero replicas until a run asks for it)")
    probe: Probe
    broker: Broker
    nameServer: NameServer  # noqa: N815
    placement: Placements
    loadtest: LoadTest
    analysis: Analysis
    prometheus: PrometheusValues
    grafana: GrafanaValues
    monitoring: Monitoring
    canary: CanaryValues


def _without_titles(node: object) -> object:
    if isinstance(node, dict):
        return {k: _without_titles(v) for k, v in node.items() if k != "title" or not isinstance(v, str)}
    if isinstance(node, list):
        return [_without_titles(v) for v in node]
    return node


def schema() -> dict:
    """JSON Schema (draft 7, which Helm checks) with the owned broker keys refused by name."""
    s = _without_titles(ChartValues.model_json_schema(ref_template="#/definitions/{model}"))
    s["definitions"] = s.pop("$defs")
    # A false schema per owned key: Helm then names the key's full path in its error.
    owned_broker = {"properties": {k: False for k in sorted(HARNESS_BROKER_KEYS)}}
    owned_proxy = {"properties": {k: False for k in sorted(HARNESS_PROXY_KEYS)}}
    s["definitions"]["ChartVariant"]["properties"]["broker"].update(owned_broker)
    s["definitions"]["ChartVariant"]["properties"]["proxy"].update(owned_proxy)
    s["definitions"]["Broker"]["properties"]["config"].update(owned_broker)
    return {"$schema": "http://json-schema.org/draft-07/schema#", "title": "rocketmq-pop-harness values", **s}


def render() -> str:
    return json.dumps(schema(), indent=2, sort_keys=False) + "\n"


if __name__ == "__main__":
    print(render(), end="")
