"""How to reach one variant's RocketMQ deployment: what a backend hands to everything after it.

Workloads, clients and archives see only this; none of them learns which backend produced it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


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

    def as_dict(self) -> dict[str, str]:
        return asdict(self)
