"""Actions during a run: the scenario's admin requests (harness.inputs.actions) carried out on every variant at the
same moment of its load, over remoting to its brokers and name server, under the run's own names
(Endpoints.physical). Each becomes an ActionRecord per variant: when it was asked and answered, what the brokers
said, or what went wrong (the manifest's ``actions`` and an ``action`` event in the variant's events). An action
not carried out as planned (an error, a cycle that never started) fails the run once it is archived.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field

from harness.client import remoting
from harness.client.remoting_lite import lmq
from harness.contracts.endpoints import Endpoints
from harness.core.errors import HarnessError
from harness.core.waiting import Deadline
from harness.inputs.actions import Action, spelled
from harness.inputs.scenario import Scenario
from harness.run.faults import HARNESS_WORKER, archive_harness_events
from harness.run.hooks import Hook, RunState

# Actions still being carried out when the load ends are waited for this long (an admin request takes < 1 s; a
# broker a fault holds down answers none).
ACTION_FINISH_S = 30.0
EVENTS_STEM = f"{HARNESS_WORKER}-actions"  # its own Parquet parts beside the faults' (harness.run.faults)


@dataclass
class ActionRecord:
    """One action as it went on one variant. Times are wall-clock ns, as the events' (t_client_ns)."""

    variant: str
    label: str
    when: str  # as planned: "at 20 s", "cycle 3 + 2 s"
    started_ns: int | None = None  # the first request was sent
    ended_ns: int | None = None  # the last answer came
    result: str = ""  # what the brokers answered (new offsets, the settings read back)
    error: str | None = None  # what went wrong, if it was not carried out as planned
    at_s: float | None = None  # when it began, seconds after the load started (Locust)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    def event(self) -> dict[str, object]:
        """The `action` event row (harness.contracts.events): started_ns when asked, t_client_ns when answered."""
        detail = f"{self.label}: {self.error or self.result}"
        return {"variant": self.variant, "worker": HARNESS_WORKER, "consumer": HARNESS_WORKER,
                "started_ns": self.started_ns, "t_client_ns": self.ended_ns or self.started_ns or time.time_ns(),
                "detail": detail[:500]}


@dataclass
class GroupState:
    """A group's settings as the run last set them: a change replaces the whole configuration, so what an action
    does not name keeps its value."""

    retry_max_times: int
    fifo: bool
    consume_enabled: bool = True


def _reset_offset(a: Action, ep: Endpoints, scenario: Scenario, now_ms: int) -> str:
    topic = a.topic or next(g.topic for g in scenario.groups if g.name == a.group)
    timestamp = {"earliest": 0, "latest": -1}.get(a.to, now_ms - int((a.ago_s or 0) * 1000))
    lite = scenario.lite_topics(topic)
    if lite:
        return _reset_lite(a, ep, topic, lite, timestamp)
    out = []
    for broker in ep.masters:
        offsets = remoting.reset_offset(broker, ep.physical(a.group), ep.physical(topic), timestamp)
        if not offsets:
            raise HarnessError(f"{broker} reset no queue of {topic} for {a.group}")
        out.append(f"{broker}: " + ", ".join(f"q{q}->{o}" for q, o in sorted(offsets.items())))
    return "; ".join(out)


def _reset_lite(a: Action, ep: Endpoints, parent: str, lite: list[str], timestamp: int) -> str:
    """A LITE parent's reset is each lite topic's: its LMQ's one queue, on the master that holds it (a lite topic
    no master has stored anything for is not one the group can have consumed)."""
    out = []
    for name in lite:
        done = []
        for broker in ep.masters:
            try:
                offsets = remoting.reset_offset(broker, ep.physical(a.group), lmq(ep.physical(parent), name),
                                                timestamp, queue_id=0)
            except remoting.RemotingError:
                continue  # not this master's
            done += [f"{name}->{o}" for o in offsets.values()]
        if not done:
            raise HarnessError(f"no master reset lite topic {name} of {parent} for {a.group}")
        out += done
    return ", ".join(out)


def _broker_config(a: Action, ep: Endpoints) -> str:
    for node in ep.brokers:
        known = remoting.broker_settings(node.address)
        unknown = sorted(k for k in a.set if k not in known)
        if unknown:
            # The broker would take the key and ignore it: a change that does nothing must not read as done.
            raise HarnessError(f"{node.name} ({node.address}) has no setting {', '.join(unknown)}")
        remoting.update_broker_config(node.address, dict(a.set))
        now = remoting.broker_settings(node.address)
        kept = {k: now.get(k) for k, v in a.set.items() if now.get(k) != spelled(v)}
        if kept:
            raise HarnessError(f"{node.name} ({node.address}) did not take {kept} (read back after the change)")
    return f"{len(ep.brokers)} broker(s) read back " + ", ".join(f"{k}={spelled(v)}" for k, v in a.set.items())


def _group_config(a: Action, ep: Endpoints, state: GroupState) -> str:
    for name in ("retry_max_times", "fifo", "consume_enabled"):
        if getattr(a, name) is not None:
            setattr(state, name, getattr(a, name))
    for broker in ep.masters:
        remoting.create_group(broker, ep.physical(a.group), retry_max_times=state.retry_max_times,
                              orderly=state.fifo, consume_enable=state.consume_enabled)
    return f"{len(ep.masters)} master(s): {asdict(state)}"


def _topic_queues(a: Action, ep: Endpoints, scenario: Scenario) -> str:
    kind = next(t.message_type for t in scenario.topics if t.name == a.topic)
    for broker in ep.masters:
        remoting.create_topic(broker, ep.physical(a.topic), queues=a.queues, message_type=kind)
    return f"{len(ep.masters)} master(s): {a.queues} queues"


def _delete_topic(a: Action, ep: Endpoints) -> str:
    for broker in ep.masters:
        remoting.delete_topic(broker, ep.physical(a.topic))
    remoting.delete_topic_in_namesrv(ep.namesrv, ep.physical(a.topic))
    return f"deleted on {len(ep.masters)} master(s) and the name server"


@dataclass
class VariantActions:
    """One variant's actions: what it needs to carry them out, and its groups as the run last set them."""

    endpoints: Endpoints
    scenario: Scenario
    groups: dict[str, GroupState] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)  # one action of a variant at a time

    def __post_init__(self) -> None:
        self.groups = {g.name: GroupState(g.retry_max_times, g.fifo) for g in self.scenario.groups}

    def carry_out(self, a: Action) -> str:
        ep = self.endpoints
        with self.lock:
            if a.do == "reset_offset":
                return _reset_offset(a, ep, self.scenario, int(time.time() * 1000))
            if a.do == "broker_config":
                return _broker_config(a, ep)
            if a.do == "group_config":
                return _group_config(a, ep, self.groups[a.group])
            if a.do == "topic_queues":
                return _topic_queues(a, ep, self.scenario)
            return _delete_topic(a, ep)


class Actions(Hook):
    """The scenario's actions as a part of the run: timed from each variant's first sends (at_s; the faults' clock)
    or its cycle starts (at_cycle), no new one once the load ended; records into the manifest and the events; a run
    with one not carried out as planned fails once it is archived."""

    def __init__(self) -> None:
        self.records: list[ActionRecord] = []
        self._variants: dict[str, VariantActions] = {}
        self._threads: list[threading.Thread] = []
        self._closing = threading.Event()
        self._t0 = 0.0
        self._pending: dict[tuple[str, int], ActionRecord] = {}  # (variant, action index) -> not yet begun
        self._guard = threading.Lock()

    def brokers_up(self, run: RunState) -> None:
        self._variants = {ep.variant: VariantActions(ep, run.scenario) for ep in run.endpoints}
        for v in self._variants:
            for i, a in enumerate(run.scenario.actions):
                record = ActionRecord(v, a.label, a.when)
                self.records.append(record)
                self._pending[(v, i)] = record

    def load_started(self, run: RunState) -> None:
        self._t0 = time.monotonic()

    def sending_started(self, run: RunState, variant: str, since: float) -> None:
        for i, a in enumerate(run.scenario.actions):
            if a.at_s is not None and variant in self._variants:
                self._start(run, variant, i, a, delay_s=a.at_s, since=since)

    def cycle_started(self, run: RunState, variant: str, cycle: int) -> None:
        for i, a in enumerate(run.scenario.actions):
            if a.at_cycle == cycle and variant in self._variants:
                self._start(run, variant, i, a, delay_s=a.after_s, since=time.monotonic())

    def _start(self, run: RunState, variant: str, i: int, a: Action, delay_s: float,
               since: float | None = None) -> None:
        t = threading.Thread(target=self._run, args=(run, variant, i, a, (since or self._t0) + delay_s),
                             name=f"action-{variant}-{i}", daemon=True)
        self._threads.append(t)
        t.start()

    def _run(self, run: RunState, variant: str, i: int, a: Action, due: float) -> None:
        if self._closing.wait(max(0.0, due - time.monotonic())):
            return  # the load ended first: load_ended says so in the record
        with self._guard:
            record = self._pending.pop((variant, i), None)
        if record is None:
            return
        record.at_s = round(time.monotonic() - self._t0, 3)
        record.started_ns = time.time_ns()
        try:
            record.result = self._variants[variant].carry_out(a)
        except (OSError, remoting.RemotingError, HarnessError) as e:
            record.error = f"{type(e).__name__}: {e}"
        record.ended_ns = time.time_ns()
        outcome = f"failed: {record.error}" if record.error else record.result
        run.log(f"{variant}: action {a.label} ({a.when}) at {record.at_s:.1f} s: {outcome}")

    def load_ended(self, run: RunState) -> None:
        self._closing.set()
        deadline = Deadline(ACTION_FINISH_S)
        for t in self._threads:
            t.join(deadline.left())
        with self._guard:
            for record in self._pending.values():
                record.error = f"not carried out: its moment ({record.when}) did not come while the load ran"
            self._pending.clear()

    def failed(self, run: RunState, error: BaseException) -> None:
        self._closing.set()

    def archive(self, run: RunState) -> None:
        run.record.actions = [r.as_dict() for r in self.records]
        archive_harness_events(run, EVENTS_STEM, "action", [r.event() for r in self.records])

    @property
    def failed_records(self) -> list[ActionRecord]:
        return [r for r in self.records if r.error]

    def finished(self, run: RunState) -> None:
        failed = self.failed_records
        if failed:
            first = failed[0]
            raise HarnessError(f"{len(failed)} action(s) not carried out as planned, e.g. {first.variant}: "
                               f"{first.label} ({first.when}): {first.error} (the archive {run.archive} records them)")

