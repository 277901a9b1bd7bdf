"""Faults during a run: each of the scenario's faults is injected into every variant at the same moment of
the load, through the backend's ServerProcess (harness.deploy.base), and what happened is kept as a
FaultRecord per variant: which process it hit, when, and when its target was back (the manifest's
``faults`` and a ``fault`` event in the variant's events).

Each (variant, target) has a thread of its own that runs that target's faults in order, so faults on
different processes may overlap while one process never gets a second fault before it is back. (A process
a fault starts again still dies with the harness: harness.core.process.spawn starts it from a thread that lives
as long as the harness.)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

from harness.contracts.events import EventLog
from harness.core.errors import ConfigError, HarnessError
from harness.core.waiting import Deadline
from harness.deploy.base import Backend, ServerProcess
from harness.inputs.brokers import Fault
from harness.run.hooks import Hook, RunState

HARNESS_WORKER = "harness"  # the `worker` of the events the harness itself records
# A fault still in progress when the load ends (a broker starting again) is waited for this long.
FAULT_FINISH_S = 300.0


@dataclass
class FaultRecord:
    """One fault as it happened to one variant. Times are wall-clock ns, as the events' (t_client_ns)."""

    variant: str
    action: str
    target: str
    at_s: float  # as planned, seconds after the load started
    duration_s: float | None
    process: str = ""  # which process it hit (its PID or pod), as it was then
    started_ns: int | None = None  # the signal was sent
    ended_ns: int | None = None  # the target served again (kill9, restart) or was resumed (sigstop)
    back: str = ""  # the process that serves after it (a new PID after kill9 or restart)
    error: str | None = None  # what went wrong, if it could not be carried out as planned
    delay_s: float = 0.0  # how late it started against the plan (a previous fault on the target took longer)

    @property
    def label(self) -> str:
        return f"{self.action} {self.target}" + (f" {self.duration_s:g} s" if self.duration_s else "")

    @property
    def window_s(self) -> float | None:
        """How long the target was away (signal to back), when it came back."""
        if self.started_ns is None or self.ended_ns is None:
            return None
        return (self.ended_ns - self.started_ns) / 1e9

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "label": self.label, "window_s": self.window_s}

    def event(self) -> dict[str, object]:
        """The `fault` event row (harness.contracts.events): started_ns when injected, t_client_ns when back."""
        detail = f"{self.label}: {self.process}" + (f" -> {self.back}" if self.back else "")
        if self.error:
            detail += f"; error: {self.error}"
        return {"variant": self.variant, "worker": HARNESS_WORKER, "consumer": HARNESS_WORKER,
                "started_ns": self.started_ns, "t_client_ns": self.ended_ns or self.started_ns or time.time_ns(),
                "detail": detail[:500]}


def carry_out(proc: ServerProcess, fault: Fault, record: FaultRecord,
              sleep: Callable[[float], None] = time.sleep) -> None:
    """Carry out ``fault`` on ``proc``, filling ``record``'s times."""
    record.process = proc.describe()
    record.started_ns = time.time_ns()
    if fault.action == "sigstop":
        proc.pause()
        sleep(fault.hold_s)
        proc.resume()
        record.ended_ns = time.time_ns()
        return
    if fault.action == "kill9":
        proc.kill()
        sleep(fault.hold_s)
    else:
        proc.terminate()
    proc.start()
    record.ended_ns = time.time_ns()
    record.back = proc.describe()


@dataclass
class Injector:
    """The scenario's faults for the variants of one run."""

    backend: Backend
    variants: Sequence[str]
    faults: Sequence[Fault]
    log: Callable[[str], None] = print
    records: list[FaultRecord] = field(default_factory=list)
    _threads: list[threading.Thread] = field(default_factory=list)
    _closing: threading.Event = field(default_factory=threading.Event)  # the load ended: no new faults
    _done: dict[str, threading.Event] = field(default_factory=dict)
    _processes: dict[tuple[str, str], ServerProcess] = field(default_factory=dict)
    started: set[str] = field(default_factory=set)  # variants whose faults are timed (their sends began)

    def prepare(self) -> None:
        """Find every target before the load starts, so a backend that cannot inject says so at once."""
        for v in self.variants:
            for f in self.faults:
                if (v, f.target) not in self._processes:
                    self._processes[(v, f.target)] = self.backend.process(v, f.target)
                if f.action == "kill9" and f.hold_s and not self._processes[(v, f.target)].holds_down:
                    raise ConfigError(f"fault {f.label}: this backend's supervisor starts a killed {f.target} again "
                                      "at once, so it cannot stay down for duration_s; drop duration_s")

    def start(self, variants: Sequence[str] | None = None, since: float | None = None) -> None:
        """Call when ``variants``' (default: all) producers start sending: their faults' at_s count from now (or
        from ``since``, a time.monotonic() in the past)."""
        if not self._processes:
            self.prepare()
        t0 = time.monotonic() if since is None else since
        for v in self.variants if variants is None else variants:
            if v in self.started:
                continue
            self.started.add(v)
            for target in dict.fromkeys(f.target for f in self.faults):
                mine = sorted((f for f in self.faults if f.target == target), key=lambda f: f.at_s)
                key = f"{v}/{target}"
                self._done[key] = threading.Event()
                t = threading.Thread(target=self._run, args=(v, target, mine, t0, self._done[key]),
                                     name=f"fault-{key}", daemon=True)
                self._threads.append(t)
                t.start()

    def _run(self, variant: str, target: str, faults: list[Fault], t0: float, done: threading.Event) -> None:
        proc = self._processes[(variant, target)]
        try:
            for f in faults:
                record = FaultRecord(variant, f.action, f.target, f.at_s, f.duration_s)
                self.records.append(record)
                if self._closing.wait(max(0.0, t0 + f.at_s - time.monotonic())):
                    record.error = "not injected: the load ended first"
                    continue
                record.delay_s = round(max(0.0, time.monotonic() - t0 - f.at_s), 3)
                self.log(f"{variant}: fault {f.label} on {proc.describe()} at {time.monotonic() - t0:.1f} s")
                try:
                    carry_out(proc, f, record)
                except Exception as e:  # noqa: BLE001 - what went wrong is the record's, and the run goes on
                    record.error = f"{type(e).__name__}: {e}"
                    self.log(f"{variant}: fault {f.label} failed: {record.error}")
                    continue
                self.log(f"{variant}: {f.target} back after {record.window_s:.1f} s ({record.back or proc.describe()})")
        finally:
            done.set()

    def finish(self, timeout_s: float) -> None:
        """The load ended: faults not begun are not injected; wait (up to ``timeout_s``) for those in progress."""
        self._closing.set()
        for v in self.variants:
            if v not in self.started:  # its producers never sent: nothing to time its faults from
                self.records += [FaultRecord(v, f.action, f.target, f.at_s, f.duration_s,
                                             error="not injected: the variant's producers never started sending")
                                 for f in self.faults]
        deadline = Deadline(timeout_s)
        for key, done in self._done.items():
            if not done.wait(deadline.left()):
                self.log(f"fault on {key} still in progress after the load ended; not waited for")

    def release(self) -> None:
        """The run is over (interrupted, or its brokers are down): no fault starts any more."""
        self._closing.set()
        for t in self._threads:
            t.join(timeout=5)

    @property
    def failed(self) -> list[FaultRecord]:
        return [r for r in self.records if r.error]


def archive_harness_events(run: RunState, stem: str, kind: str, rows: Sequence[dict[str, object]]) -> None:
    """The harness's own events of ``kind`` (each row names its variant) into each variant's shards, as parts named
    ``stem`` (a sealed log of their own: harness.archive.writer checks each stem's count)."""
    for variant, shard_dir in run.fleet.shard_dirs.items():
        mine = [r for r in rows if r["variant"] == variant]
        if mine:
            log = EventLog(shard_dir, stem, {"run_id": run.run_id, "variant": variant, "scenario": run.scenario.name,
                                             "worker": HARNESS_WORKER, "protocol": run.scenario.protocol})
            for row in mine:
                log.record(kind, **row)
            log.close()


class Faults(Hook):
    """The scenario's faults as a part of the run: their targets found once the brokers are up, timed per variant
    from its producers' first sends (sending_started: Locust's users may start seconds after Locust under load, and a
    fault timed from Locust's start once stopped a broker before the first message), finished (and no more
    started) when the load ends; each becomes a ``fault`` event in its variant's
    events and a record in the manifest; a fault not carried out as planned fails the run once it is archived."""

    def __init__(self) -> None:
        self.injector: Injector | None = None

    def brokers_up(self, run: RunState) -> None:
        self.injector = Injector(run.backend, [v.name for v in run.variants], run.scenario.faults, run.log)
        self.injector.prepare()

    def sending_started(self, run: RunState, variant: str, since: float) -> None:
        self.injector.start([variant], since=since)

    def load_ended(self, run: RunState) -> None:
        self.injector.finish(timeout_s=FAULT_FINISH_S)
        self.injector.release()  # no fault starts a process once the brokers stop

    def failed(self, run: RunState, error: BaseException) -> None:
        if self.injector is not None:
            self.injector.release()  # a process a fault is starting now is in the state `down` reads

    def archive(self, run: RunState) -> None:
        records = self.injector.records
        run.record.faults = [r.as_dict() for r in records]
        archive_harness_events(run, HARNESS_WORKER, "fault", [r.event() for r in records])

    def finished(self, run: RunState) -> None:
        failed = self.injector.failed
        if failed:
            first = failed[0]
            raise HarnessError(f"{len(failed)} fault(s) not carried out as planned, e.g. {first.variant}: "
                               f"{first.label}: {first.error} (the archive {run.archive} records them)")
