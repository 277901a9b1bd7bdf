"""The manifest of a run archive, built by a pure function from what the run found out; plus the few
impure readings of the machine it records (host, git sha, agent digests)."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import platform
import socket
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

import psutil

from harness import __version__
from harness.archive.schema import AgentInfo, HostInfo, Manifest, VariantInfo
from harness.contracts.endpoints import Endpoints
from harness.contracts.events import EVENT_SCHEMA_VERSION
from harness.contracts.modules import ModuleJar
from harness.core.errors import HarnessError
from harness.core.paths import git_sha  # noqa: F401 - the run records it as manifest.git_sha()
from harness.core.process import find_java
from harness.inputs.scenario import Scenario
from harness.inputs.variants import Variant


def _java_version() -> str:
    try:
        out = subprocess.run([find_java(), "-version"], capture_output=True, text=True, timeout=20, check=False)
        return (out.stderr or out.stdout).splitlines()[0]
    except (OSError, IndexError, HarnessError):
        return "unknown"


def host_info() -> HostInfo:
    return HostInfo(hostname=socket.gethostname(), cpus=os.cpu_count() or 0,
                    memory_gib=round(psutil.virtual_memory().total / 2**30, 1),
                    python=platform.python_version(), java=_java_version(), platform=platform.platform())


def agent_digests(variants: Sequence[Variant]) -> dict[str, str]:
    """sha256 of every agent jar the variants mount, by the jar as written in the variant."""
    return {a.jar: hashlib.sha256(a.path().read_bytes()).hexdigest() for v in variants for a in v.agents}


def build(
    *,
    run_id: str,
    scenario: Scenario,
    variants: Sequence[Variant],
    endpoints: Sequence[Endpoints],
    broker_configs: Mapping[str, dict[str, str]],
    agent_reports: Mapping[str, dict[str, list[str]]],
    clock_offsets: Mapping[str, tuple[float, float]],
    digests: Mapping[str, str],
    host: HostInfo,
    harness_git_sha: str | None,
    started: dt.datetime,
    ended: dt.datetime,
    duration_s: float,
    summary: list[dict[str, Any]],
    probes: dict[str, list[dict[str, Any]]],
    prometheus: dict[str, Any],
    faults: Sequence[dict[str, Any]] = (),
    events_check: dict[str, Any] | None = None,
    ignored_settings: Mapping[str, list[str]] | None = None,
    variant_order: dict[str, Any] | None = None,
    external: Mapping[str, dict[str, Any]] | None = None,
    ui: bool = False,
    grpc_client: str | None = None,
    modules: Mapping[str, Sequence[ModuleJar]] | None = None,
) -> Manifest:
    by_name = {ep.variant: ep for ep in endpoints}
    return Manifest(
        event_schema_version=EVENT_SCHEMA_VERSION,
        run_id=run_id,
        scenario=scenario.model_dump(mode="json"),
        variants=[
            VariantInfo(
                name=v.name,
                version=v.version or by_name[v.name].version,  # an external cluster's: what its brokers said
                jars=str(v.jars) if v.jars else None,
                agents=[AgentInfo(jar=a.jar, sha256=digests[a.jar], options=a.options) for a in v.agents],
                broker_config=broker_configs.get(v.name, {}),
                endpoints=by_name[v.name].as_dict(),
                agent_report=agent_reports.get(v.name, {}),
                clock_offset_ms=list(clock_offsets[v.name]) if v.name in clock_offsets else None,
                ignored_settings=(ignored_settings or {}).get(v.name, []),
                external=(external or {}).get(v.name),
                modules=[m.as_dict() for m in (modules or {}).get(v.name, ())],
            )
            for v in variants
        ],
        harness_version=__version__,
        harness_git_sha=harness_git_sha,
        host=host,
        started_at=started.isoformat(),
        ended_at=ended.isoformat(),
        duration_s=round(duration_s, 1),
        summary=summary,
        probe=probes,
        prometheus=prometheus,
        faults=list(faults),
        events_check=events_check or {},
        variant_order=variant_order,
        ui=ui,
        grpc_client=grpc_client,
    )
