"""Which driver speaks which protocol. Apart from the interface (driver.py), which every driver imports: the
registry imports the drivers, and nothing imports the registry but the stages that need a live client."""

from __future__ import annotations

import os
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
# gRPC has two clients: rocketmq-python-client ("official", the default) and the project's own ("native",
# harness.client.grpc_native). Both report protocol "grpc"; the choice comes from this variable, which the
# Locust workers inherit (a CLI option --grpc-client would set it, by the RMQ_HARNESS_<OPTION> rule).
GRPC_CLIENT_ENV = "RMQ_HARNESS_GRPC_CLIENT"
GRPC_CLIENTS: dict[str, tuple[str, str]] = {
    "official": DRIVERS["grpc"],
    "native": ("harness.client.grpc_native", "NativeGrpcDriver"),
}
DEFAULT_GRPC_CLIENT = "official"


def grpc_client(name: str | None = None) -> str:
    """The gRPC client to use: ``name``, else $RMQ_HARNESS_GRPC_CLIENT, else the official one."""
    chosen = name or os.environ.get(GRPC_CLIENT_ENV) or DEFAULT_GRPC_CLIENT
    if chosen not in GRPC_CLIENTS:
        raise ValueError(f"{GRPC_CLIENT_ENV}={chosen!r}: no such gRPC client (known: {', '.join(GRPC_CLIENTS)})")
    return chosen


def driver(protocol: str, endpoints: Endpoints, offload: Offload = direct, log_file: Path | None = None,
           client: str | None = None) -> Driver:
    """The driver for ``protocol`` (one of PROTOCOLS) against one variant's endpoints; for gRPC, through
    ``client`` (see grpc_client)."""
    if protocol not in DRIVERS:
        raise ValueError(f"no client driver for protocol {protocol!r} (known: {', '.join(PROTOCOLS)})")
    module, name = GRPC_CLIENTS[grpc_client(client)] if protocol == "grpc" else DRIVERS[protocol]
    cls: Callable[..., Driver] = getattr(import_module(module), name)
    inner = cls(endpoints, offload=offload, log_file=log_file)
    if not endpoints.suffix:
        return inner
    from harness.client.renamed import Renamed

    return Renamed(inner, endpoints)
