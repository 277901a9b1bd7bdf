"""The phases of a run, and the hooks that act at them: one typed method a phase (Locust's event catalogue, as
methods of one class). The run (harness.run.sequence) is the sequence of phases and nothing else; what happens
at each (faults, CPU sampling, Prometheus, probes, offsets, the UI, the brokers' facts, a campaign's or a test's
own) is a hook, given the run's ``RunState``. A new hook overrides the phases it needs and touches no other.

Phases, in order:
  brokers_up      every variant serves (``run.endpoints``); nothing created yet
  ready           the workers are planned (``run.fleet``, not started); topics and groups are created here
  load_started    Locust runs for every variant
  tick            about once a second while the load runs, with each variant's live counts
  sending_started a variant's producers began sending: its first cycle started (seen on the workers' metrics,
                  within a second or so; Locust's users may start seconds after Locust on a busy machine), or,
                  when its workers' metrics never answered, the planned start (load start + produce.delay_s),
                  said in the log. ``since`` is that moment (time.monotonic()); what a scenario times "at_s"
                  counts from it
  cycle_started   a variant's producers started a cycle (seen on the workers' metrics: within a second or so)
  drain_started   a variant's producers all entered their drain phase (nothing new is sent): seen on the
                  workers' metrics, or at the latest when the load ends (a drain shorter than a scrape)
  load_ended      every Locust process exited; the brokers still serve
  archive         the brokers are stopping; write into the archive's staging directory and the record
  brokers_down    the brokers are down; the last facts into the record
  finished        the archive is written (``run.archive``): raise what makes the run fail
  failed          instead of the rest, when the run fails or is interrupted before its archive: stop what
                  the hook started (hooks in reverse order; one that raises is logged and the others go on)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.archive.writer import ArchiveStaging
from harness.contracts.endpoints import Endpoints
from harness.contracts.options import RunOptions
from harness.contracts.record import RunRecord
from harness.deploy.base import Backend
from harness.inputs.scenario import Scenario
from harness.inputs.variants import Variant
from harness.run.site import Site
from harness.workload.fleet import METRICS_SILENT_S, LocustFleet, Progress

Log = Callable[[str], None]


@dataclass
class RunState:
    """One run as its hooks see it (Locust's Environment): what it runs, where, and what it found so far."""

    run_id: str
    scenario: Scenario
    variants: list[Variant]  # as run: the scenario's settings, plants and the probe applied, in the order up
    options: RunOptions
    site: Site
    staging: ArchiveStaging
    record: RunRecord  # filled as the run goes; the archive's manifest at the end
    log: Log
    endpoints: list[Endpoints] = field(default_factory=list)
    fleet: LocustFleet | None = None
    cpu: dict = field(default_factory=dict)  # what the run's processes took of the CPU (harness.run.cpu)
    archive: Path | str | None = None  # once written (a URI once uploaded)

    @property
    def backend(self) -> Backend:
        return self.site.backend


class Hook:
    """A part of a run that acts at some of its phases (the module docstring lists them); every phase is a no-op
    here, so a hook overrides only the ones it needs."""

    def brokers_up(self, run: RunState) -> None: ...

    def ready(self, run: RunState) -> None: ...

    def load_started(self, run: RunState) -> None: ...

    def tick(self, run: RunState, elapsed_s: float, progress: dict[str, Progress]) -> None: ...

    def sending_started(self, run: RunState, variant: str, since: float) -> None: ...

    def cycle_started(self, run: RunState, variant: str, cycle: int) -> None: ...

    def drain_started(self, run: RunState, variant: str) -> None: ...

    def load_ended(self, run: RunState) -> None: ...

    def archive(self, run: RunState) -> None: ...

    def brokers_down(self, run: RunState) -> None: ...

    def finished(self, run: RunState) -> None: ...

    def failed(self, run: RunState, error: BaseException) -> None: ...


class Hooks(Hook):
    """Every hook of a run, called in the order given (``failed`` in reverse). Cycles and drains are read off
    the ticks' counts: a variant's newest cycle going up fires ``cycle_started`` for each cycle it passed, its
    producers still sending dropping to none fires ``drain_started`` once (a drain no tick saw: when the load
    ends, before ``load_ended``)."""

    def __init__(self, hooks: Sequence[Hook]) -> None:
        self.hooks = list(hooks)
        self._cycle: dict[str, int] = {}
        self._draining: set[str] = set()
        self._sending: set[str] = set()
        self._load_started = 0.0

    def _each(self, phase: str, *args: object) -> None:
        for hook in self.hooks:
            getattr(hook, phase)(*args)

    def brokers_up(self, run: RunState) -> None:
        self._each("brokers_up", run)

    def ready(self, run: RunState) -> None:
        self._each("ready", run)

    def load_started(self, run: RunState) -> None:
        self._load_started = time.monotonic()
        self._each("load_started", run)

    def tick(self, run: RunState, elapsed_s: float, progress: dict[str, Progress]) -> None:
        self._each("tick", run, elapsed_s, progress)
        for variant, p in progress.items():
            last = self._cycle.get(variant, -1)
            if p.cycle is not None and p.cycle > last:
                self._cycle[variant] = p.cycle
                if variant not in self._sending:
                    self._sending.add(variant)
                    self.sending_started(run, variant, time.monotonic())
                for k in range(last + 1, p.cycle + 1):
                    self.cycle_started(run, variant, k)
            if p.sending == 0 and variant in self._cycle and variant not in self._draining:
                self._draining.add(variant)
                self.drain_started(run, variant)
        if elapsed_s >= METRICS_SILENT_S:
            for ep in run.endpoints:
                if ep.variant not in progress and ep.variant not in self._sending:
                    self._sending.add(ep.variant)
                    run.log(f"{ep.variant}: no live progress from its workers; what the scenario times from its "
                            "first sends counts from the load's start + produce.delay_s")
                    self.sending_started(run, ep.variant, self._load_started + run.scenario.produce.delay_s)

    def sending_started(self, run: RunState, variant: str, since: float) -> None:
        self._each("sending_started", run, variant, since)

    def cycle_started(self, run: RunState, variant: str, cycle: int) -> None:
        self._each("cycle_started", run, variant, cycle)

    def drain_started(self, run: RunState, variant: str) -> None:
        self._each("drain_started", run, variant)

    def load_ended(self, run: RunState) -> None:
        for ep in run.endpoints:
            if ep.variant not in self._draining:
                self._draining.add(ep.variant)
                self.drain_started(run, ep.variant)
        self._each("load_ended", run)

    def archive(self, run: RunState) -> None:
        self._each("archive", run)

    def brokers_down(self, run: RunState) -> None:
        self._each("brokers_down", run)

    def finished(self, run: RunState) -> None:
        self._each("finished", run)

    def failed(self, run: RunState, error: BaseException) -> None:
        for hook in reversed(self.hooks):
            try:
                hook.failed(run, error)
            except Exception as e:  # noqa: BLE001 - the others still stop what they started
                run.log(f"warning: stopping {type(hook).__name__} failed: {e}")
