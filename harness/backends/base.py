"""The one small interface every deployment backend implements (local processes, Kubernetes).

Everything downstream (workloads, archives) sees only ``Endpoints``; it never learns which backend
produced them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from harness.endpoints import Endpoints
from harness.variants import Variant


@dataclass(frozen=True)
class Health:
    """What `status` reports for one variant."""

    endpoints: Endpoints
    healthy: bool
    detail: str  # one line: what is wrong, or the process ids when all is well


class Backend(Protocol):
    def up(self, variants: Sequence[Variant]) -> list[Endpoints]:
        """Start each variant and return once every one has passed harness.readiness.wait_serving."""
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


def parse_properties(text: str) -> dict[str, str]:
    """A Java properties file's key=value lines (RocketMQ's broker.conf), comments skipped."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if "=" in line and not line.startswith(("#", "!")):
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out
