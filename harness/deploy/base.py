"""The one small interface every deployment backend implements (local processes, Kubernetes).

Everything downstream (workloads, archives) sees only ``Endpoints``; it never learns which backend
produced them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from harness.contracts.endpoints import Endpoints
from harness.contracts.modules import ModuleJar
from harness.inputs.brokers import SINGLE, Topology
from harness.inputs.variants import Variant


@dataclass(frozen=True)
class Health:
    """What `status` reports for one variant."""

    endpoints: Endpoints
    healthy: bool
    detail: str  # one line: what is wrong, or the process ids when all is well


class ServerProcess(Protocol):
    """One server process of a variant, as its backend runs it: what a fault (harness.run.faults) acts on."""

    # Whether a killed process stays down until ``start`` (locally), or its supervisor restarts it at once
    # (the kubelet): a kill9 held down for duration_s needs the first.
    holds_down: bool

    def describe(self) -> str:
        """One line: which process this is now (e.g. its PID or pod)."""
        ...

    def kill(self) -> None:
        """SIGKILL; returns once it is gone."""
        ...

    def pause(self) -> None:
        """SIGSTOP."""
        ...

    def resume(self) -> None:
        """SIGCONT."""
        ...

    def terminate(self) -> None:
        """SIGTERM; returns once it exited (killed when it would not)."""
        ...

    def start(self) -> None:
        """Start it again as it was (same settings, same store); returns once it serves again and its agents,
        if any, are installed (HarnessError otherwise)."""
        ...


class Backend(Protocol):
    def up(self, variants: Sequence[Variant], topology: Topology = SINGLE) -> list[Endpoints]:
        """Start each variant in ``topology`` and return once every one has passed
        harness.deploy.readiness.wait_serving."""
        ...

    def endpoints(self) -> list[Endpoints]:
        """The variants this backend has up now."""
        ...

    def down(self, names: Sequence[str] | None = None) -> list[str]:
        """Stop the named variants (all when None); return the names stopped."""
        ...

    def collect(self, dest: Path) -> None:
        """Copy what a run archive keeps of the deployment (server logs, configs) into ``dest``."""
        ...

    def broker_config(self, name: str) -> dict[str, str]:
        """The broker.conf a variant runs with (empty when unknown), for the run manifest."""
        ...

    def agent_report(self, name: str) -> dict[str, list[str]]:
        """What each agent of a variant printed when it was installed (jar name -> lines), for the manifest.
        ``up`` refuses a variant whose agents did not install."""
        ...

    def process(self, name: str, target: str) -> ServerProcess:
        """The process of variant ``name`` that a fault on ``target`` (harness.inputs.brokers.FAULT_TARGETS) hits."""
        ...

    def arm_plants(self, name: str) -> None:
        """Variant ``name``'s load started: its planted failures (a scenario's plant:) count from now on
        (harness.deploy.agents.ARM_FILE); a backend whose plants are set otherwise does nothing."""
        ...

    def modules(self, name: str) -> list[ModuleJar]:
        """The RocketMQ server module jars variant ``name`` runs (empty when the backend cannot know them), for
        the manifest: a hybrid release is on record with what came from where (harness.contracts.modules)."""
        ...


def parse_properties(text: str) -> dict[str, str]:
    """A Java properties file's key=value lines (RocketMQ's broker.conf), comments skipped."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if "=" in line and not line.startswith(("#", "!")):
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out
