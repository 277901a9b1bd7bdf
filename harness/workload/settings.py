"""What the harness tells each Locust process about the run (a JSON file named by an env variable)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.scenario import Scenario

ENV_SETTINGS = "RMQ_HARNESS_WORKLOAD"
ENV_WORKER = "RMQ_HARNESS_WORKER"
ENV_METRICS_PORT = "RMQ_HARNESS_METRICS_PORT"
# Loopback locally; all interfaces in a pod, where Prometheus scrapes from another pod.
ENV_METRICS_HOST = "RMQ_HARNESS_METRICS_HOST"


@dataclass(frozen=True)
class WorkloadSettings:
    run_id: str
    variant: str
    scenario: dict  # Scenario as validated, dumped to JSON
    grpc_endpoint: str
    events_dir: str
    client_log_dir: str

    def parsed_scenario(self) -> Scenario:
        return Scenario.model_validate(self.scenario)

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=2))

    @classmethod
    def from_env(cls) -> WorkloadSettings:
        path = os.environ.get(ENV_SETTINGS)
        if not path:
            raise RuntimeError(f"{ENV_SETTINGS} is not set: start Locust through `rmq-harness run`")
        return cls(**json.loads(Path(path).read_text()))


def worker_name() -> str:
    return os.environ.get(ENV_WORKER, f"pid{os.getpid()}")


def metrics_port() -> int | None:
    port = os.environ.get(ENV_METRICS_PORT)
    return int(port) if port else None


def metrics_host() -> str:
    return os.environ.get(ENV_METRICS_HOST, "127.0.0.1")
