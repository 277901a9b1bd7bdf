"""One harness run, as a sequence of phases: variants up, the workers planned, Locust started against every variant
at once, the load followed to its end, the brokers stopped while the events are archived, the record written as the
archive's manifest. What happens at each phase is a hook (harness.run.hooks; the standard ones:
harness.run.standard); everything a phase needs comes from the Site (local or in a cluster), which this module
never looks into. Variants run side by side in the same time window, so machine noise hits them alike.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.archive import manifest
from harness.archive.writer import ArchiveStaging
from harness.contracts.options import DEFAULTS, RunOptions
from harness.contracts.record import RunRecord
from harness.contracts.workers import DEFAULT_GRPC_CLIENT
from harness.core.errors import HarnessError
from harness.inputs.scenario import Scenario
from harness.inputs.variants import Variant
from harness.measure.enrich import enrich
from harness.run import outbox, plan
from harness.run.events import archive_events
from harness.run.hooks import Hook, Hooks, Log, RunState
from harness.run.site import SiteFactory, local_site, with_external
from harness.run.standard import standard_hooks
from harness.workload.fleet import GRACE_S, LocustFleet, ProcessWorkers, Progress

__all__ = ["GRACE_S", "Progress", "Run", "RunResult"]


@dataclass
class RunResult:
    record: RunRecord
    archive: Path | str  # a local directory, or its URI once uploaded (harness.archive.store)
    cpu: dict = field(default_factory=dict)  # what the run's processes on this machine took (harness.run.cpu)

    @property
    def summary(self) -> list[dict]:
        """The run's rows per variant as every report shows them (harness.measure.enrich)."""
        return enrich(self.record.summary, [self.record])

    @property
    def probes(self) -> dict[str, list[dict]]:
        return self.record.probe


class Run:
    """``hooks``: the caller's own, after the standard ones (a progress display, a test's probe of the phases)."""

    def __init__(self, variants: Sequence[Variant], scenario: Scenario, runs_dir: Path | str,
                 options: RunOptions = DEFAULTS, log: Log = print, hooks: Sequence[Hook] = (),
                 site: SiteFactory = local_site, run_id: str | None = None) -> None:
        options = plan.options_for(scenario, options, log)
        plan.check(variants, scenario, options)
        self.scenario, self.options, self.log, self.hooks, self.site = scenario, options, log, list(hooks), site
        self.variants = plan.as_run(variants, scenario, options)
        self.order = plan.variant_order(self.variants, options.order)
        self.run_id = run_id or plan.new_run_id(scenario.name)
        # Archives bound for object storage are written here first, then uploaded (harness.archive.store);
        # a bucket that is missing or refuses the credentials is said now, before anything starts.
        self.bucket = outbox.bucket_of(runs_dir, [self.run_id])
        self.runs_dir = outbox.local_dir(runs_dir).expanduser().resolve()
        self.work = self.runs_dir / ".work" / self.run_id

    def execute(self) -> RunResult:
        # External clusters are inspected before anything is written or started (a refusal leaves nothing).
        site = with_external(self.site(self.work, self.log), self.variants, self.scenario, self.run_id, self.log,
                             self.options.keep_resources)
        up = sorted(self.variants, key=lambda v: self.order["names"].index(v.name))
        run = RunState(self.run_id, self.scenario, up, self.options, site, ArchiveStaging(self.runs_dir, self.run_id),
                       manifest.begin(self.run_id, self.scenario, self.variants, self.options, self.order), self.log)
        hooks = Hooks([*standard_hooks(run), *self.hooks])
        try:
            self.log(f"variants in {self.order['how']} order: {', '.join(self.order['names'])}")
            run.endpoints = run.backend.up(up, self.scenario.topology)
            hooks.brokers_up(run)
            run.fleet = self._fleet(run)
            hooks.ready(run)
            run.fleet.start()
            hooks.load_started(run)
            run.fleet.wait(lambda elapsed, progress: hooks.tick(run, elapsed, progress))
            hooks.load_ended(run)
        except BaseException as e:
            self._abandon(run, hooks, e)
            raise
        # The data is in. The brokers stop (a JVM takes seconds to exit) and their logs are copied while the
        # events are merged and summarised; a broker that will not stop or a log that cannot be copied must
        # not lose the archive.
        stopping = threading.Thread(target=self._stop_servers, args=(run,), name="stop-servers")
        stopping.start()
        try:
            hooks.archive(run)
            missing, unfit = archive_events(run)
        finally:
            stopping.join()
        hooks.brokers_down(run)
        run.archive = outbox.deliver(run.staging.commit(manifest.build(run.record)), self.bucket, self.log)
        shutil.rmtree(self.work, ignore_errors=True)
        if missing:
            raise HarnessError(f"{len(missing)} worker(s) lost events on their way to the archive, e.g. {missing[0]} "
                               f"(the archive {run.archive} records them; its figures miss what was lost)")
        hooks.finished(run)
        if unfit:
            raise HarnessError(f"{unfit[0]} ({len(unfit)} times; the archive is {run.archive}, "
                               "but its wakeups cannot be trusted)")
        return RunResult(run.record, run.archive, run.cpu)

    def _fleet(self, run: RunState) -> LocustFleet:
        """Every variant's Locust master and workers, planned (where each serves its metrics), not started."""
        site = run.site
        workers = site.workers or ProcessWorkers(site.bind_host, site.advertise_host, site.worker_port)
        fleet = LocustFleet(self.run_id, self.scenario, run.endpoints, self.work, run.staging.dir, workers,
                            log=self.log, grpc_client=self.options.grpc_client)
        if run.record.grpc_client and run.record.grpc_client != DEFAULT_GRPC_CLIENT:
            self.log(f"gRPC client: {self.options.grpc_client} (the manifest records it)")
        fleet.prepare()
        return fleet

    def _abandon(self, run: RunState, hooks: Hooks, error: BaseException) -> None:
        """The run failed or was interrupted before its archive: everything it started is stopped and the logs
        kept in the staging directory (marked INCOMPLETE)."""
        if run.fleet is not None:
            run.fleet.stop()
        hooks.failed(run, error)
        run.backend.down()
        run.backend.collect(run.staging.dir("logs"))
        if isinstance(error, KeyboardInterrupt):
            shutil.rmtree(self.work, ignore_errors=True)  # the stores are scratch
        outcome = "interrupted" if isinstance(error, KeyboardInterrupt) else "failed"
        self.log(f"run {outcome}; what it wrote so far is in {run.staging.path} (marked INCOMPLETE)")

    def _stop_servers(self, run: RunState) -> None:
        for what, step in (("stopping the brokers", run.backend.down),
                           ("copying server logs", lambda: run.backend.collect(run.staging.dir("logs")))):
            try:
                step()
            except Exception as e:  # noqa: BLE001 - reported, and the archive is still written
                self.log(f"warning: {what} failed: {e}")
