"""The one typed object a Locust process gets from the harness: its run, its variant's endpoints, the
scenario, and where it writes. Locust imports the locustfile itself, so only the environment can carry
it there: a JSON file named by one variable (processes on the run's machine), or the JSON itself (pods).
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from harness.contracts.endpoints import Endpoints
from harness.contracts.workers import ENV_INDEX, ENV_SPEC, ENV_SPEC_JSON, worker_name
from harness.inputs.scenario import Scenario

__all__ = ["ENV_SPEC", "ENV_SPEC_JSON", "MASTER", "WorkloadSpec"]
MASTER = "master"


class WorkloadSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    variant: str
    scenario: Scenario
    endpoints: Endpoints
    worker: str  # "master", or the worker's name (worker-1, ...): the `worker` column of its events
    events_dir: Path  # where workers write their event shards (the master: where shipped ones go)
    client_log_dir: Path
    metrics_host: str = "127.0.0.1"  # where a worker serves its Prometheus metrics (all interfaces in a pod)
    metrics_port: int | None = None
    # The workers share no file system with the run (pods): at the end each sends its events and client log
    # to the master, which writes them into its own events_dir and client_log_dir (harness.workload.shipping).
    ship_files: bool = False
    # The gRPC client the workers drive (harness.contracts.workers.GRPC_CLIENTS; the run's --grpc-client).
    grpc_client: str = "official"

    @property
    def is_master(self) -> bool:
        return self.worker == MASTER

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.model_dump_json(indent=2))
        return path

    @classmethod
    def from_env(cls) -> WorkloadSpec:
        text = os.environ.get(ENV_SPEC_JSON)
        if text is not None:
            spec = cls.model_validate_json(text)
            index = os.environ.get(ENV_INDEX)
            # The pods of one variant share one spec; their index in the Job says which worker each is.
            if index is not None and not spec.is_master:
                spec = spec.model_copy(update={"worker": worker_name(int(index) + 1)})
            return spec
        path = os.environ.get(ENV_SPEC)
        if not path:
            raise RuntimeError(f"{ENV_SPEC} is not set: Locust runs of this workload are started by `rmq-harness run`")
        return cls.model_validate_json(Path(path).read_text())
