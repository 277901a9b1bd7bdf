"""Waiting for something to be so: one loop for every wait of the harness (a server to listen, a pod to be
ready, Prometheus to scrape), whose error names what was awaited, how long, and the last state seen."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from harness.core.errors import HarnessError

T = TypeVar("T")


@dataclass(frozen=True)
class Pending:
    """What a probe returns while the awaited thing is not so yet: the state it saw, for the error."""

    state: str = ""


class Deadline:
    """A point in time.monotonic(): several waits of one start-up share it."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.at = time.monotonic() + timeout_s

    def left(self) -> float:
        return max(0.0, self.at - time.monotonic())

    def passed(self) -> bool:
        return time.monotonic() >= self.at


def wait_until(what: str, probe: Callable[[], T | Pending], timeout_s: float | Deadline, interval_s: float = 1.0,
               alive: Callable[[], None] | None = None, detail: Callable[[], str] | None = None,
               sleep: Callable[[float], object] = time.sleep) -> T:
    """Call ``probe`` every ``interval_s`` until it returns anything but a Pending, and return that.

    ``what`` is what is awaited ("unpatched's broker pod to be ready"); ``alive``, asked while it is not so
    yet, raises when the thing awaited died meanwhile (its process exited), so nobody waits out the timeout for
    it; ``detail`` gives the lines (a log tail) the error carries. Past the deadline: HarnessError "waited N s
    for WHAT; last seen: STATE".
    """
    deadline = timeout_s if isinstance(timeout_s, Deadline) else Deadline(timeout_s)
    last = Pending("nothing yet")
    while True:
        got = probe()
        if not isinstance(got, Pending):
            return got
        last = got
        # Only what is not there yet can have died on the way (a process that serves is alive).
        if alive is not None:
            alive()
        if deadline.passed():
            seen = f"; last seen: {last.state}" if last.state else ""
            raise HarnessError(f"waited {deadline.timeout_s:.0f} s for {what}{seen}",
                               detail=detail() if detail else "")
        sleep(min(interval_s, max(deadline.left(), 0.01)))
