"""The run record: what one run was (its scenario, its variants and how each was built, where, when and with which
options it ran) and what it measured per variant. The run builds it once (harness.run.sequence, its hooks each
filling their part), the archive keeps it as manifest.json (harness.archive.manifest), and everything after reads
it back: the terminal, Spark, summary.json and the HTML report. ``MANIFEST_SCHEMA_VERSION`` changes when a field
changes meaning (harness.contracts.schemas); readers take every older version and refuse newer ones.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.contracts import schemas
from harness.contracts.events import EVENT_SCHEMA_VERSION
from harness.contracts.workers import DEFAULT_GRPC_CLIENT

MANIFEST_SCHEMA_VERSION = schemas.MANIFEST.version  # what each version brought: harness.contracts.schemas
MANIFEST = "manifest.json"
# The version from which each variant's record holds its groups' offsets (before: its summary row did).
OFFSETS_ON_VARIANTS = 9


class AgentInfo(BaseModel):
    jar: str
    sha256: str
    options: str = ""


class VariantRecord(BaseModel):
    """One variant as it ran: its build, where it served, and what its brokers said."""

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
    # What its groups left unconsumed when the load stopped (harness.run.offsets: {"lag", "groups"}); None where
    # the brokers would not tell, or before schema 9 (whose summary rows held it: read into here).
    offsets: dict[str, Any] | None = None
    # The scenario's observations read off its brokers (harness.run.observability.observed), raw: name -> number, None
    # where one could not be read (schema 10; None before, or without observe:).
    observed: dict[str, float | None] | None = None
    # Brokers a campaign kept from an earlier run (harness.run.kept: started_by, scenario, runs_on_them; schema 11);
    # None: started for this run.
    kept: dict[str, Any] | None = None


class HostInfo(BaseModel):
    hostname: str
    cpus: int
    memory_gib: float
    python: str
    java: str
    platform: str


class RunRecord(BaseModel):
    model_config = ConfigDict(extra="allow")  # newer writers may add fields; the version says what changed

    schema_version: int = MANIFEST_SCHEMA_VERSION
    event_schema_version: int = EVENT_SCHEMA_VERSION
    run_id: str
    scenario: dict[str, Any]  # as run (harness.inputs.scenario.Scenario, dumped)
    variants: list[VariantRecord]
    harness_version: str = ""
    harness_git_sha: str | None = None
    host: HostInfo | None = None
    started_at: str = ""  # ISO 8601, UTC
    ended_at: str = ""
    duration_s: float = 0.0
    faults: list[dict[str, Any]] = Field(default_factory=list)  # harness.run.faults.FaultRecord, one per variant
    # harness.run.actions.ActionRecord, one per scenario action and variant (schema 10; none before)
    actions: list[dict[str, Any]] = Field(default_factory=list)
    files: dict[str, list[str]] = Field(default_factory=dict)  # what the archive holds, by kind
    # Per (variant, group) what its events gave (harness.measure.tally.SlicesSummary); before schema 9 with the
    # facts harness.measure.enrich now adds when the rows are shown (hybrid, offsets).
    summary: list[dict[str, Any]] = Field(default_factory=list)
    # Final counters of the pop-wakeup-probe agent per variant, when mounted (also probe/<variant>.prom).
    probe: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)
    # Per variant and worker the events it recorded (by kind) beside those that reached the archive, and one
    # line per worker that fell short (harness.archive.writer.event_check).
    events_check: dict[str, Any] = Field(default_factory=dict)
    # The run's Prometheus: scrape interval, series exported per query (files in prometheus/).
    prometheus: dict[str, Any] = Field(default_factory=dict)
    # The order the variants came up in and took their slots: {"names", "how": random | given, "seed"}
    # (harness.run.plan.variant_order); None in archives before schema version 5.
    variant_order: dict[str, Any] | None = None
    # Locust's web UI was served (run --ui, schema 6): whoever opened it could stop or respawn users by hand.
    ui: bool = False
    # The gRPC client the workers drove (schema 8; harness.contracts.workers.GRPC_CLIENTS): official
    # (rocketmq-python-client) or native (the project's own); native-gevent in archives written before
    # 2026-11-28, when the native driver had a grpcio variant. None: a remoting run, or before 8 (see
    # ``client``).
    grpc_client: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _offsets_onto_variants(cls, data: Any) -> Any:
        """Archives before schema 9 kept each variant's offsets in its summary rows: read onto the variant."""
        if not isinstance(data, dict) or not isinstance(data.get("schema_version"), int):
            return data
        if data["schema_version"] >= OFFSETS_ON_VARIANTS:
            return data
        rows = [r for r in data.get("summary") or [] if isinstance(r, dict) and isinstance(r.get("offsets"), dict)]
        if not rows or not isinstance(data.get("variants"), list):
            return data
        found = {r.get("variant"): r["offsets"] for r in rows}
        variants = [{**v, "offsets": v.get("offsets") or found.get(v.get("name"))} if isinstance(v, dict) else v
                    for v in data["variants"]]
        return {**data, "variants": variants}

    @property
    def scenario_name(self) -> str:
        return str(self.scenario.get("name", "?"))

    @property
    def protocol(self) -> str:
        return str(self.scenario.get("protocol") or "grpc")

    @property
    def names(self) -> list[str]:
        """The variants, by name, as the record lists them."""
        return [v.name for v in self.variants]

    def variant(self, name: str) -> VariantRecord:
        return next(v for v in self.variants if v.name == name)

    @property
    def client(self) -> str | None:
        """The gRPC client the workers drove: None over remoting; "official" before schema 8, which had no other."""
        if self.protocol != "grpc":
            return None
        return self.grpc_client or DEFAULT_GRPC_CLIENT
