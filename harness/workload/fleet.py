"""The Locust side of a run: per variant one master and the scenario's workers, all started at once so
every variant sees the same machine; start, follow, stop.

The fleet decides everything about the workers (their command line, their specs, where they serve metrics,
the check that every worker's events arrived); a WorkerStarter (harness.contracts.workers) only starts them: as
processes beside the master (ProcessWorkers, here) or as pods (harness.deploy.k8s.workers). Workers run
through harness.workload.launch (the gevent patching the gRPC client survives).
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

from harness.contracts.endpoints import Endpoints
from harness.contracts.workers import DEFAULT_GRPC_CLIENT, ENV_SPEC, Placement, WorkerPlan, WorkerStarter, worker_name
from harness.core import process
from harness.core.errors import HarnessError
from harness.core.paths import REPO_ROOT
from harness.inputs import timing
from harness.inputs.scenario import Scenario
from harness.workload import shipping
from harness.workload.launch import WORKER_SILENCE_S
from harness.workload.spec import MASTER, WorkloadSpec

LOCUSTFILE = REPO_ROOT / "workloads" / "locustfile.py"
# After the run time, Locust needs a moment to stop users and workers to write (or send) their events.
GRACE_S = 90.0
# Worker pods get this long on top to be scheduled and started.
START_S = 300
# A variant none of whose workers' metrics answered by then is said to have no live progress.
METRICS_SILENT_S = 30.0
# How often the run looks for a worker that died while its master waits for it (it fails the run then).
WORKER_CHECK_S = 5.0


@dataclass
class Progress:
    """Live counts summed over a variant's workers (from their Prometheus exporters), and their cycle signal:
    ``cycle`` the newest cycle a producer started (the highest any worker says), ``sending`` how many producers
    have not entered their drain phase (summed); None when no worker exported it (no producer yet, or none)."""

    sent: float = 0
    deliveries: float = 0
    retries: float = 0
    wakeup_sum_s: float = 0
    cycle: int | None = None
    sending: int | None = None

    @property
    def mean_wakeup_s(self) -> float | None:
        return self.wakeup_sum_s / self.retries if self.retries else None


def _scrape_one(opener: urllib.request.OpenerDirector, address: int | str) -> Progress | None:
    where = f"127.0.0.1:{address}" if isinstance(address, int) else address
    try:
        text = opener.open(f"http://{where}/metrics", timeout=1).read().decode()
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
            elif s.name == "rmq_harness_cycle":  # one series a worker (no group label)
                p.cycle = int(s.value)
            elif s.name == "rmq_harness_producers_sending":
                p.sending = int(s.value)
    return p


def scrape(ports: Sequence[int | str], last: dict[int | str, Progress] | None = None) -> Progress | None:
    """Sum the workers' counters (of their cycles, the newest); None when no worker answered (not started yet,
    or already gone). ``ports``: a loopback port, or host:port. With ``last`` (port -> its previous answer,
    updated here), a worker too busy to answer within a second counts with what it said before, so a sum never
    drops (a busy producer's worker once showed "sent 0")."""
    last = {} if last is None else last
    # Never through an HTTP proxy from the environment.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    for port in ports:
        got = _scrape_one(opener, port)
        if got is not None:
            last[port] = got
    seen = [last[p] for p in ports if p in last]
    if not seen:
        return None
    cycles = [p.cycle for p in seen if p.cycle is not None]
    sending = [p.sending for p in seen if p.sending is not None]
    return Progress(*(sum(getattr(p, f) for p in seen) for f in ("sent", "deliveries", "retries", "wakeup_sum_s")),
                    cycle=max(cycles) if cycles else None, sending=sum(sending) if sending else None)


def locust_command() -> list[str]:
    """Locust with the harness's workload, before the master's or a worker's own options."""
    return [sys.executable, "-m", "harness.workload.launch", "-f", str(LOCUSTFILE)]


@dataclass(frozen=True)
class UiAt:
    """Where each variant's Locust master serves its web UI (``run --ui``): the address it binds, the n-th
    variant's port (in the run's order), and how a user reaches that port (a line for the run's log)."""

    host: str
    port: Callable[[int], int]
    reach: Callable[[int], str]


# On this machine: loopback, free ports, the address as it is.
LOCAL_UI = UiAt("127.0.0.1", lambda _n: process.free_port(), lambda port: f"http://127.0.0.1:{port}")


def ui_options(port: int | None, host: str = "127.0.0.1") -> list[str]:
    """How a Locust master runs: headless, or (``port``) with its web UI on 127.0.0.1, started at once and
    quitting when its run ends (harness.workload.cycles stops the UI with the runner). Whoever opens the UI can
    stop or respawn users: the manifest records that it was served (``ui``)."""
    if port is None:
        return ["--headless"]
    return ["--autostart", "--autoquit", "0", "--web-host", host, "--web-port", str(port)]


def worker_command(master_host: str, master_port: int) -> list[str]:
    """Every Locust worker's command line, process or pod (a process adds its log file)."""
    return [*locust_command(), "--worker", "--master-host", master_host, "--master-port", str(master_port)]


# What the command needs besides its spec: the harness importable from the locustfile.
WORKER_ENV = {"PYTHONPATH": str(REPO_ROOT)}


# The master's own log, beside its output, in a variant's logs (what the checks below read).
MASTER_LOG = "locust-master.log"
# Locust's master's line for a worker it dropped (locust.runners.MasterRunner.heartbeat_worker): the worker's
# users stop there; with none left the test stops, and the master still exits 0.
DROPPED = "failed to send heartbeat, setting state to missing"


def dropped_workers(master_log: Path) -> list[str]:
    """The lines of a master's log in which it dropped a worker for want of heartbeats."""
    if not master_log.is_file():
        return []
    return [line for line in master_log.read_text(errors="replace").splitlines() if DROPPED in line]


def event_rows(shard_dir: Path, names: Sequence[str]) -> int:
    """How many events the workers ``names`` left in ``shard_dir`` (their Parquet shards' row counts)."""
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(f).metadata.num_rows for w in names for f in shard_dir.glob(f"{w}-*.parquet"))


def missing_events(shard_dir: Path, names: Sequence[str], shipped: bool) -> list[str]:
    """The workers whose events are not in ``shard_dir``: no shard, or (sent over) no receipt."""
    return [w for w in names if not any(shard_dir.glob(f"{w}-*.parquet"))
            or (shipped and not shipping.receipt(shard_dir, w).is_file())]


class ProcessWorkers:
    """Workers as processes beside their master, on this host (the local backend)."""

    master_bind = master_host = "127.0.0.1"
    ship_files = False

    def __init__(self, bind_host: str, advertise_host: str, worker_port: Callable[[int], int]) -> None:
        self.bind_host = bind_host
        self.advertise_host = advertise_host
        self.worker_port = worker_port
        self.plans: dict[str, WorkerPlan] = {}
        self.pids: dict[str, dict[str, int]] = {}

    def placement(self, n: int) -> Placement:
        return Placement(self.bind_host, self.worker_port(n))

    def prepare(self, plans: Sequence[WorkerPlan]) -> dict[str, dict[str, str]]:
        self.plans = {p.variant: p for p in plans}
        return {p.variant: {w: f"{self.advertise_host}:{pl.metrics_port}" for w, pl in p.placements.items()}
                for p in plans}

    def start(self, variant: str) -> None:
        plan = self.plans[variant]
        env = {**os.environ, **plan.env}
        self.pids[variant] = {}
        for name in plan.names:
            spec = plan.work / f"spec-{name}.json"
            spec.write_text(plan.specs[name])
            self.pids[variant][name] = process.spawn(
                [*plan.command, "--logfile", str(plan.logs / f"locust-{name}.log")],
                plan.logs / f"locust-{name}.out", cwd=plan.work, env={**env, ENV_SPEC: str(spec)},
                die_with_parent=True,
            )

    def running(self, variant: str) -> bool:
        return any(process.exit_code(p) is None for p in self.pids.get(variant, {}).values())

    def exit_codes(self, variant: str) -> dict[str, int | None]:
        return {name: process.exit_code(pid) for name, pid in self.pids.get(variant, {}).items()}

    def where(self, variant: str, worker: str) -> str:
        return ""

    def stop(self) -> None:
        process.stop_children([p for pids in self.pids.values() for p in pids.values()])


@dataclass
class LocustGroup:
    """The Locust master and workers driving one variant."""

    variant: str
    master: int
    workers: tuple[str, ...]
    metrics: dict[str, str]  # worker name -> host:port of its metrics
    shard_dir: Path
    logs: Path
    exit_codes: dict[str, int | None] = field(default_factory=dict)


class LocustFleet:
    """Locust for every variant of one run.

    ``out(kind, variant)`` names the archive directory for Locust's output ("locust") and logs ("logs");
    ``workers`` starts the workers (ProcessWorkers beside each master, or pods). ``prepare()`` says where
    every worker serves its metrics before any master runs (Prometheus is told first); ``start()`` starts.
    """

    def __init__(self, run_id: str, scenario: Scenario, endpoints: Sequence[Endpoints], work: Path,
                 out: Callable[[str, str], Path], workers: WorkerStarter,
                 log: Callable[[str], None] = print, ui: UiAt | None = None,
                 grpc_client: str = DEFAULT_GRPC_CLIENT) -> None:
        self.run_id = run_id
        self.ui = ui
        self.grpc_client = grpc_client
        self.scenario = scenario
        self.endpoints = list(endpoints)
        self.work = work
        self.out = out
        self.workers = workers
        self.log = log
        self.plans: dict[str, WorkerPlan] = {}
        self.metrics: dict[str, dict[str, str]] = {}  # variant -> worker -> host:port of its metrics
        self.groups: list[LocustGroup] = []

    @property
    def shard_dirs(self) -> dict[str, Path]:
        return {g.variant: g.shard_dir for g in self.groups}

    def _shard_dir(self, variant: str) -> Path:
        return self.work / "locust" / variant / "events"

    def _spec(self, ep: Endpoints, worker: str, placement: Placement | None = None) -> WorkloadSpec:
        logs = self.out("logs", ep.variant)
        where = {"events_dir": self._shard_dir(ep.variant), "client_log_dir": logs / "client"}
        if placement is not None:
            where.update({"metrics_host": placement.metrics_host, "metrics_port": placement.metrics_port})
            where.update({k: v for k, v in (("events_dir", placement.events_dir),
                                            ("client_log_dir", placement.client_log_dir)) if v is not None})
        return WorkloadSpec(run_id=self.run_id, variant=ep.variant, scenario=self.scenario, endpoints=ep,
                            worker=worker, ship_files=self.workers.ship_files, grpc_client=self.grpc_client, **where)

    def prepare(self) -> dict[str, dict[str, str]]:
        """Plan every variant's workers and get them ready; variant -> worker -> host:port of its metrics."""
        n = self.scenario.workers
        deadline = int(timing.run_time_s(self.scenario) + GRACE_S + START_S)
        for k, ep in enumerate(self.endpoints):
            work = self.work / "locust" / ep.variant
            self._shard_dir(ep.variant).mkdir(parents=True, exist_ok=True)
            names = tuple(worker_name(i) for i in range(1, n + 1))
            placements = {w: self.workers.placement(k * n + i) for i, w in enumerate(names)}
            master_port = process.free_port()
            self.plans[ep.variant] = WorkerPlan(
                run_id=self.run_id, variant=ep.variant, names=names, master_host=self.workers.master_host,
                master_port=master_port, command=tuple(worker_command(self.workers.master_host, master_port)),
                env=WORKER_ENV, specs={w: self._spec(ep, w, placements[w]).model_dump_json() for w in names},
                placements=placements, work=work, logs=self.out("logs", ep.variant), deadline_s=deadline,
            )
        self.metrics = self.workers.prepare(list(self.plans.values()))
        return self.metrics

    def start(self) -> None:
        if not self.plans:
            self.prepare()
        for ep in self.endpoints:
            self.groups.append(self._start(ep))

    def _running(self, g: LocustGroup) -> bool:
        return process.exit_code(g.master) is None or self.workers.running(g.variant)

    def wait(self, on_tick: Callable[[float, dict[str, Progress]], None] | None = None) -> None:
        """Until every master and worker exited; HarnessError past the scenario's duration and a grace."""
        started = time.monotonic()
        limit = timing.run_time_s(self.scenario) + GRACE_S
        answers: dict[int | str, Progress] = {}
        silent = {g.variant for g in self.groups}
        checked = 0.0
        while any(self._running(g) for g in self.groups):
            elapsed = time.monotonic() - started
            if elapsed > limit:
                raise HarnessError(f"Locust did not finish within {limit:.0f} s; "
                                   f"see {self.groups[0].logs / MASTER_LOG}")
            if elapsed - checked >= WORKER_CHECK_S:
                checked = elapsed
                self._check_workers_alive()
            if on_tick:
                counts = {g.variant: scrape(list(g.metrics.values()), answers) for g in self.groups}
                on_tick(elapsed, {k: v for k, v in counts.items() if v is not None})
                for g in self.groups:
                    if g.variant in silent and (counts[g.variant] is not None or elapsed > METRICS_SILENT_S):
                        silent.discard(g.variant)
                        if counts[g.variant] is None:
                            where = ", ".join(g.metrics.values())
                            self.log(f"{g.variant}: no worker's metrics answered at {where} within "
                                     f"{METRICS_SILENT_S:.0f} s: no live progress for it (its events are not affected)")
            time.sleep(1.0)
        # The line that tells a reader (and the interrupt tests) the load is over and the export begins.
        self.log(f"Locust finished: every master and worker exited after {time.monotonic() - started:.1f} s")
        # Everything exited: what the workers leave (pods: their logs) is kept, and they are removed.
        self.workers.stop()
        self._check()

    def _check_workers_alive(self) -> None:
        """A worker that failed while its master still runs (it could not bind its port, import, connect):
        its master would wait for it until the run's time is up; say which one, now."""
        for g in self.groups:
            if process.exit_code(g.master) is not None:
                continue
            failed = {w: c for w, c in self.workers.exit_codes(g.variant).items() if c not in (None, 0)}
            if failed:
                w, code = next(iter(failed.items()))
                where = self.workers.where(g.variant, w)
                raise HarnessError(f"{g.variant}: Locust {w}{f' ({where})' if where else ''} exited with code {code} "
                                   f"while the run went on; see {g.logs}/locust-{w}.out")

    def stop(self) -> None:
        process.stop_children([g.master for g in self.groups])
        self.workers.stop()

    def _check(self) -> None:
        for g in self.groups:
            g.exit_codes = {MASTER: process.exit_code(g.master),
                            **{w: None for w in g.workers}, **self.workers.exit_codes(g.variant)}
            missing = missing_events(g.shard_dir, g.workers, self.workers.ship_files)
            if missing:
                where = [f"{w} ({self.workers.where(g.variant, w)})" if self.workers.where(g.variant, w) else w
                         for w in missing]
                raise HarnessError(
                    f"{g.variant}: {', '.join(where)} {'sent' if self.workers.ship_files else 'wrote'} no events "
                    f"(exit codes {g.exit_codes}); see {g.logs}/locust-{missing[0]}.log"
                )
            dropped = dropped_workers(g.logs / MASTER_LOG)
            if dropped:
                raise HarnessError(f"{g.variant}: Locust's master dropped {len(dropped)} worker(s) that sent no "
                                   f"heartbeat for {WORKER_SILENCE_S} s, and their users with them; see "
                                   f"{g.logs / MASTER_LOG}", detail="\n".join(dropped))
            if not event_rows(g.shard_dir, g.workers):
                raise HarnessError(f"{g.variant}: its workers recorded no event: nothing was sent or received "
                                   f"(exit codes {g.exit_codes}); see {g.logs / MASTER_LOG}")

    def _start(self, ep: Endpoints) -> LocustGroup:
        sc = self.scenario
        plan = self.plans[ep.variant]
        logs = plan.logs
        locust_out = self.out("locust", ep.variant)
        master_spec = self._spec(ep, MASTER).write(plan.work / f"spec-{MASTER}.json")
        users = sc.produce.producers + sc.consumer_count
        env = {**os.environ, **WORKER_ENV}
        ui_port = self.ui.port(self.endpoints.index(ep)) if self.ui else None
        ui = ui_options(ui_port, self.ui.host) if self.ui else ui_options(None)
        master = process.spawn(
            [*locust_command(), *ui, "--master", "--master-bind-host", self.workers.master_bind,
             "--master-bind-port", str(plan.master_port), "--expect-workers", str(sc.workers), "--users",
             str(users), "--spawn-rate", str(users), "--run-time", f"{int(timing.run_time_s(sc) + 1)}s", "--csv",
             str(locust_out / "stats"), "--csv-full-history", "--html", str(locust_out / "report.html"),
             "--exit-code-on-error", "0", "--only-summary", "--logfile", str(logs / MASTER_LOG)],
            logs / "locust-master.out", cwd=plan.work, env={**env, ENV_SPEC: str(master_spec)}, die_with_parent=True,
        )
        self.workers.start(ep.variant)
        target = ep.grpc if sc.protocol == "grpc" else f"the broker (remoting, name server {ep.namesrv})"
        self.log(f"{ep.variant}: Locust master {master} and {sc.workers} workers driving {target}")
        if self.ui and ui_port:
            self.log(f"{ep.variant}: Locust's web UI at {self.ui.reach(ui_port)} (live while the run goes)")
        return LocustGroup(ep.variant, master, plan.names, self.metrics[ep.variant], self._shard_dir(ep.variant), logs)
