"""Hooks read cycles and drains off the ticks' live counts: every variant's, whatever order they come in, and
ticks without any counts (workers whose metrics never answer) are no error."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from harness.run.hooks import Hook, Hooks
from harness.workload.fleet import METRICS_SILENT_S, Progress

pytestmark = pytest.mark.unit


class Seen(Hook):
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def sending_started(self, run, variant, since) -> None:
        self.calls.append(("sending", variant))

    def cycle_started(self, run, variant, cycle) -> None:
        self.calls.append(("cycle", variant, cycle))

    def drain_started(self, run, variant) -> None:
        self.calls.append(("drain", variant))


def _run(*variants: str) -> SimpleNamespace:
    logged: list[str] = []
    return SimpleNamespace(endpoints=[SimpleNamespace(variant=v) for v in variants], log=logged.append,
                           logged=logged, scenario=SimpleNamespace(produce=SimpleNamespace(delay_s=2.0)))


def test_every_variant_drains_when_its_producers_stop_not_only_the_last_one_ticked():
    seen, run = Seen(), _run("a", "b")
    hooks = Hooks([seen])
    hooks.tick(run, 1.0, {"a": Progress(cycle=0, sending=2), "b": Progress(cycle=0, sending=2)})
    hooks.tick(run, 2.0, {"a": Progress(cycle=1, sending=0), "b": Progress(cycle=1, sending=2)})
    assert ("drain", "a") in seen.calls and ("drain", "b") not in seen.calls
    hooks.tick(run, 3.0, {"a": Progress(cycle=1, sending=0), "b": Progress(cycle=1, sending=0)})
    assert seen.calls.count(("drain", "a")) == 1 and seen.calls.count(("drain", "b")) == 1
    assert [c for c in seen.calls if c[0] == "cycle"] == [("cycle", "a", 0), ("cycle", "b", 0), ("cycle", "a", 1),
                                                          ("cycle", "b", 1)]


def test_ticks_without_counts_past_the_silence_start_every_variant_by_the_plan_and_say_so():
    seen, run = Seen(), _run("a", "b")
    hooks = Hooks([seen])
    hooks.tick(run, 1.0, {})
    assert seen.calls == []
    hooks.tick(run, METRICS_SILENT_S, {})
    hooks.tick(run, METRICS_SILENT_S + 1, {})
    assert seen.calls == [("sending", "a"), ("sending", "b")]
    assert len(run.logged) == 2 and all("no live progress" in line for line in run.logged)
    hooks.load_ended(run)
    assert seen.calls[2:] == [("drain", "a"), ("drain", "b")]
