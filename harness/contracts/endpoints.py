"""How to reach one variant's RocketMQ deployment: what a backend hands to everything after it.

Workloads, clients and archives see only this; none of them learns which backend produced it.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass

# Names the broker derives from a group's (retry and dead-letter topics) keep their prefix before the suffix.
DERIVED_PREFIXES = ("%RETRY%", "%DLQ%")


def run_tag(run_id: str, variant: str) -> str:
    """The suffix of every topic and group a run creates on a cluster it does not own: one per run and variant,
    so two external variants on one cluster never share a name, and re-derivable from the archive (a manual
    clean-up after a crash finds them by it)."""
    return "-rh" + hashlib.sha1(f"{run_id}/{variant}".encode()).hexdigest()[:8]


@dataclass(frozen=True)
class BrokerNode:
    """One broker of a topology of several: what a fault names it, its remoting address, its exporters."""

    name: str  # broker, broker-b, slave
    address: str
    metrics: str
    probe: str = ""
    master: bool = True


@dataclass(frozen=True)
class Endpoints:
    """host:port addresses of one variant (loopback locally, Service DNS names in a cluster)."""

    variant: str
    version: str
    grpc: str  # the proxy's gRPC endpoint: what the Python gRPC client uses
    remoting: str  # the proxy's remoting endpoint
    broker: str  # the broker's own remoting port (admin requests: topics, groups)
    namesrv: str
    metrics: str  # the broker's Prometheus exporter, http://host:port/metrics
    probe: str = ""  # the pop-wakeup-probe agent's exporter, when mounted
    # Every broker when the topology has more than one (the first is the one above); empty: just that one.
    nodes: tuple[BrokerNode, ...] = ()
    # Appended to every topic and group name on the wire (run_tag; a cluster the harness does not own); empty:
    # the scenario's names as they are. Everything above the client driver keeps the scenario's names.
    suffix: str = ""

    def physical(self, name: str) -> str:
        """A topic or group as the broker knows it: the scenario's name with the suffix (after a %RETRY% or
        %DLQ% prefix, which the broker puts before the group's own name)."""
        if not self.suffix:
            return name
        prefix = next((p for p in DERIVED_PREFIXES if name.startswith(p)), "")
        return prefix + name[len(prefix):] + self.suffix

    @property
    def brokers(self) -> tuple[BrokerNode, ...]:
        """Every broker of the variant, the first master first."""
        return self.nodes or (BrokerNode("broker", self.broker, self.metrics, self.probe),)

    @property
    def masters(self) -> list[str]:
        """The remoting address of every master (where topics and groups are created)."""
        return [n.address for n in self.brokers if n.master]

    def as_dict(self) -> dict[str, object]:
        out = asdict(self)
        if not self.nodes:
            out.pop("nodes")
        if not self.suffix:
            out.pop("suffix")
        return out
