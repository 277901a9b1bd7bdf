"""Where a run happens: this machine, or the load-test pod of a Helm release. The one real difference
between the two: which backend brings the brokers up, which Prometheus scrapes, and where Locust workers
run and serve their metrics. A run takes a Site and never asks which one it got.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.contracts.workers import WorkerStarter
from harness.core.errors import HarnessError
from harness.core.process import free_port
from harness.deploy.base import Backend
from harness.inputs.scenario import Scenario
from harness.inputs.variants import Variant
from harness.run.observability.prometheus import Prometheus
from harness.workload.fleet import LOCAL_UI, UiAt

Log = Callable[[str], None]
# A run's brokers and their stores are thrown away after it, killed at once (launcher.DISCARD_GRACE_S); this is
# the grace of a broker the run stops to start it again (a fault's restart) before it is killed.
RUN_BROKER_STOP_S = 5.0


@dataclass
class Site:
    backend: Backend
    prometheus: Prometheus
    bind_host: str  # where Locust worker processes serve their metrics
    advertise_host: str  # how Prometheus reaches them
    worker_port: Callable[[int], int]  # the n-th worker of the run (0-based) -> its metrics port
    # What starts the workers; None: processes beside each master, with the three settings above.
    workers: WorkerStarter | None = None
    # Where the masters serve Locust's web UI with `run --ui`.
    ui: UiAt = LOCAL_UI


SiteFactory = Callable[[Path, Log], Site]


def on_loopback(backend: Backend, work: Path) -> Site:
    """This machine's site with ``backend``'s brokers: a Prometheus of the run's own, free ports on loopback."""
    return Site(
        backend=backend,
        prometheus=Prometheus(work / "prometheus", free_port()),
        bind_host="127.0.0.1",
        advertise_host="127.0.0.1",
        worker_port=lambda _n: free_port(),
    )


def local_site(work: Path, log: Log) -> Site:
    """Brokers started for the run on loopback, a Prometheus of its own, free ports."""
    from harness.deploy.local import LocalBackend

    return on_loopback(LocalBackend(work / "brokers", attached=True, log=log, stop_timeout_s=RUN_BROKER_STOP_S), work)


def _pod_env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise HarnessError(f"{name} is not set: `run --backend k8s` runs inside the chart's load-test pod; "
                           "from a workstation use `rmq-harness k8s run` (make loadtest)")
    return value


def cluster_site(work: Path, log: Log) -> Site:
    """Inside the chart's load-test pod: the release's StatefulSets, the chart's Prometheus (told about the
    run's targets through HTTP service discovery), the workers as pods of their own (masters stay here)."""
    from harness.deploy.k8s import naming
    from harness.deploy.k8s.cluster import K8sBackend
    from harness.deploy.k8s.workers import PodWorkers
    from harness.run.observability.discovery import DiscoveredPrometheus

    full, namespace, pod_ip = _pod_env(naming.ENV_FULLNAME), _pod_env(naming.ENV_NAMESPACE), _pod_env(naming.ENV_POD_IP)
    backend = K8sBackend(full, namespace, log=log)
    return Site(
        backend=backend,
        prometheus=DiscoveredPrometheus(_pod_env(naming.ENV_PROMETHEUS), "0.0.0.0", naming.SD_PORT,
                                        work / "prometheus", log=log),
        bind_host="0.0.0.0",
        advertise_host=pod_ip,
        worker_port=naming.worker_port,
        # An API client of their own: a fault's exec into a pod (kubernetes.stream) turns the client it goes
        # through into a websocket one while it lasts, and the workers' liveness check, every 5 s in another
        # thread, failed through it (ApiException: Handshake status 200).
        workers=PodWorkers(full, namespace, pod_ip, _pod_env(naming.ENV_POD_NAME), _pod_env(naming.ENV_POD_UID),
                           log=log),
        # On the pod's address (the cluster's network), at the ports the load-test Service forwards.
        ui=UiAt("0.0.0.0", naming.ui_port,
                lambda port: f"port {port} of Service {naming.loadtest_service(full)}: `kubectl -n {namespace} "
                             f"port-forward svc/{naming.loadtest_service(full)} {port}:{port}`, then "
                             f"http://127.0.0.1:{port}"),
    )


SITES: dict[str, SiteFactory] = {"local": local_site, "k8s": cluster_site}


def with_external(site: Site, variants: list[Variant], scenario: Scenario, run_id: str, log: Log,
                  keep: bool = False) -> Site:
    """The site with its backend beside one for the run's external variants (harness.deploy.external), whose
    clusters are inspected now: what the run cannot do there is a ConfigError before anything starts. The site
    as it is when no variant is external."""
    if not any(v.is_external for v in variants):
        return site
    from harness.deploy.external import ExternalBackend, Split

    external = ExternalBackend(variants, scenario.protocol, run_id, log=log, keep=keep)
    external.preflight(scenario)
    site.backend = Split(site.backend, external)
    return site
