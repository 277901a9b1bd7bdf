"""The one small interface every deployment backend implements (local processes, Kubernetes).

Everything downstream (workloads, archives) sees only ``Endpoints``; it never learns which backend
produced them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

from harness.variants import Variant

# What every backend creates and sends through a variant before calling it ready.
READY_TOPIC = "RMQ_HARNESS_READY"
READY_GROUP = "RMQ_HARNESS_READY_GROUP"


@dataclass(frozen=True)
class Endpoints:
    """How to reach one variant's RocketMQ deployment (all host:port, loopback locally)."""

    variant: str
    version: str
    grpc: str  # the proxy's gRPC endpoint: what the Python clients use
    remoting: str  # the proxy's remoting endpoint
    broker: str  # the broker's own remoting port (admin requests: topics, groups)
    namesrv: str
    metrics: str  # the broker's Prometheus exporter, http://host:port/metrics
    probe: str = ""  # the pop-wakeup-probe agent's exporter, when mounted

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class Health:
    """What `status` reports for one variant."""

    endpoints: Endpoints
    healthy: bool
    detail: str  # one line: what is wrong, or the process ids when all is well


class Backend(Protocol):
    def up(self, variants: Sequence[Variant]) -> list[Endpoints]:
        """Start each variant and return once every one has passed a real send/pop round trip."""
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


def parse_properties(text: str) -> dict[str, str]:
    """A Java properties file's key=value lines (RocketMQ's broker.conf), comments skipped."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if "=" in line and not line.startswith(("#", "!")):
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out
