"""How one run is run, whatever its variants and scenario: one value written once (``RunOptions``), with the
command-line options that set it and the arguments that pass it on, so that `run`, the campaigns (matrix, sweep,
ramp, calibrate, bisect) and the Kubernetes run Job (harness.deploy.k8s.remote) run alike.
"""

from __future__ import annotations

import argparse

from pydantic import BaseModel, ConfigDict, field_validator

from harness.contracts.workers import DEFAULT_GRPC_CLIENT, GRPC_CLIENTS

RANDOM, GIVEN = "random", "given"
ORDERS = (RANDOM, GIVEN)


class RunOptions(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # Mount the pop-wakeup-probe agent on every variant and archive its counters.
    probe: bool = False
    # The order the variants come up in and take their slots (ports, start times, the CPU the first gets to
    # itself): random unless asked, so that no variant is always first (an A/A calibration found the
    # first-listed copy 10% faster on average); recorded in the manifest.
    order: str = RANDOM
    # Serve Locust's web UI per variant while the run goes (whoever opens it can stop or respawn users).
    ui: bool = False
    # The client the gRPC workers drive (harness.client.registry maps each to its driver).
    grpc_client: str = DEFAULT_GRPC_CLIENT
    # Leave the run's topics and groups on external clusters (variants with endpoints:).
    keep_resources: bool = False

    @field_validator("order")
    @classmethod
    def _order(cls, value: str) -> str:
        if value not in ORDERS:
            raise ValueError(f"variant order {value!r}: one of {', '.join(ORDERS)}")
        return value

    @field_validator("grpc_client")
    @classmethod
    def _client(cls, value: str) -> str:
        if value not in GRPC_CLIENTS:
            raise ValueError(f"gRPC client {value!r}: one of {', '.join(GRPC_CLIENTS)}")
        return value

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RunOptions:
        """The options a parsed command line gives (those a command does not take keep their defaults)."""
        return cls(**{k: getattr(args, k) for k in cls.model_fields if getattr(args, k, None) is not None})

    def as_args(self) -> list[str]:
        """The command-line arguments that give these options (the defaults left out)."""
        out: list[str] = []
        if self.order != RANDOM:
            out += ["--order", self.order]
        if self.grpc_client != DEFAULT_GRPC_CLIENT:
            out += ["--grpc-client", self.grpc_client]
        return out + [f"--{name.replace('_', '-')}" for name in ("probe", "ui", "keep_resources")
                      if getattr(self, name)]



DEFAULTS = RunOptions()  # how a run runs unless told otherwise

def add_run_options(parser: argparse.ArgumentParser, probe: bool = True, order: bool = True, ui: bool = True,
                    grpc_client: bool = True, keep_resources: bool = True,
                    grpc_client_default: str = DEFAULT_GRPC_CLIENT) -> None:
    """The options of ``RunOptions`` a command takes (a campaign that must keep one as it is leaves it out).
    ``grpc_client_default``: the client of a command whose load the official one cannot drive (ramp)."""
    if probe:
        parser.add_argument("--probe", action="store_true",
                            help="mount the pop-wakeup-probe agent on every variant and archive its counters")
    if order:
        parser.add_argument("--order", choices=ORDERS, default=RANDOM,
                            help="the order the variants come up in and take their slots: random (default; recorded "
                                 "in the manifest) or as given")
    if ui:
        parser.add_argument("--ui", action="store_true",
                            help="serve Locust's web UI per variant while the run goes: on 127.0.0.1 here, through "
                                 "the release's load-test Service with `k8s run` (addresses printed when the load "
                                 "starts; the run starts and ends by itself as without it)")
    if grpc_client:
        names = {"official": "official (rocketmq-python-client)", "native": "native (the harness's own, "
                 "docs/operations.md)"}
        parser.add_argument("--grpc-client", choices=GRPC_CLIENTS, default=grpc_client_default,
                            help=f"the client the gRPC workers drive: {names[grpc_client_default]}, the default, or "
                                 f"{' or '.join(names[c] for c in GRPC_CLIENTS if c != grpc_client_default)}; "
                                 "recorded in the manifest")
    if keep_resources:
        parser.add_argument("--keep-resources", action="store_true",
                            help="leave the run's topics and groups on external clusters (variants with endpoints:); "
                                 "they are removed after the run by default")
