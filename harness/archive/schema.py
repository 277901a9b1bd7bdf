"""The manifest of a run archive. ``MANIFEST_SCHEMA_VERSION`` changes when a field changes meaning;
readers refuse versions they do not know."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from harness.contracts import schemas

MANIFEST_SCHEMA_VERSION = schemas.MANIFEST.version  # what each version brought: harness.contracts.schemas
MANIFEST = "manifest.json"


class AgentInfo(BaseModel):
    jar: str
    sha256: str
    options: str = ""


class VariantInfo(BaseModel):
    name: str
    version: str
    jars: str | None = None  # a local build's directory, when not from Maven Central
    agents: list[AgentInfo] = Field(default_factory=list)
    broker_config: dict[str, Any] = Field(default_factory=dict)  # the broker.conf as started
    endpoints: dict[str, Any] = Field(default_factory=dict)
    # What each agent printed when it installed (jar name -> lines); a run refuses a variant without it.
    agent_report: dict[str, list[str]] = Field(default_factory=dict)
    # Bounds of (broker clock - load generator clock) measured at the start of the run, ms.
    clock_offset_ms: list[float] | None = None
    # Keys of broker_config the broker did not report back (GET_BROKER_CONFIG): it ran without them.
    ignored_settings: list[str] = Field(default_factory=list)
    # An external cluster (harness.deploy.external): its cluster, brokers, the run's name suffix, what was
    # removed after the run; None for brokers the harness started.
    external: dict[str, Any] | None = None
    # Each RocketMQ server module jar the variant ran (harness.contracts.modules.ModuleJar: artifact, version,
    # sha256), from schema 7; a module of another version than ``version`` makes the variant a hybrid.
    # Empty: not recorded (an external cluster, a backend that does not know its jars, an older archive).
    modules: list[dict[str, str]] = Field(default_factory=list)


class HostInfo(BaseModel):
    hostname: str
    cpus: int
    memory_gib: float
    python: str
    java: str
    platform: str


class Manifest(BaseModel):
    model_config = ConfigDict(extra="allow")  # newer writers may add fields; the version says what changed

    schema_version: int = MANIFEST_SCHEMA_VERSION
    event_schema_version: int
    run_id: str
    scenario: dict[str, Any]
    variants: list[VariantInfo]
    harness_version: str
    harness_git_sha: str | None
    host: HostInfo
    started_at: str  # ISO 8601, UTC
    ended_at: str
    duration_s: float
    faults: list[dict[str, Any]] = Field(default_factory=list)  # harness.run.faults.FaultRecord, one per variant
    files: dict[str, list[str]] = Field(default_factory=dict)  # what the archive holds, by kind
    summary: list[dict[str, Any]] = Field(default_factory=list)  # harness.measure.tally.SlicesSummary at write time
    # Final counters of the pop-wakeup-probe agent per variant, when mounted (also probe/<variant>.prom).
    probe: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)
    # Per variant and worker the events it recorded (by kind) beside those that reached the archive, and one
    # line per worker that fell short (harness.archive.writer.event_check).
    events_check: dict[str, Any] = Field(default_factory=dict)
    # The run's Prometheus: scrape interval, series exported per query (files in prometheus/).
    prometheus: dict[str, Any] = Field(default_factory=dict)
    # The order the variants came up in and took their slots: {"names", "how": random | given, "seed"}
    # (harness.run.sequence.variant_order); None in archives before schema version 5.
    variant_order: dict[str, Any] | None = None
    # Locust's web UI was served (run --ui, schema 6): whoever opened it could stop or respawn users by hand.
    ui: bool = False
    # The gRPC client the workers drove (schema 8; harness.contracts.workers.GRPC_CLIENTS): official
    # (rocketmq-python-client) or native (the project's own); native-gevent in archives written before
    # 2026-11-28, when the native driver had a grpcio variant. None: a remoting run, or before 8.
    grpc_client: str | None = None
