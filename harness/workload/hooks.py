"""Start and stop of one Locust worker process: metrics exporter, event log, clients."""

from __future__ import annotations

from pathlib import Path

from gevent.pywsgi import WSGIServer
from prometheus_client import disable_created_metrics, make_wsgi_app

from harness import metrics
from harness.client.grpc import load_client
from harness.events import EventLog
from harness.workload import users
from harness.workload.gevent_bridge import call
from harness.workload.settings import WorkloadSettings, metrics_host, metrics_port, worker_name


def start_worker(environment: object, settings: WorkloadSettings) -> None:
    worker = worker_name()
    scenario = settings.parsed_scenario()
    load_client(Path(settings.client_log_dir) / f"{worker}.log")
    disable_created_metrics()  # the *_created series only add noise to every scrape and export
    m = metrics.create()
    # Every label set exists from the start (zero), so dashboards show 0 rather than "no data".
    for g in scenario.groups:
        labels = {"variant": settings.variant, "scenario": scenario.name, "protocol": users.PROTOCOL,
                  "group": g.name}
        for c in (m.sent, m.deliveries, m.acks, m.nacks, m.empty_polls, m.cross_topic, m.duplicates):
            c.labels(**labels)
    port = metrics_port()
    if port:
        # Served by greenlets on the hub: prometheus_client's threaded server would use gevent-patched
        # sockets from foreign threads ("Cannot switch to a different thread" under frequent scrapes).
        WSGIServer((metrics_host(), port), make_wsgi_app(m.registry), log=None, error_log=None).start()
    log = EventLog(
        directory=Path(settings.events_dir),
        stem=worker,
        common={"run_id": settings.run_id, "variant": settings.variant, "scenario": scenario.name,
                "worker": worker, "protocol": users.PROTOCOL},
    )
    users.CONTEXT = users.WorkerContext(run_id=settings.run_id, variant=settings.variant, scenario=scenario,
                                        endpoint=settings.grpc_endpoint, worker=worker, log=log, metrics=m)
    users.CONTEXT_READY.set()


def stop_worker() -> None:
    """Shut the clients down and write the worker's remaining events (idempotent)."""
    ctx = users.CONTEXT
    if ctx is None:
        return
    clients, ctx.clients = ctx.clients, []
    for client in clients:
        try:
            call(client.shutdown)
        except Exception:  # noqa: BLE001 - a client that failed to start cannot shut down; keep going
            pass
    ctx.log.flush()
