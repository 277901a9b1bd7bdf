"""Event rows made by hand, as the workers write them (harness.contracts.events.SCHEMA), for the tests of what
events mean; and the rows of the ledger's cases, which its unit tests and their Spark twin share."""

from __future__ import annotations

import pandas as pd

from harness.measure.ledger import tallies

MS = 1_000_000  # ns

# The ledger's cases: topic T for group G, U for H, F for A and B (every tag), X for A (TagA) and B (TagB or TagC).
SUBS = {"T": {"G": ["*"]}, "U": {"H": ["*"]}, "F": {"A": ["*"], "B": ["*"]}, "X": {"A": ["TagA"], "B": ["TagB||TagC"]}}


def event(kind: str, ledger_id: str | None = None, attempt: int | None = 1, t_ms: float = 0,
          **columns: object) -> dict:
    """One event of run "r", scenario "s", variant "v", group "G", at ``t_ms`` on the client's clock. ``columns``:
    the other columns the code under test reads, or these overridden; a test module fixes its own with
    functools.partial, so that its rows all hold the same columns (an absent column is not a null one)."""
    return {"run_id": "r", "scenario": "s", "variant": "v", "kind": kind, "group": "G", "ledger_id": ledger_id,
            "delivery_attempt": attempt, "t_client_ns": t_ms * MS, **columns}


def ledger_event(kind: str, ledger_id: str | None, attempt: int | None = None, t_ms: float = 0, topic: str = "T",
                 intended: str = "G", message_id: str | None = None, **columns: object) -> dict:
    """An event with every column the ledger reads: the topic it was sent to (also its origin), the group it was
    meant for, its cycle (0), broker message id (``id-<ledger id>`` unless given), detail and tag (none)."""
    return event(kind, ledger_id, attempt, t_ms, **{
        "topic": topic, "origin_topic": topic, "intended_group": intended, "cycle": 0, "detail": None,
        "message_id": message_id or f"id-{ledger_id}", "tag": None, **columns})


def sent(ledger_id: str, topic: str = "T", intended: str = "G", tag: str | None = None) -> dict:
    """The send of a message meant for group ``intended`` ("*": every group its topic's subscriptions take)."""
    return ledger_event("sent", ledger_id, topic=topic, intended=intended, group=intended, tag=tag)


def counts(ledger: pd.DataFrame) -> dict[str, int]:
    """A whole ledger's class counts as one dict (harness.measure.ledger.tallies over no grouping), as a run's
    summary row holds them."""
    return {k: int(v) for k, v in tallies(ledger, []).iloc[0].items()}
