"""The Locust processes of a run: per variant one master and the scenario's workers, all started at once
so every variant sees the same machine; start, follow, stop.

Workers are started through harness.workload.launch (the gevent patching the gRPC client survives) and
each gets its WorkloadSpec as a file named by ENV_SPEC.
"""

from __future__ import annotations

import os
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from harness import process
from harness.endpoints import Endpoints
from harness.errors import HarnessError
from harness.paths import REPO_ROOT
from harness.scenario import Scenario
from harness.workload.spec import ENV_SPEC, MASTER, WorkloadSpec

LOCUSTFILE = REPO_ROOT / "workloads" / "locustfile.py"
# After the run time, Locust needs a moment to stop users and workers to write their events.
GRACE_S = 90.0


@dataclass
class Progress:
    """Live counts summed over a variant's workers (from their Prometheus exporters)."""

    sent: float = 0
    deliveries: float = 0
    retries: float = 0
    wakeup_sum_s: float = 0

    @property
    def mean_wakeup_s(self) -> float | None:
        return self.wakeup_sum_s / self.retries if self.retries else None


def _scrape_one(opener: urllib.request.OpenerDirector, port: int) -> Progress | None:
    try:
        text = opener.open(f"http://127.0.0.1:{port}/metrics", timeout=1).read().decode()
    except OSError:
        return None
    p = Progress()
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == "rmq_harness_messages_sent_total":
                p.sent += s.value
            elif s.name == "rmq_harness_deliveries_total":
                p.deliveries += s.value
            elif s.name == "rmq_harness_retry_wakeup_seconds_count":
                p.retries += s.value
            elif s.name == "rmq_harness_retry_wakeup_seconds_sum":
                p.wakeup_sum_s += s.value
    return p


def scrape(ports: Sequence[int], last: dict[int, Progress] | None = None) -> Progress | None:
    """Sum the workers' counters; None when no worker answered (not started yet, or already gone). With
    ``last`` (port -> its previous answer, updated here), a worker too busy to answer within a second counts
    with what it said before, so a sum never drops (a busy producer's worker once showed "sent 0")."""
    last = {} if last is None else last
    # Loopback only: never through an HTTP proxy from the environment.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    for port in ports:
        got = _scrape_one(opener, port)
        if got is not None:
            last[port] = got
    seen = [last[p] for p in ports if p in last]
    if not seen:
        return None
    return Progress(*(sum(getattr(p, f) for p in seen) for f in ("sent", "deliveries", "retries", "wakeup_sum_s")))


@dataclass
class LocustGroup:
    """The Locust master and workers driving one variant."""

    variant: str
    master: int
    workers: dict[str, int]  # worker name -> pid
    metrics_ports: dict[str, int]
    shard_dir: Path
    logs: Path
    exit_codes: dict[str, int | None] = field(default_factory=dict)

    def pids(self) -> list[int]:
        return [self.master, *self.workers.values()]

    def running(self) -> bool:
        return any(process.exit_code(p) is None for p in self.pids())


class LocustFleet:
    """Locust for every variant of one run.

    ``out(kind, variant)`` names the archive directory for Locust's output ("locust") and logs ("logs");
    ``worker_port(n)`` the metrics port of the run's n-th worker (0-based), served on ``bind_host``.
    """

    def __init__(self, run_id: str, scenario: Scenario, endpoints: Sequence[Endpoints], work: Path,
                 out: Callable[[str, str], Path], bind_host: str, worker_port: Callable[[int], int],
                 log: Callable[[str], None] = print) -> None:
        self.run_id = run_id
        self.scenario = scenario
        self.endpoints = list(endpoints)
        self.work = work
        self.out = out
        self.bind_host = bind_host
        self.log = log
        n = scenario.workers
        self.ports = {ep.variant: {f"worker-{i}": worker_port(k * n + i - 1) for i in range(1, n + 1)}
                      for k, ep in enumerate(self.endpoints)}
        self.groups: list[LocustGroup] = []

    @property
    def shard_dirs(self) -> dict[str, Path]:
        return {g.variant: g.shard_dir for g in self.groups}

    def start(self) -> None:
        for ep in self.endpoints:
            self.groups.append(self._start(ep))

    def wait(self, on_tick: Callable[[float, dict[str, Progress]], None] | None = None) -> None:
        """Until every master and worker exited; HarnessError past the scenario's duration and a grace."""
        started = time.monotonic()
        limit = self.scenario.run_time_s + GRACE_S
        answers: dict[int, Progress] = {}
        while any(g.running() for g in self.groups):
            if time.monotonic() - started > limit:
                raise HarnessError(f"Locust did not finish within {limit:.0f} s; "
                                   f"see {self.groups[0].logs}/locust-master.log")
            if on_tick:
                counts = {g.variant: scrape(list(g.metrics_ports.values()), answers) for g in self.groups}
                on_tick(time.monotonic() - started, {k: v for k, v in counts.items() if v is not None})
            time.sleep(1.0)
        self._check()

    def stop(self) -> None:
        for g in self.groups:
            process.stop_children(g.pids())

    def _check(self) -> None:
        for g in self.groups:
            g.exit_codes = {name: process.exit_code(pid) for name, pid in {MASTER: g.master, **g.workers}.items()}
            missing = [w for w in g.workers if not any(g.shard_dir.glob(f"{w}-*.parquet"))]
            if missing:
                raise HarnessError(
                    f"{g.variant}: {', '.join(missing)} wrote no events (exit codes {g.exit_codes}); "
                    f"see {g.logs}/locust-{missing[0]}.log"
                )

    def _start(self, ep: Endpoints) -> LocustGroup:
        sc = self.scenario
        work = self.work / "locust" / ep.variant
        shard_dir = work / "events"
        shard_dir.mkdir(parents=True, exist_ok=True)
        logs = self.out("logs", ep.variant)
        locust_out = self.out("locust", ep.variant)
        ports = self.ports[ep.variant]

        def spec(worker: str) -> Path:
            s = WorkloadSpec(run_id=self.run_id, variant=ep.variant, scenario=sc, endpoints=ep, worker=worker,
                             events_dir=shard_dir, client_log_dir=logs / "client", metrics_host=self.bind_host,
                             metrics_port=ports.get(worker))
            return s.write(work / f"spec-{worker}.json")

        master_port = process.free_port()
        users = sc.produce.producers + sc.consumer_count
        base = [sys.executable, "-m", "harness.workload.launch", "-f", str(LOCUSTFILE)]
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        master = process.spawn(
            [*base, "--headless", "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port",
             str(master_port), "--expect-workers", str(sc.workers), "--users", str(users), "--spawn-rate",
             str(users), "--run-time", f"{int(sc.run_time_s + 1)}s", "--csv", str(locust_out / "stats"),
             "--csv-full-history", "--html", str(locust_out / "report.html"), "--exit-code-on-error", "0",
             "--only-summary", "--logfile", str(logs / "locust-master.log")],
            logs / "locust-master.out", cwd=work, env={**env, ENV_SPEC: str(spec(MASTER))}, die_with_parent=True,
        )
        workers = {}
        for name in ports:
            workers[name] = process.spawn(
                [*base, "--worker", "--master-host", "127.0.0.1", "--master-port", str(master_port),
                 "--logfile", str(logs / f"locust-{name}.log")],
                logs / f"locust-{name}.out", cwd=work, env={**env, ENV_SPEC: str(spec(name))}, die_with_parent=True,
            )
        target = ep.grpc if sc.protocol == "grpc" else f"the broker (remoting, name server {ep.namesrv})"
        self.log(f"{ep.variant}: Locust master {master} and {sc.workers} workers driving {target}")
        return LocustGroup(ep.variant, master, workers, ports, shard_dir, logs)
