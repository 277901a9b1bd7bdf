"""How to reach one variant's RocketMQ deployment: what a backend hands to everything after it.

Workloads, clients and archives see only this; none of them learns which backend produced it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


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
        return out
