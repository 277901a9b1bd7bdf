"""The one typed object a Locust process gets from the harness: its run, its variant's endpoints, the
scenario, and where it writes. One JSON file per process, named by one environment variable (Locust
imports the locustfile itself, so nothing else can carry it there).
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from harness.endpoints import Endpoints
from harness.scenario import Scenario

ENV_SPEC = "RMQ_HARNESS_WORKLOAD"
MASTER = "master"


class WorkloadSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    variant: str
    scenario: Scenario
    endpoints: Endpoints
    worker: str  # "master", or the worker's name (worker-1, ...): the `worker` column of its events
    events_dir: Path  # where workers write their event shards
    client_log_dir: Path
    metrics_host: str = "127.0.0.1"  # where a worker serves its Prometheus metrics (all interfaces in a pod)
    metrics_port: int | None = None

    @property
    def is_master(self) -> bool:
        return self.worker == MASTER

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.model_dump_json(indent=2))
        return path

    @classmethod
    def from_env(cls) -> WorkloadSpec:
        path = os.environ.get(ENV_SPEC)
        if not path:
            raise RuntimeError(f"{ENV_SPEC} is not set: Locust runs of this workload are started by `rmq-harness run`")
        return cls.model_validate_json(Path(path).read_text())
