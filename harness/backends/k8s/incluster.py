"""A run inside the load-test pod: brokers are the release's StatefulSets, Prometheus is the chart's."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from harness.backends.k8s import naming
from harness.backends.k8s.cluster import K8sBackend
from harness.errors import HarnessError
from harness.observability.discovery import DiscoveredPrometheus
from harness.run import Site


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise HarnessError(f"{name} is not set: `--backend k8s` runs inside the chart's load-test pod, "
                           "started by `make loadtest` (or `rmq-harness run --backend k8s` from outside the cluster)")
    return value


def cluster_site(work: Path, log: Callable[[str], None]) -> Site:
    return Site(
        backend=K8sBackend(_env(naming.ENV_FULLNAME), _env(naming.ENV_NAMESPACE), log=log),
        prometheus=DiscoveredPrometheus(_env(naming.ENV_PROMETHEUS), "0.0.0.0", naming.SD_PORT, work / "prometheus"),
        bind_host="0.0.0.0",
        advertise_host=_env(naming.ENV_POD_IP),
        worker_port=naming.worker_port,
    )
