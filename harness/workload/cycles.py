"""Cycles across the Locust processes of one variant: producers run them, consumers report final acks,
the master decides when a cycle has drained and when the run is done.

The reports ride Locust's own master/worker channel (``runner.send_message`` / ``register_message``), so
a cycle drains the same way whether its consumers share the producer's worker or not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import gevent
import gevent.event

SENT = "rmq_cycle_sent"  # worker -> master: {"cycle": k, "owed": {group: [ledger ids sent that it is owed]}}
FINAL = "rmq_cycle_final"  # worker -> master: {"cycle": k, "group": g, "ids": [ledger ids acked for good]}
DRAINED = "rmq_cycle_drained"  # master -> workers: {"cycle": k}
ALL_SENT = "rmq_cycle_all_sent"  # master -> workers: {"cycle": k} every producer reported its sends of cycle k
SENDS_OVER = "rmq_cycle_sends_over"  # worker -> master: {"last": k} a producer reported its last cycle, k
DONE = "rmq_cycles_done"  # worker -> master: a producer ran its last cycle and its drain phase


@dataclass
class CycleBook:
    """The master's ledger of cycles. A cycle has drained when every producer reported its sends and every
    group acked (or saw dead-lettered) every message of it that it is owed (by topic and tag)."""

    groups: Sequence[str]
    producers: int
    _sent: dict[int, dict[str, set[str]]] = field(default_factory=dict)
    _reports: dict[int, int] = field(default_factory=dict)
    _final: dict[int, dict[str, set[str]]] = field(default_factory=dict)
    _announced: set[int] = field(default_factory=set)
    _all_sent: set[int] = field(default_factory=set)  # cycles whose sends every producer reported
    _lasts: list[int] = field(default_factory=list)  # the last cycle of each producer that stopped sending
    _done: int = 0

    def sent(self, cycle: int, owed: Mapping[str, Iterable[str]]) -> list[int]:
        """Record one producer's sends (group -> the ids it is owed); return the cycles that drained by it."""
        for group, ids in owed.items():
            self._sent.setdefault(cycle, {}).setdefault(group, set()).update(ids)
        self._reports[cycle] = self._reports.get(cycle, 0) + 1
        return self._check(cycle)

    def newly_all_sent(self, cycle: int) -> bool:
        """Whether every producer has now reported its sends of ``cycle``, for the first time."""
        if cycle in self._all_sent or self._reports.get(cycle, 0) < self._needed(cycle):
            return False
        self._all_sent.add(cycle)
        return True

    def final(self, cycle: int, group: str, ids: Iterable[str]) -> list[int]:
        if cycle in self._announced:
            return []  # a late ack (a duplicate) of a cycle already drained
        self._final.setdefault(cycle, {}).setdefault(group, set()).update(ids)
        return self._check(cycle)

    def sends_over(self, last: int) -> list[int]:
        """One producer reported its last cycle: later cycles (other producers ran longer) no longer wait
        for its report. Returns the cycles that drained by it."""
        self._lasts.append(last)
        return [c for k in sorted(self._reports) if k > last for c in self._check(k)]

    def _needed(self, cycle: int) -> int:
        return self.producers - sum(1 for last in self._lasts if last < cycle)

    def done(self) -> bool:
        """One producer finished; True when all have (the run can end)."""
        self._done += 1
        return self._done >= self.producers

    def _check(self, cycle: int) -> list[int]:
        if cycle in self._announced or self._reports.get(cycle, 0) < self._needed(cycle):
            return []
        sent = self._sent.get(cycle, {})
        acked = self._final.get(cycle, {})
        if all(sent.get(g, set()) <= acked.get(g, set()) for g in self.groups):
            self._announced.add(cycle)
            # Its ids are no longer needed: a long run's master keeps only the cycles still open.
            self._sent.pop(cycle, None)
            self._final.pop(cycle, None)
            return [cycle]
        return []


def attach_master(runner: object, book: CycleBook) -> None:
    """Let the master's runner keep ``book`` and answer the workers."""
    def announce(cycles: list[int]) -> None:
        for c in cycles:
            runner.send_message(DRAINED, {"cycle": c})

    def on_sent(environment: object, msg: object, **_kw: object) -> None:
        drained = book.sent(msg.data["cycle"], msg.data["owed"])
        if book.newly_all_sent(msg.data["cycle"]):
            runner.send_message(ALL_SENT, {"cycle": msg.data["cycle"]})
        announce(drained)

    def on_final(environment: object, msg: object, **_kw: object) -> None:
        announce(book.final(msg.data["cycle"], msg.data["group"], msg.data["ids"]))

    def on_sends_over(environment: object, msg: object, **_kw: object) -> None:
        announce(book.sends_over(msg.data["last"]))

    def finish() -> None:
        runner.quit()
        # With its web UI (run --ui) a master's main greenlet is the UI's: it ends when the UI stops.
        web_ui = getattr(runner.environment, "web_ui", None)
        if web_ui is not None:
            web_ui.stop()

    def on_done(environment: object, msg: object, **_kw: object) -> None:
        if book.done():
            # Not from inside the handler: quit() kills the greenlet that runs it.
            gevent.spawn_later(0.5, finish)

    runner.register_message(SENT, on_sent)
    runner.register_message(FINAL, on_final)
    runner.register_message(SENDS_OVER, on_sends_over)
    runner.register_message(DONE, on_done)


class DrainSignals:
    """A worker's view: which cycles the master has announced drained, and whose sends it announced complete."""

    def __init__(self) -> None:
        self._events: dict[int, gevent.event.Event] = {}
        self._sent: dict[int, gevent.event.Event] = {}

    def _event(self, cycle: int) -> gevent.event.Event:
        return self._events.setdefault(cycle, gevent.event.Event())

    def on_drained(self, environment: object, msg: object, **_kw: object) -> None:
        self._event(msg.data["cycle"]).set()

    def on_all_sent(self, environment: object, msg: object, **_kw: object) -> None:
        self._sent.setdefault(msg.data["cycle"], gevent.event.Event()).set()

    def wait(self, cycle: int, timeout_s: float) -> bool:
        """True when the cycle drained within ``timeout_s``."""
        return self._event(cycle).wait(timeout_s)

    def wait_sent(self, cycle: int, timeout_s: float) -> bool:
        """True when every producer's sends of the cycle were reported within ``timeout_s``."""
        return self._sent.setdefault(cycle, gevent.event.Event()).wait(timeout_s)

    def attach(self, runner: object) -> None:
        runner.register_message(DRAINED, self.on_drained)
        runner.register_message(ALL_SENT, self.on_all_sent)
