"""One harness run, as a sequence: variants up, resources created, Prometheus and Locust started against
every variant at once, the run window exported, brokers down, one archive written.

Everything a step needs comes from the Site (local or in a cluster), which this module never looks into.
Variants run side by side in the same time window, so machine noise hits them alike.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import re
import secrets
import shutil
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.archive import manifest
from harness.archive.writer import ArchiveStaging, event_check
from harness.client import remoting
from harness.client.driver import CLIENT_UNFIT
from harness.client.registry import driver
from harness.contracts.endpoints import Endpoints
from harness.contracts.events import EventLog
from harness.contracts.modules import hybrid_note
from harness.contracts.workers import DEFAULT_GRPC_CLIENT
from harness.core.errors import ConfigError, HarnessError, NotApplicable
from harness.deploy import readiness
from harness.deploy.base import Backend
from harness.inputs.scenario import Scenario
from harness.inputs.variants import GIVEN, ORDERS, PLANT_JAR, RANDOM, Variant, with_plants, with_probe
from harness.measure.slices import read_events
from harness.measure.tally import SlicesSummary
from harness.run import offsets, outbox
from harness.run.cpu import CpuSampler
from harness.run.faults import HARNESS_WORKER, Injector
from harness.run.observability.dashboards import panel_queries
from harness.run.observability.probe import read_probe
from harness.run.observability.prometheus import ScrapeTarget
from harness.run.site import Site, SiteFactory, local_site, with_external
from harness.workload.fleet import GRACE_S, LocustFleet, ProcessWorkers, Progress

if TYPE_CHECKING:  # for the annotation only: the run does not choose its backends (harness.run.site does)
    from harness.deploy.external import ExternalBackend

__all__ = ["GRACE_S", "Progress", "Run", "RunResult", "new_run_id"]
SCRAPE_INTERVAL_S = 1.0
# Wakeup subtracts the broker's store time from the client's receive time: a clock offset between them
# is a bias of that size. Refused when the measured bounds lie wholly beyond this.
MAX_CLOCK_OFFSET_MS = 10.0
# A fault still in progress when the load ends (a broker starting again) is waited for this long.
FAULT_FINISH_S = 300.0


def client_unfit(path: Path) -> list[str]:
    """The client's DriverErrors among an event file's errors (read a batch at a time)."""
    out = []
    for batch in pq.ParquetFile(path).iter_batches(columns=["kind", "detail"]):
        errors = batch.filter(pc.equal(batch.column("kind"), "error"))
        out += [d for d in errors.column("detail").to_pylist() if (d or "").startswith(CLIENT_UNFIT)]
    return out


@dataclass
class RunResult:
    archive: Path | str  # a local directory, or its URI once uploaded (harness.archive.store)
    summary: list[dict]
    probes: dict[str, list[dict]] = field(default_factory=dict)  # variant -> probe counter samples
    cpu: dict = field(default_factory=dict)  # what the run's processes on this machine took (harness.run.cpu)


def new_run_id(scenario: str) -> str:
    """Time, scenario, 4 random hex digits; at most 63 characters (it is a Kubernetes label value too)."""
    now = dt.datetime.now(dt.UTC)
    return f"{now:%Y%m%d-%H%M%S}-{scenario[:40].rstrip('-')}-{secrets.token_hex(2)}"


def create_resources(ep: Endpoints, scenario: Scenario, log: Callable[[str], None] = print) -> None:
    d = driver(scenario.protocol, ep)
    # What was created, as the brokers were asked for it: (name, queues, message type), (name, retries, orderly).
    topics: list[tuple[str, int, str]] = []
    groups: list[tuple[str, int, bool]] = []
    try:
        for t in scenario.topics:
            d.create_topic(t.name, queues=t.queues, message_type=t.message_type)
            topics.append((t.name, t.queues, t.message_type))
        for g in scenario.groups:
            d.create_group(g.name, retry_max_times=g.retry_max_times, orderly=g.fifo)
            groups.append((g.name, g.retry_max_times, g.fifo))
            if g.read_dlq:
                # The broker creates the DLQ (1 queue, read + write) on its first dead letter; made here so
                # the reader can subscribe before that.
                d.create_topic(g.dlq_topic, queues=1)
                d.create_group(g.dlq_reader, retry_max_times=g.dlq_reader_retry_max_times)
                topics.append((g.dlq_topic, 1, "NORMAL"))
                groups.append((g.dlq_reader, g.dlq_reader_retry_max_times, False))
    finally:
        d.close()
    readiness.create_on_slaves(ep, [(ep.physical(n), q, m) for n, q, m in topics],
                               [(ep.physical(n), r, o) for n, r, o in groups], log=log)
    waited = readiness.wait_replicated(ep, [ep.physical(t[0]) for t in topics], [ep.physical(g[0]) for g in groups],
                                       log=log)
    if waited > 1:
        log(f"{ep.variant}: every slave has the scenario's topics and groups ({waited:.0f} s)")


def scrape_targets(run_id: str, endpoints: Sequence[Endpoints],
                   worker_metrics: dict[str, dict[str, str]]) -> list[ScrapeTarget]:
    """``worker_metrics``: variant -> worker -> host:port of its metrics."""
    targets = []
    for ep in endpoints:
        targets += [ScrapeTarget("workers", address, ep.variant, run_id)
                    for address in worker_metrics[ep.variant].values()]
        for node in ep.brokers:
            if node.metrics:  # an external broker may serve none (said when the run started)
                targets.append(ScrapeTarget("broker", urllib.parse.urlsplit(node.metrics).netloc, ep.variant,
                                            run_id, suffix=ep.suffix))
            if node.probe:
                targets.append(ScrapeTarget("probe", urllib.parse.urlsplit(node.probe).netloc, ep.variant, run_id))
    return targets


def variant_order(variants: Sequence[Variant], how: str, seed: int | None = None) -> dict:
    """{"names": the order the run brings the variants up in, "how": random or given, "seed"}."""
    names = [v.name for v in variants]
    if how == GIVEN:
        return {"names": names, "how": GIVEN, "seed": None}
    if how != RANDOM:
        raise ConfigError(f"variant order {how!r}: one of {', '.join(ORDERS)}")
    seed = secrets.randbits(32) if seed is None else seed
    random.Random(seed).shuffle(names)
    return {"names": names, "how": RANDOM, "seed": seed}


def _external_of(backend: Backend) -> ExternalBackend | None:
    """The run's backend for external clusters, when it has one (harness.run.site.with_external)."""
    return getattr(backend, "external", None)


_PLANTED = re.compile(r"planted (?:failure|delay) \d+/\d+ ")


def planted_line(variant: str, report: dict[str, list[str]]) -> str:
    """How many failures the pop-fault agent planted in a variant's brokers (its `planted failure k/N` and
    `planted delay k/N` lines), as the run says it: a scenario whose plant never fired measured the broker without
    the failure. A plant whose exception could not be made (`planted failure: cannot make ...`, it failed with
    RuntimeException instead) is warned about."""
    name = Path(PLANT_JAR).name
    lines = [ln for jar, said in report.items() if jar.endswith(name) for ln in said]
    n = sum(bool(_PLANTED.search(ln)) for ln in lines)
    if n:
        fallback = [ln for ln in lines if "planted failure: cannot make" in ln]
        warn = f"; warning: {'; '.join(fallback)}" if fallback else ""
        return f"{variant}: {n} failure(s) planted (pop-fault){warn}"
    return (f"warning: {variant}: no failure was planted (pop-fault: "
            f"{'; '.join(lines[-2:]) or 'printed nothing'}): the run measured it without")


def refuse_on_external(v: Variant, scenario: Scenario, probe: bool) -> None:
    """What a run cannot do to a cluster it does not own, said before anything starts."""
    where = f"variant {v.name} ({v.source}) is an external cluster"
    if scenario.faults:
        raise ConfigError(f"scenario {scenario.name} injects {scenario.faults[0].label}; {where} whose processes the "
                          "harness does not own: leave it out or pick a scenario without faults")
    if probe:
        raise ConfigError(f"--probe mounts the wakeup-probe agent on every variant; {where}: run without --probe "
                          "or leave it out")
    if scenario.plant:
        raise ConfigError(f"scenario {scenario.name} plants failures in the brokers' code (plant:); {where} whose "
                          "brokers the harness does not start: leave it out")
    if scenario.proxy:
        keys = ", ".join(sorted(scenario.proxy))
        raise ConfigError(f"scenario {scenario.name} needs proxy settings ({keys}); {where} whose proxy the harness "
                          "neither reads nor sets: leave it out")


class Run:
    def __init__(
        self,
        variants: Sequence[Variant],
        scenario: Scenario,
        runs_dir: Path | str,
        log: Callable[[str], None] = print,
        on_tick: Callable[[float, dict[str, Progress]], None] | None = None,
        probe: bool = False,
        site: SiteFactory = local_site,
        run_id: str | None = None,
        order: str = RANDOM,
        keep_resources: bool = False,
        ui: bool = False,
        grpc_client: str = DEFAULT_GRPC_CLIENT,
    ) -> None:
        self.scenario = scenario
        if grpc_client != DEFAULT_GRPC_CLIENT and scenario.protocol != "grpc":
            raise ConfigError(f"--grpc-client {grpc_client} with scenario {scenario.name} over {scenario.protocol}: "
                              "the gRPC client drives gRPC scenarios only; drop it or run a gRPC form")
        self.grpc_client = grpc_client if scenario.protocol == "grpc" else None
        # The scenario decides retry-topic naming and the observer effect for every variant it runs against;
        # a variant that says otherwise would silently run something else.
        for v in variants:
            clash = scenario.conflicts(v.broker, v.proxy)
            if clash:
                raise ConfigError(f"variant {v.name} ({v.source}) sets {'; '.join(clash)} against scenario "
                                  f"{scenario.name} ({scenario.source}); remove it from the variant or pick "
                                  "another scenario")
            if v.is_external:  # a cluster the harness does not own: its live settings are checked instead
                refuse_on_external(v, scenario, probe)
            why = scenario.not_applicable(v.version)
            if why:
                raise NotApplicable(v.name, f"variant {v.name}: {why}")
        self.variants = [v if v.is_external else v.model_copy(update={
            "broker": {**v.broker, **scenario.broker_overrides()}, "proxy": {**v.proxy, **scenario.proxy}})
            for v in variants]
        if scenario.plant:
            planted = ";".join(p.options for p in scenario.plant)
            self.variants = [with_plants(v, planted) for v in self.variants]
        if probe:
            self.variants = [with_probe(v) for v in self.variants]
        self.keep_resources = keep_resources
        self.ui = ui
        # The order the variants come up in and take their slots (ports, start times, the CPU the first
        # gets to itself): random unless asked, so that no variant is always first (an A/A calibration found
        # the first-listed copy 10% faster on average); recorded in the manifest.
        self.order = variant_order(self.variants, order)
        self.log = log
        self.on_tick = on_tick
        self.run_id = run_id or new_run_id(scenario.name)
        # Archives bound for object storage are written here first, then uploaded (harness.archive.store);
        # a bucket that is missing or refuses the credentials is said now, before anything starts.
        self.bucket = outbox.bucket_of(runs_dir, [self.run_id])
        self.runs_dir = outbox.local_dir(runs_dir).expanduser().resolve()
        self.work = self.runs_dir / ".work" / self.run_id
        self.site_factory = site

    def execute(self) -> RunResult:
        started = dt.datetime.now(dt.UTC)
        t0 = time.monotonic()
        site: Site = self.site_factory(self.work, self.log)
        # External clusters are inspected before anything is written or started (a refusal leaves nothing).
        site = with_external(site, self.variants, self.scenario, self.run_id, self.log, self.keep_resources)
        staging = ArchiveStaging(self.runs_dir, self.run_id)
        backend, prom = site.backend, site.prometheus
        fleet: LocustFleet | None = None
        sampler = CpuSampler([v.name for v in self.variants])
        up = sorted(self.variants, key=lambda v: self.order["names"].index(v.name))
        faults = Injector(backend, [v.name for v in up], self.scenario.faults, self.log)
        try:
            self.log(f"variants in {self.order['how']} order: {', '.join(self.order['names'])}")
            endpoints = backend.up(up, self.scenario.topology)
            faults.prepare()
            clocks = {ep.variant: self._clock_offset(ep) for ep in endpoints}
            ignored = {ep.variant: self._check_settings(ep, backend.broker_config(ep.variant)) for ep in endpoints}
            for ep in endpoints:
                create_resources(ep, self.scenario, self.log)
            workers = site.workers or ProcessWorkers(site.bind_host, site.advertise_host, site.worker_port)
            fleet = LocustFleet(self.run_id, self.scenario, endpoints, self.work, staging.dir, workers, log=self.log,
                                ui=site.ui if self.ui else None, grpc_client=self.grpc_client or DEFAULT_GRPC_CLIENT)
            if self.grpc_client and self.grpc_client != DEFAULT_GRPC_CLIENT:
                self.log(f"gRPC client: {self.grpc_client} (--grpc-client; the manifest records it)")
            prom.start(scrape_targets(self.run_id, endpoints, fleet.prepare()), SCRAPE_INTERVAL_S)
            self.log(f"Prometheus for this run: {prom.url} (scraping every second)")
            window_start = time.time()
            sampler.start(skip_s=self.scenario.produce.delay_s)  # the load, not Locust starting
            fleet.start()
            faults.start()
            fleet.wait(self.on_tick)
            cpu = sampler.stop()
            (staging.dir("resources") / "cpu.json").write_text(json.dumps(cpu, indent=2) + "\n")
            self.log(f"CPU while the load ran: {cpu['ran_out']['line']}")
            faults.finish(timeout_s=FAULT_FINISH_S)
            offsets = {ep.variant: self._lag(ep) for ep in endpoints}
            probes = self._collect_probes(endpoints, staging)
            configs = {ep.variant: backend.broker_config(ep.variant) for ep in endpoints}
            agents = {ep.variant: backend.agent_report(ep.variant) for ep in endpoints}
            if self.scenario.plant:
                for variant, report in agents.items():
                    self.log(planted_line(variant, report))
            modules = {ep.variant: backend.modules(ep.variant) for ep in endpoints}
            time.sleep(1.5 * SCRAPE_INTERVAL_S)  # one more scrape, so the last counter values are in
            window = (window_start, time.time())
            exported = prom.export(staging.dir("prometheus"), *window, run=self.run_id)
            exported["dashboard_panels"] = prom.export_panels(staging.dir("prometheus") / "panels.json",
                                                              panel_queries(self.run_id), *window)
            prom.stop()
        except BaseException as e:
            sampler.stop()
            if fleet is not None:
                fleet.stop()
            prom.stop()
            faults.release()  # no fault starts a process any more; one starting now is in the state `down` reads
            backend.down()
            backend.collect(staging.dir("logs"))
            if isinstance(e, KeyboardInterrupt):
                # Interrupted: the logs are in the staging directory (marked INCOMPLETE); the stores are scratch.
                shutil.rmtree(self.work, ignore_errors=True)
            outcome = "interrupted" if isinstance(e, KeyboardInterrupt) else "failed"
            self.log(f"run {outcome}; what it wrote so far is in {staging.path} (marked INCOMPLETE)")
            raise
        # The data is in. The brokers stop (a JVM takes seconds to exit) and their logs are copied while the
        # events are merged and summarised; a broker that will not stop or a log that cannot be copied must
        # not lose the archive.
        faults.release()  # as on failure: no fault starts a process once the brokers stop
        stopping = threading.Thread(target=self._stop_servers, args=(backend, staging), name="stop-servers")
        stopping.start()
        try:
            records = [r.as_dict() for r in faults.records]
            for variant, shard_dir in fleet.shard_dirs.items():
                rows = [r.event() for r in faults.records if r.variant == variant]
                if rows:
                    log = EventLog(shard_dir, HARNESS_WORKER, self._event_common(variant))
                    for row in rows:
                        log.record("fault", **row)
                    log.close()
            checked, missing = event_check(fleet.shard_dirs)
            summary, unfit = self._summarize(staging, fleet.shard_dirs, records)
            versions = {v.name: v.version for v in self.variants}
            for row in summary:  # a hybrid release says so in every table of its runs
                row["hybrid"] = hybrid_note(versions.get(row["variant"]), modules.get(row["variant"]))
                row["offsets"] = offsets.get(row["variant"])
        finally:
            stopping.join()
        archive = staging.commit(manifest.build(
            run_id=self.run_id, scenario=self.scenario, variants=self.variants, endpoints=endpoints,
            broker_configs=configs, agent_reports=agents, clock_offsets=clocks, ignored_settings=ignored,
            digests=manifest.agent_digests(self.variants), host=manifest.host_info(),
            harness_git_sha=manifest.git_sha(), started=started, ended=dt.datetime.now(dt.UTC),
            duration_s=time.monotonic() - t0, summary=summary, probes=probes,
            prometheus={"scrape_interval_s": SCRAPE_INTERVAL_S, "series": exported,
                        "observer_effect": self.scenario.observer_effect},
            faults=records,
            events_check={"workers": checked, "problems": missing},
            variant_order=self.order,
            modules=modules,
            external={name: ext.report(name) for name in ext.variants} if (ext := _external_of(backend)) else {},
            ui=self.ui,
            grpc_client=self.grpc_client,
        ))
        shutil.rmtree(self.work, ignore_errors=True)
        archive = outbox.deliver(archive, self.bucket, self.log)
        if missing:
            raise HarnessError(f"{len(missing)} worker(s) lost events on their way to the archive, e.g. {missing[0]} "
                               f"(the archive {archive} records them; its figures miss what was lost)")
        if faults.failed:
            first = faults.failed[0]
            raise HarnessError(f"{len(faults.failed)} fault(s) not carried out as planned, e.g. {first.variant}: "
                               f"{first.label}: {first.error} (the archive {archive} records them)")
        if unfit:
            raise HarnessError(f"{unfit[0]} ({len(unfit)} times; the archive is {archive}, "
                               "but its wakeups cannot be trusted)")
        return RunResult(archive, summary, probes, cpu)

    def _stop_servers(self, backend: Backend, staging: ArchiveStaging) -> None:
        for what, step in (("stopping the brokers", backend.down),
                           ("copying server logs", lambda: backend.collect(staging.dir("logs")))):
            try:
                step()
            except Exception as e:  # noqa: BLE001 - reported, and the archive is still written
                self.log(f"warning: {what} failed: {e}")

    def _summarize(self, staging: ArchiveStaging, shard_dirs: dict[str, Path],
                   faults: list[dict]) -> tuple[list[dict], list[str]]:
        """Each variant's events merged into the archive and summarised, one variant at a time (a long run's
        events are the largest thing a run holds); the summary rows, and the client's DriverErrors."""
        sc = self.scenario
        summary, unfit = [], []
        for variant, shard_dir in sorted(shard_dirs.items()):
            acc = SlicesSummary(sc.subscriptions(), sc.allowed_deliveries(), sc.consume.long_poll_s * 1000,
                                [f for f in faults if f["variant"] == variant], sc.late_after_ms)
            # FIFO order is checked over whole message groups: those runs are read again at once. Others are
            # summarised from the slices of messages the merge holds anyway (harness.archive.writer).
            fifo = any(t.message_type == "FIFO" for t in sc.topics)
            path = staging.merge_events(variant, shard_dir, None if fifo else acc.add)
            if path is None:
                continue
            if fifo:
                acc.add(read_events(path))
            summary += acc.result()
            unfit += client_unfit(path)
        return summary, unfit

    def _event_common(self, variant: str) -> dict[str, str]:
        return {"run_id": self.run_id, "variant": variant, "scenario": self.scenario.name, "worker": HARNESS_WORKER,
                "protocol": self.scenario.protocol}

    def _check_settings(self, ep: Endpoints, written: dict[str, str]) -> list[str]:
        """The broker.conf keys a variant's broker does not know (older releases ignore them silently): refused
        when the scenario needs one of them on (its run would measure a build without the feature), else
        logged and kept in the manifest."""
        why = self.scenario.not_applicable(ep.version)  # an external cluster's version is known only now
        if why:
            raise NotApplicable(ep.variant, f"variant {ep.variant}: {why}")
        ignored = readiness.ignored_settings(ep, written) if written else []
        required = self.scenario.required_settings()
        missing = [k for k in ignored if k in required]
        if missing:
            raise readiness.UnknownSetting(
                ep.variant, f"variant {ep.variant} (RocketMQ {ep.version}) does not know {', '.join(missing)}, which "
                f"scenario {self.scenario.name} needs; the run would measure it without: leave the scenario "
                "out for this build")
        if ignored:
            self.log(f"warning: {ep.variant} (RocketMQ {ep.version}) does not know {', '.join(ignored)} from its "
                     "broker.conf and runs without (the manifest keeps them as ignored_settings)")
        return ignored

    def _lag(self, ep: Endpoints) -> dict[str, object] | None:
        """What each group left behind (harness.run.offsets); None, said in the log, where the brokers would not
        tell (a broker a fault left down)."""
        try:
            return offsets.lag(ep, self.scenario)
        except (OSError, remoting.RemotingError) as e:
            self.log(f"{ep.variant}: the groups' lag is unknown: {e}")
            return None

    def _clock_offset(self, ep: Endpoints) -> tuple[float, float]:
        lo, hi = readiness.clock_offset_ms(ep, self.scenario.protocol)
        self.log(f"{ep.variant}: broker clock - load generator clock between {lo:.1f} and {hi:.1f} ms")
        if lo > MAX_CLOCK_OFFSET_MS or hi < -MAX_CLOCK_OFFSET_MS:
            raise HarnessError(f"{ep.variant}: the broker's clock is {lo:.0f}..{hi:.0f} ms off this host's "
                               f"(more than {MAX_CLOCK_OFFSET_MS:.0f} ms): every wakeup would be biased by it; "
                               "synchronise the clocks (NTP) and run again")
        return lo, hi

    def _collect_probes(self, endpoints: Sequence[Endpoints], staging: ArchiveStaging) -> dict[str, list[dict]]:
        """Save each mounted wakeup probe's counters (before the brokers stop) as probe/<variant>.prom (a
        topology's other brokers: probe/<variant>-<broker>.prom); the manifest gets every broker's samples.
        A broker a fault started again counts from its restart."""
        out: dict[str, list[dict]] = {}
        for ep in endpoints:
            for node in ep.brokers:
                if not node.probe:
                    continue
                try:
                    text, samples = read_probe(node.probe)
                except OSError as e:
                    self.log(f"{ep.variant}: wakeup probe of {node.name} at {node.probe} did not answer ({e})")
                    continue
                name = ep.variant if node.name == "broker" else f"{ep.variant}-{node.name}"
                (staging.dir("probe") / f"{name}.prom").write_text(text)
                out.setdefault(ep.variant, []).extend(samples)
        return out
