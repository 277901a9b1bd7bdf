"""One harness run: variants up, the scenario's Locust load against each of them at once, one archive.

Data flows one way: variants + scenario -> backend (brokers) -> Locust (events, metrics) -> archive.
Variants run side by side in the same time window, so machine noise hits them alike.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import platform
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import psutil
from prometheus_client.parser import text_string_to_metric_families

from harness import __version__
from harness.archive.schema import AgentInfo, HostInfo, Manifest, VariantInfo
from harness.archive.writer import ArchiveStaging
from harness.backends.base import Backend, Endpoints
from harness.backends.local import LocalBackend, config, process
from harness.backends.local.launcher import find_java
from harness.client import remoting
from harness.errors import HarnessError
from harness.events import EVENT_SCHEMA_VERSION
from harness.latency import summarize
from harness.observability.dashboards import panel_queries
from harness.observability.prometheus import Prometheus, ScrapeTarget
from harness.paths import REPO_ROOT
from harness.scenario import Scenario
from harness.variants import Variant
from harness.workload.settings import (
    ENV_METRICS_HOST,
    ENV_METRICS_PORT,
    ENV_SETTINGS,
    ENV_WORKER,
    WorkloadSettings,
)

LOCUSTFILE = REPO_ROOT / "workloads" / "locustfile.py"
# After the run time, Locust needs a moment to stop users and workers to write their events.
GRACE_S = 90.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Site:
    """Where a run's brokers, workers and Prometheus live: this machine, or a pod in a cluster.

    Everything else in a run is the same on both, so a run archive never says which produced it
    beyond the endpoints it records.
    """

    backend: Backend
    prometheus: Prometheus
    bind_host: str  # where Locust workers serve their metrics
    advertise_host: str  # how Prometheus reaches them
    worker_port: Callable[[int], int]  # the n-th worker of the run (0-based) -> its metrics port


def local_site(work: Path, log: Callable[[str], None]) -> Site:
    """Brokers started for the run on loopback, a Prometheus of its own, free ports."""
    return Site(
        backend=LocalBackend(work / "brokers", attached=True, log=log),
        prometheus=Prometheus(work / "prometheus", free_port()),
        bind_host="127.0.0.1",
        advertise_host="127.0.0.1",
        worker_port=lambda _n: free_port(),
    )


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


def scrape(ports: Sequence[int]) -> Progress | None:
    """Sum the workers' counters; None when no worker answered (not started yet, or already gone)."""
    p = Progress()
    answered = False
    # Loopback only: never through an HTTP proxy from the environment.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    for port in ports:
        try:
            text = opener.open(f"http://127.0.0.1:{port}/metrics", timeout=1).read().decode()
        except OSError:
            continue
        answered = True
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
    return p if answered else None


def _git_sha() -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5, check=False)
        return out.stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        return None


def _java_version() -> str:
    try:
        out = subprocess.run([find_java(), "-version"], capture_output=True, text=True, timeout=20, check=False)
        return (out.stderr or out.stdout).splitlines()[0]
    except (OSError, HarnessError, IndexError):
        return "unknown"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class RunResult:
    archive: Path
    summary: list[dict]
    events: pd.DataFrame
    probes: dict[str, list[dict]] = field(default_factory=dict)  # variant -> probe counter samples


def new_run_id(scenario: str) -> str:
    """Time, scenario, 4 random hex digits; at most 63 characters (it is a Kubernetes label value too)."""
    now = dt.datetime.now(dt.UTC)
    return f"{now:%Y%m%d-%H%M%S}-{scenario[:40].rstrip('-')}-{secrets.token_hex(2)}"


class Run:
    def __init__(
        self,
        variants: Sequence[Variant],
        scenario: Scenario,
        runs_dir: Path,
        log: Callable[[str], None] = print,
        on_tick: Callable[[float, dict[str, Progress]], None] | None = None,
        probe: bool = False,
        site: Callable[[Path, Callable[[str], None]], Site] = local_site,
        run_id: str | None = None,
    ) -> None:
        self.scenario = scenario
        # The scenario decides retry-topic naming for every variant it runs against.
        self.variants = [v.model_copy(update={"broker": {**v.broker, **scenario.broker_overrides()}})
                         for v in variants]
        if probe:
            self.variants = [config.with_probe(v) for v in self.variants]
        self.runs_dir = runs_dir.expanduser().resolve()
        self.log = log
        self.on_tick = on_tick
        self.run_id = run_id or new_run_id(scenario.name)
        self.work = self.runs_dir / ".work" / self.run_id
        self.site_factory = site
        self.groups: list[LocustGroup] = []

    def execute(self) -> RunResult:
        started = dt.datetime.now(dt.UTC)
        t0 = time.monotonic()
        staging = ArchiveStaging(self.runs_dir, self.run_id)
        site = self.site_factory(self.work, self.log)
        self.site = site
        backend, prom = site.backend, site.prometheus
        try:
            endpoints = backend.up(self.variants)
            for ep in endpoints:
                self._create_resources(ep)
            n = self.scenario.workers
            worker_ports = {ep.variant: {f"worker-{i}": site.worker_port(k * n + i - 1) for i in range(1, n + 1)}
                            for k, ep in enumerate(endpoints)}
            prom.start(self._scrape_targets(endpoints, worker_ports))
            self.log(f"Prometheus for this run: {prom.url} (scraping every second)")
            window_start = time.time()
            for ep in endpoints:
                self.groups.append(self._start_locust(ep, staging, worker_ports[ep.variant]))
            self._follow()
            self._check_workers()
            probes = self._collect_probes(endpoints, staging)
            configs = {ep.variant: backend.broker_config(ep.variant) for ep in endpoints}
            # One more scrape interval so the last counter values are in.
            time.sleep(1.5)
            window = (window_start, time.time())
            exported = prom.export(staging.dir("prometheus"), *window, run=self.run_id)
            exported["dashboard_panels"] = prom.export_panels(staging.dir("prometheus") / "panels.json",
                                                              panel_queries(self.run_id), *window)
            prom.stop()
        except BaseException:
            self._stop_locust()
            prom.stop()
            backend.down()
            backend.collect(staging.dir("logs"))
            self.log(f"run failed; what it wrote so far is in {staging.path}")
            raise
        # The data is in; a broker that will not stop or a log that cannot be copied must not lose it.
        for what, step in (("stopping the brokers", backend.down),
                           ("copying server logs", lambda: backend.collect(staging.dir("logs")))):
            try:
                step()
            except Exception as e:  # noqa: BLE001 - reported, and the archive is still written
                self.log(f"warning: {what} failed: {e}")
        merged = staging.merge_events({g.variant: g.shard_dir for g in self.groups})
        summary = summarize(merged) if not merged.empty else []
        manifest = Manifest(
            event_schema_version=EVENT_SCHEMA_VERSION,
            run_id=self.run_id,
            scenario=self.scenario.model_dump(mode="json"),
            variants=[self._variant_info(v, ep, configs[v.name])
                      for v, ep in zip(self.variants, endpoints, strict=True)],
            harness_version=__version__,
            harness_git_sha=_git_sha(),
            host=HostInfo(hostname=socket.gethostname(), cpus=os.cpu_count() or 0,
                          memory_gib=round(psutil.virtual_memory().total / 2**30, 1),
                          python=platform.python_version(), java=_java_version(), platform=platform.platform()),
            started_at=started.isoformat(),
            ended_at=dt.datetime.now(dt.UTC).isoformat(),
            duration_s=round(time.monotonic() - t0, 1),
            summary=summary,
            probe=probes,
            prometheus={"scrape_interval_s": 1.0, "series": exported,
                        "observer_effect": self.scenario.observer_effect},
        )
        archive = staging.commit(manifest)
        shutil.rmtree(self.work, ignore_errors=True)
        return RunResult(archive, summary, merged, probes)

    # --- steps ---------------------------------------------------------------------------------

    def _create_resources(self, ep: Endpoints) -> None:
        for t in self.scenario.topics:
            remoting.create_topic(ep.broker, t.name, queues=t.queues)
        for g in self.scenario.groups:
            remoting.create_group(ep.broker, g.name, retry_max_times=g.retry_max_times)

    def _scrape_targets(self, endpoints: Sequence[Endpoints],
                        worker_ports: dict[str, dict[str, int]]) -> list[ScrapeTarget]:
        targets = []
        for ep in endpoints:
            targets += [ScrapeTarget("workers", f"{self.site.advertise_host}:{port}", ep.variant, self.run_id)
                        for port in worker_ports[ep.variant].values()]
            targets.append(ScrapeTarget("broker", urllib.parse.urlsplit(ep.metrics).netloc, ep.variant, self.run_id))
            if ep.probe:
                targets.append(ScrapeTarget("probe", urllib.parse.urlsplit(ep.probe).netloc, ep.variant, self.run_id))
        return targets

    def _start_locust(self, ep: Endpoints, staging: ArchiveStaging, ports: dict[str, int]) -> LocustGroup:
        sc = self.scenario
        work = self.work / "locust" / ep.variant
        shard_dir = work / "events"
        shard_dir.mkdir(parents=True, exist_ok=True)
        logs = staging.dir("logs", ep.variant)
        settings = WorkloadSettings(run_id=self.run_id, variant=ep.variant, scenario=sc.model_dump(mode="json"),
                                    grpc_endpoint=ep.grpc, events_dir=str(shard_dir),
                                    client_log_dir=str(logs / "client"))
        settings_file = work / "workload.json"
        settings.write(settings_file)
        locust_out = staging.dir("locust", ep.variant)
        master_port = free_port()
        users = sc.produce.producers + sc.consumer_count
        base = [sys.executable, "-m", "harness.workload.launch", "-f", str(LOCUSTFILE)]
        env = {**os.environ, ENV_SETTINGS: str(settings_file), "PYTHONPATH": str(REPO_ROOT)}
        master = process.spawn(
            [*base, "--headless", "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port",
             str(master_port), "--expect-workers", str(sc.workers), "--users", str(users), "--spawn-rate",
             str(users), "--run-time", f"{int(sc.duration_s)}s", "--csv", str(locust_out / "stats"),
             "--csv-full-history", "--html", str(locust_out / "report.html"), "--exit-code-on-error", "0",
             "--only-summary", "--logfile", str(logs / "locust-master.log")],
            logs / "locust-master.out", cwd=work, env={**env, ENV_WORKER: "master"}, die_with_parent=True,
        )
        workers = {}
        for i in range(1, sc.workers + 1):
            name = f"worker-{i}"
            workers[name] = process.spawn(
                [*base, "--worker", "--master-host", "127.0.0.1", "--master-port", str(master_port),
                 "--logfile", str(logs / f"locust-{name}.log")],
                logs / f"locust-{name}.out", cwd=work,
                env={**env, ENV_WORKER: name, ENV_METRICS_PORT: str(ports[name]),
                     ENV_METRICS_HOST: self.site.bind_host}, die_with_parent=True,
            )
        self.log(f"{ep.variant}: Locust master {master} and {sc.workers} workers driving {ep.grpc}")
        return LocustGroup(ep.variant, master, workers, ports, shard_dir, logs)

    def _follow(self) -> None:
        started = time.monotonic()
        deadline = started + self.scenario.duration_s + GRACE_S
        while any(g.running() for g in self.groups):
            if time.monotonic() > deadline:
                raise HarnessError(
                    f"Locust did not finish within {self.scenario.duration_s + GRACE_S:.0f} s; "
                    f"see {self.groups[0].logs}/locust-master.log"
                )
            if self.on_tick:
                counts = {g.variant: scrape(list(g.metrics_ports.values())) for g in self.groups}
                self.on_tick(time.monotonic() - started, {k: v for k, v in counts.items() if v is not None})
            time.sleep(1.0)

    def _check_workers(self) -> None:
        for g in self.groups:
            g.exit_codes = {name: process.exit_code(pid) for name, pid in
                            {"master": g.master, **g.workers}.items()}
            missing = [w for w in g.workers if not any(g.shard_dir.glob(f"{w}-*.parquet"))]
            if missing:
                raise HarnessError(
                    f"{g.variant}: {', '.join(missing)} wrote no events (exit codes {g.exit_codes}); "
                    f"see {g.logs}/locust-{missing[0]}.log"
                )

    def _collect_probes(self, endpoints: Sequence[Endpoints], staging: ArchiveStaging) -> dict[str, list[dict]]:
        """Save each mounted wakeup probe's counters (before the brokers stop) as probe/<variant>.prom."""
        out = {}
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        for ep in endpoints:
            if not ep.probe:
                continue
            try:
                text = opener.open(ep.probe, timeout=5).read().decode()
            except OSError as e:
                self.log(f"{ep.variant}: wakeup probe at {ep.probe} did not answer ({e})")
                continue
            (staging.dir("probe") / f"{ep.variant}.prom").write_text(text)
            out[ep.variant] = [
                {"name": s.name, **s.labels, "value": s.value}
                for fam in text_string_to_metric_families(text) for s in fam.samples
            ]
        return out

    def _stop_locust(self) -> None:
        for g in self.groups:
            process.stop_children(g.pids())

    def _variant_info(self, v: Variant, ep: Endpoints, broker_config: dict[str, str]) -> VariantInfo:
        return VariantInfo(
            name=v.name,
            version=v.version,
            jars=str(v.jars) if v.jars else None,
            agents=[AgentInfo(jar=a.jar, sha256=_sha256(a.path()), options=a.options) for a in v.agents],
            broker_config=broker_config,
            endpoints=ep.as_dict(),
        )
