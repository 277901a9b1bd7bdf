"""How a run's Locust workers are started, wherever they run: the seam between the fleet
(harness.workload.fleet, which owns the command line, the specs and the check that every worker's events
arrived) and what starts them: processes beside the master, or pods of their own (harness.deploy.k8s).

A contract of its own because both sides need it and neither may import the other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

# A worker's WorkloadSpec: a file named by ENV_SPEC (processes on the run's machine), or the JSON itself in
# ENV_SPEC_JSON (pods, which share no file system with the run).
ENV_SPEC = "RMQ_HARNESS_WORKLOAD"
ENV_SPEC_JSON = "RMQ_HARNESS_WORKLOAD_JSON"
# Kubernetes sets it in every pod of an Indexed Job (0-based): which worker the pod is. The pods of one
# variant share one spec; this index names each of them.
ENV_INDEX = "JOB_COMPLETION_INDEX"
# The gRPC clients a run's workers can drive (`run --grpc-client`; harness.client.registry maps each to its
# driver): rocketmq-python-client, the harness's own (harness.client.grpc_native).
GRPC_CLIENTS = ("official", "native")
DEFAULT_GRPC_CLIENT = "official"


@dataclass(frozen=True)
class ReceiveOptions:
    """What a consumer's receives do beyond batch and invisible time, which only some clients can: a scenario's
    consume: sets them (harness.inputs.traffic.Consume.receive_options), a driver refuses what it cannot do
    (harness.client.driver.refuse_options)."""

    deadline: bool = True  # gRPC: False sends ReceiveMessage without grpc-timeout (the native client only)
    auto_renew: bool = False  # gRPC: the proxy renews what it popped while the consumer holds it (native only)
    one_client: bool = False  # lite (remoting): the worker's consumers of a group are one client, several pollers


PLAIN = ReceiveOptions()


def worker_name(n: int) -> str:
    """The n-th worker (1-based) of a variant: the `worker` column of its events."""
    return f"worker-{n}"


@dataclass(frozen=True)
class Placement:
    """Where one worker serves its metrics and writes its files. None: the fleet's own directories (a
    process beside the master); a path: the worker's own file system, whose files it sends to the master."""

    metrics_host: str
    metrics_port: int
    events_dir: Path | None = None
    client_log_dir: Path | None = None


@dataclass(frozen=True)
class WorkerPlan:
    """One variant's workers, as the fleet decided them."""

    run_id: str
    variant: str
    names: tuple[str, ...]  # worker-1 .. worker-N
    master_host: str
    master_port: int
    command: tuple[str, ...]  # every worker's command line (a process adds its log file)
    env: Mapping[str, str]  # what the command needs in its environment, besides its spec
    specs: Mapping[str, str]  # worker name -> its WorkloadSpec as JSON
    placements: Mapping[str, Placement]
    work: Path  # the run's scratch directory for this variant
    logs: Path  # the archive's log directory for this variant
    deadline_s: int  # no worker runs longer than this


class WorkerStarter(Protocol):
    """Starts and stops the workers of a run's variants."""

    master_bind: str  # the address each master listens on
    master_host: str  # the address its workers are given
    ship_files: bool  # True: the workers write on their own file system and send their files to the master

    def placement(self, n: int) -> Placement:
        """Where the run's n-th worker (0-based, over all variants) serves its metrics and writes."""

    def prepare(self, plans: Sequence[WorkerPlan]) -> dict[str, dict[str, str]]:
        """Everything before the masters start; returns variant -> worker -> its metrics' host:port."""

    def start(self, variant: str) -> None:
        """Start the variant's workers (its master runs)."""

    def running(self, variant: str) -> bool: ...

    def exit_codes(self, variant: str) -> dict[str, int | None]:
        """Worker name -> exit code, None while it runs (or never started)."""

    def where(self, variant: str, worker: str) -> str:
        """Where to look for a worker that went wrong (its pod), or "" when its log file says it all."""

    def stop(self) -> None:
        """Stop whatever still runs, keep what the workers leave (their logs) and remove them. Idempotent."""
