"""The canary's ledger: what a run's ledger says at its end (harness.measure.ledger), said while a load that never
ends goes on, in memory that does not grow with its length.

It holds only the messages still owed: sent and not delivered yet, or nacked and not back yet (and delivered ones
whose ack or nack has not been made). A message is *overdue* once it is later than it should be by more than the
grace (its first delivery ``grace_s`` after its send; a retry ``grace_s`` after the nack's invisible duration ran
out); it stays owed, and comes off the overdue count if it arrives. It is *lost* once it is ``lost_after_s`` past
that point: counted once and forgotten. A cap on the messages held (the oldest goes, counted lost, with its stage)
keeps memory bounded whatever the broker does. Acked messages are remembered for ``lost_after_s`` (a bounded
window) to tell a duplicate from a stranger.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

FIRST, RETRY = "first", "retry"  # the stage a message is owed at: its first delivery, or a retry after a nack
STAGES = (FIRST, RETRY)


@dataclass
class _Owed:
    stage: str
    due_s: float  # when it should be delivered at the latest, before the grace
    overdue: bool = False


@dataclass
class Sweep:
    """What one sweep found: messages overdue now, per stage, and those newly counted lost."""

    overdue: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STAGES, 0))
    lost: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STAGES, 0))


class RollingLedger:
    def __init__(self, grace_s: float, lost_after_s: float, cap: int) -> None:
        if grace_s < 0 or lost_after_s <= 0 or cap < 1:
            raise ValueError("grace_s >= 0, lost_after_s > 0 and cap >= 1")
        self.grace_s, self.lost_after_s, self.cap = grace_s, lost_after_s, cap
        self._owed: OrderedDict[int, _Owed] = OrderedDict()  # in the order they became owed
        self._acked: OrderedDict[int, float] = OrderedDict()  # key -> when acked, oldest first
        self._evicted: dict[str, int] = dict.fromkeys(STAGES, 0)
        self._late: dict[str, int] = dict.fromkeys(STAGES, 0)  # arrived while counted overdue

    def __len__(self) -> int:
        return len(self._owed)

    def _owe(self, key: int, stage: str, due_s: float) -> None:
        self._owed.pop(key, None)
        self._owed[key] = _Owed(stage, due_s)
        while len(self._owed) > self.cap:
            _, oldest = self._owed.popitem(last=False)
            self._evicted[oldest.stage] += 1

    def due(self, key: int) -> float | None:
        """When a nacked ``key`` is due back (the nack's time plus its invisible duration); None otherwise."""
        owed = self._owed.get(key)
        return owed.due_s if owed is not None and owed.stage == RETRY else None

    def sent(self, key: int, at_s: float) -> None:
        self._owe(key, FIRST, at_s)

    def forget(self, key: int) -> None:
        """``key`` was never sent after all (its send failed)."""
        self._owed.pop(key, None)

    def delivered(self, key: int, attempt: int, at_s: float, invisible_s: float) -> str:
        """A delivery of ``key``: "first", "retry", "duplicate" (after its ack) or "unknown" (never sent by this
        canary, or forgotten). Until acked or nacked it is owed again when its invisible time runs out."""
        owed = self._owed.get(key)
        if owed is None:
            return "duplicate" if key in self._acked else "unknown"
        if owed.overdue:
            self._late[owed.stage] += 1
        self._owe(key, RETRY, at_s + invisible_s)
        return FIRST if attempt <= 1 else RETRY

    def nacked(self, key: int, at_s: float, invisible_s: float) -> None:
        if key in self._owed:
            self._owe(key, RETRY, at_s + invisible_s)

    def acked(self, key: int, at_s: float) -> None:
        if self._owed.pop(key, None) is not None:
            self._acked[key] = at_s

    def sweep(self, now_s: float) -> Sweep:
        out = Sweep()
        for stage, n in self._evicted.items():
            out.lost[stage] += n
        self._evicted = dict.fromkeys(STAGES, 0)
        gone = []
        for key, owed in self._owed.items():
            late_s = now_s - owed.due_s - self.grace_s
            if late_s > self.lost_after_s:
                gone.append(key)
                out.lost[owed.stage] += 1
            elif late_s > 0:
                owed.overdue = True
                out.overdue[owed.stage] += 1
        for key in gone:
            del self._owed[key]
        while self._acked and next(iter(self._acked.values())) < now_s - self.lost_after_s:
            self._acked.popitem(last=False)
        return out

    def late(self) -> dict[str, int]:
        """Messages that arrived after they had been counted overdue, per stage, since the last call."""
        out, self._late = self._late, dict.fromkeys(STAGES, 0)
        return out
