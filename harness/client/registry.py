"""Which driver speaks which protocol. Apart from the interface (driver.py), which every driver imports: the
registry imports the drivers, and nothing imports the registry but the stages that need a live client."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from pathlib import Path

from harness.client.driver import Driver, Offload, direct
from harness.contracts.endpoints import Endpoints
from harness.contracts.workers import DEFAULT_GRPC_CLIENT, GRPC_CLIENTS

# protocol -> (module, class); imported on first use (the gRPC client starts threads when imported).
DRIVERS: dict[str, tuple[str, str]] = {
    "grpc": ("harness.client.grpc", "GrpcDriver"),
    "remoting": ("harness.client.remoting_driver", "RemotingDriver"),
}
PROTOCOLS = tuple(DRIVERS)
# Each gRPC client a run can drive (harness.contracts.workers.GRPC_CLIENTS), by its driver. All report protocol
# "grpc"; the run's --grpc-client chooses (WorkloadSpec.grpc_client) and the manifest records it.
GRPC_DRIVERS: dict[str, tuple[str, str]] = {
    "official": DRIVERS["grpc"],
    "native": ("harness.client.grpc_native", "NativeGrpcDriver"),
}
assert tuple(GRPC_DRIVERS) == GRPC_CLIENTS


def driver(protocol: str, endpoints: Endpoints, offload: Offload = direct, log_file: Path | None = None,
           client: str = DEFAULT_GRPC_CLIENT) -> Driver:
    """The driver for ``protocol`` (one of PROTOCOLS) against one variant's endpoints; for gRPC, through
    ``client`` (one of GRPC_CLIENTS)."""
    if protocol not in DRIVERS:
        raise ValueError(f"no client driver for protocol {protocol!r} (known: {', '.join(PROTOCOLS)})")
    if client not in GRPC_DRIVERS:
        raise ValueError(f"no gRPC client {client!r} (known: {', '.join(GRPC_CLIENTS)})")
    module, name = GRPC_DRIVERS[client] if protocol == "grpc" else DRIVERS[protocol]
    cls: Callable[..., Driver] = getattr(import_module(module), name)
    inner = cls(endpoints, offload=offload, log_file=log_file)
    if not endpoints.suffix:
        return inner
    from harness.client.suffixed import SuffixedDriver

    return SuffixedDriver(inner, endpoints)
