"""The run record as the archive keeps it (manifest.json): begun from what a run is before it starts, finished
with the few readings of the machine it records (host, harness version and git sha, agent digests, times)."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import platform
import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path

import psutil

from harness import __version__
from harness.contracts.options import RunOptions
from harness.contracts.record import AgentInfo, HostInfo, RunRecord, VariantRecord
from harness.core.errors import HarnessError
from harness.core.paths import git_sha
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


def _sha256(agent_jar: Path) -> str:
    return hashlib.sha256(agent_jar.read_bytes()).hexdigest()


def begin(run_id: str, scenario: Scenario, variants: Sequence[Variant], options: RunOptions, order: dict,
          started: dt.datetime | None = None) -> RunRecord:
    """The record of a run about to start: the scenario and variants as it runs them (each agent with the sha256
    of its jar), its options, the order its variants come up in; the rest is filled as it goes."""
    return RunRecord(
        run_id=run_id,
        scenario=scenario.model_dump(mode="json"),
        variants=[VariantRecord(name=v.name, version=v.version or "", jars=str(v.jars) if v.jars else None,
                                agents=[AgentInfo(jar=a.jar, sha256=_sha256(a.path()), options=a.options)
                                        for a in v.agents])
                  for v in variants],
        started_at=(started or dt.datetime.now(dt.UTC)).isoformat(),
        variant_order=order,
        grpc_client=options.grpc_client if scenario.protocol == "grpc" else None,
    )


def build(record: RunRecord, ended: dt.datetime | None = None) -> RunRecord:
    """The manifest of a finished run: its record with the harness and the machine it ran on, when it ended and
    how long it took."""
    end = ended or dt.datetime.now(dt.UTC)
    took = (end - dt.datetime.fromisoformat(record.started_at)).total_seconds() if record.started_at else 0.0
    return record.model_copy(update={
        "harness_version": __version__, "harness_git_sha": git_sha(), "host": host_info(),
        "ended_at": end.isoformat(), "duration_s": round(took, 1)})
