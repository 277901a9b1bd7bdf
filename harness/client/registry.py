"""Which driver speaks which protocol. Apart from the interface (driver.py), which every driver imports: the
registry imports the drivers, and nothing imports the registry but the stages that need a live client."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from pathlib import Path

from harness.client.driver import Driver, Offload, direct
from harness.contracts.endpoints import Endpoints

# protocol -> (module, class); imported on first use (the gRPC client starts threads when imported).
DRIVERS: dict[str, tuple[str, str]] = {
    "grpc": ("harness.client.grpc", "GrpcDriver"),
    "remoting": ("harness.client.remoting_driver", "RemotingDriver"),
}
PROTOCOLS = tuple(DRIVERS)


def driver(protocol: str, endpoints: Endpoints, offload: Offload = direct, log_file: Path | None = None) -> Driver:
    """The driver for ``protocol`` (one of PROTOCOLS) against one variant's endpoints."""
    if protocol not in DRIVERS:
        raise ValueError(f"no client driver for protocol {protocol!r} (known: {', '.join(PROTOCOLS)})")
    module, name = DRIVERS[protocol]
    cls: Callable[..., Driver] = getattr(import_module(module), name)
    inner = cls(endpoints, offload=offload, log_file=log_file)
    if not endpoints.suffix:
        return inner
    from harness.client.renamed import Renamed

    return Renamed(inner, endpoints)
