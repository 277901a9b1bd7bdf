"""The arithmetic of retry latency: the one definition of wakeup, pickup and redelivery.

wakeup_ms      = receive time of a retry delivery - store time of its retry copy, for a retry returned by
                 a long poll that started no later than that store time: how long the retry waited for a
                 consumer that was already waiting for it (what a missed wakeup makes long)
pickup_ms      = the same difference for a retry returned by a poll that started after the store (the
                 consumer was busy when the retry appeared); counted and shown apart, never in wakeup
redelivery_ms  = receive time of a retry delivery - (time of the nack of the previous attempt
                 + the invisible duration that nack asked for); for a lapsed delivery the "nack" is the
                 receive itself and the duration is the invisible time requested on receive
nack_retry_ms  = receive time of a retry delivery - time of the nack of the previous attempt: the seed's
                 own measure (the nack's delay, the revive, and any wait for a wakeup, together)
stalled        = a retry asked for (a nack) that waited at least STALL_FRACTION of its consumer's long poll
                 after its copy was stored (wakeup or pickup), or never came back: the broker did not hand it
                 to the consumer waiting for it, and a poll's expiry or a later poll did (issue 16)

The formulas are written once, as functions of their operands, and work unchanged on numbers (the
workers' live metrics), pandas Series (the archive writer, below) and Spark Columns (spark/analysis.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

import numpy as np
import pandas as pd
import pyarrow as pa

from harness.inputs.expectations import DISTRIBUTIONS
from harness.measure import frames, ledger

NS_PER_MS = 1_000_000
QUANTILES = (0.5, 0.9, 0.99)
# Ledger ids are unique within a run only; a nack and the retry it leads to share these and the attempt.
NACK_KEYS = ("run_id", "scenario", "variant", "group", "ledger_id")
# When one attempt of a message was nacked more than once (it was delivered twice), the latest nack decides.
LATEST_NACK_ORDER = "t_client_ns"

X = TypeVar("X")  # a number, a pandas Series or a Spark Column


def is_retry_delivery(kind: X, delivery_attempt: X) -> X:
    return (kind == "received") & (delivery_attempt > 1)


def waited(poll_started_ns: X, store_ts_ms: X) -> X:
    """Whether the poll that returned a delivery was already waiting when the copy was stored."""
    return poll_started_ns / NS_PER_MS <= store_ts_ms


def wakeup_ms(received_ns: X, store_ts_ms: X) -> X:
    return received_ns / NS_PER_MS - store_ts_ms


def due_ms(nacked_ns: X, invisible_ms: X) -> X:
    """When a nacked delivery is due back: the nack's time plus the invisible duration it asked for."""
    return nacked_ns / NS_PER_MS + invisible_ms


def redelivery_ms(received_ns: X, due: X) -> X:
    return received_ns / NS_PER_MS - due


def nack_retry_ms(received_ns: X, nacked_ns: X) -> X:
    return (received_ns - nacked_ns) / NS_PER_MS


# A woken poll answers within milliseconds; a missed wakeup leaves the retry until the poll runs out (the
# rest of a 5-20 s poll). Half a poll tells the two apart with room on both sides.
STALL_FRACTION = 0.5


def stalled(wait_ms: X, long_poll_ms: X) -> X:
    """Whether a retry that waited ``wait_ms`` after its copy was stored waited for a poll to run out."""
    return wait_ms >= long_poll_ms * STALL_FRACTION


# One row per retry delivery, as the archive writer, the run's summary and the Spark analysis see it.
RETRY_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("scenario", pa.string()), ("variant", pa.string()), ("group", pa.string()),
    ("worker", pa.string()), ("consumer", pa.string()), ("ledger_id", pa.string()), ("delivery_attempt", pa.int32()),
    ("cycle", pa.int32()), ("t_client_ns", pa.int64()), ("poll_started_ns", pa.int64()), ("store_ts_ms", pa.int64()),
    ("waited", pa.bool_()), *[(d, pa.float64()) for d in DISTRIBUTIONS],
])


def column(events: pd.DataFrame, name: str) -> pd.Series:
    """A column, or nulls where the events predate it (version 1 archives, hand-made tables)."""
    return events[name] if name in events.columns else pd.Series(None, index=events.index, dtype=object)


def _present(mask: pd.Series) -> pd.Series:
    """A condition as plain booleans: unknown (a missing value) counts as false."""
    return mask.fillna(False).astype(bool)


def retry_rows(events: pd.DataFrame, messages: np.ndarray | None = None) -> pd.DataFrame:
    """One row per retry delivery (attempt > 1), RETRY_SCHEMA's columns, indexed as in ``events``: wakeup_ms
    when its poll was already waiting at the retry's store time, pickup_ms when not, redelivery_ms and
    nack_retry_ms against the latest nack of the previous attempt of the same message in the same group.

    A nack or retry without a ledger id (a body the harness could not read) is matched to nothing: which
    message it was is unknown. A run without cycles (version 1) is all cycle 0. ``messages``:
    message_codes(events), when at hand."""
    retry = _present(is_retry_delivery(events["kind"], events["delivery_attempt"]))
    r = pd.DataFrame({c: column(events, c)[retry] for c in RETRY_SCHEMA.names if c not in ("waited", *DISTRIBUTIONS)})
    r["cycle"] = r["cycle"].fillna(0)
    latency = wakeup_ms(r["t_client_ns"], r["store_ts_ms"]).astype(float)
    was_waiting = _present(waited(r["poll_started_ns"], r["store_ts_ms"]))
    r["waited"] = was_waiting
    r["wakeup_ms"] = latency.where(was_waiting)
    r["pickup_ms"] = latency.where(~was_waiting)
    keys = ["message", "delivery_attempt"]
    message = message_codes(events) if messages is None else messages
    r["message"] = message[retry.to_numpy()]
    # A suspended nack (ledger.suspended) asks for the same attempt back, which no retry delivery (attempt > 1)
    # can show: it is the ledger's to account for, not a retry expected here.
    nacked = ((events["kind"] == "nacked") & ~ledger.suspended(events)).to_numpy()
    nacks = pd.DataFrame({c: column(events, c)[nacked]
                          for c in ["delivery_attempt", LATEST_NACK_ORDER, "invisible_ms"]})
    nacks["message"] = message[nacked]
    nacks = nacks[(nacks["message"] >= 0).to_numpy() & nacks["delivery_attempt"].notna().to_numpy()]
    nacks["due_ms"] = due_ms(nacks["t_client_ns"], nacks["invisible_ms"]).astype(float)
    nacks["nacked_ns"] = nacks["t_client_ns"].astype("Int64")  # nullable: stays exact through the left merge
    nacks["delivery_attempt"] = nacks["delivery_attempt"] + 1  # the attempt this nack leads to
    nacks = nacks.sort_values(LATEST_NACK_ORDER, kind="stable").drop_duplicates(keys, keep="last")
    joined = r[keys].reset_index().merge(nacks[[*keys, "due_ms", "nacked_ns"]], on=keys, how="left").set_index("index")
    r["redelivery_ms"] = redelivery_ms(r["t_client_ns"], joined["due_ms"]).astype(float)
    # Subtract in exact integers first (ns since the epoch do not fit a float's 53 bits), as Spark does.
    r["nack_retry_ms"] = nack_retry_ms(r["t_client_ns"].astype("Int64"), joined["nacked_ns"]).astype(float)
    return r.drop(columns="message")


def message_codes(events: pd.DataFrame) -> np.ndarray:
    """An integer per event for its (run, scenario, variant, group, ledger id); -1 where one is missing (it
    matches nothing, as in a join)."""
    return frames.codes(pd.DataFrame({c: column(events, c) for c in NACK_KEYS}), NACK_KEYS, nulls=False)


def derive(events: pd.DataFrame) -> pd.DataFrame:
    """Return a copy with ``wakeup_ms`` or ``pickup_ms``, ``redelivery_ms`` and ``nack_retry_ms`` filled on
    retry deliveries (retry_rows; the archive keeps the first three)."""
    ev = events.reset_index(drop=True)
    for c in ("cycle", "poll_started_ns"):  # absent from version 1 events
        if c not in ev.columns:
            ev[c] = np.nan
    rows = retry_rows(ev)
    for c in DISTRIBUTIONS:
        ev[c] = rows[c].reindex(ev.index)
    return ev


def retry_outcomes(events: pd.DataFrame, allowed_deliveries: Mapping[str, int], long_poll_ms: float | None = None,
                   retries: pd.DataFrame | None = None, messages: np.ndarray | None = None) -> pd.DataFrame:
    """One row per retry the consumers asked for (a nack), with its cycle, whether it came back, how long its
    first delivery waited after the copy was stored (``wait_ms``) and, given the long poll, ``stalled``.

    A nack of attempt n expects a delivery of attempt n + 1 to the same group, unless n is the last
    delivery the group allows (``allowed_deliveries``: group -> retryMaxTimes + 1; the message is then
    dead-lettered, not retried). One that never comes is a retry lost (or still pending when the run
    ended): the verdict counts it as an endless wait. A nack without a ledger id cannot be matched to its
    retry (retry_rows) and counts as never redelivered. ``retries`` (retry_rows(events)) and ``messages``
    (message_codes(events)): when at hand.
    """
    keys = ["message", "delivery_attempt"]
    message = message_codes(events) if messages is None else messages
    # A suspended nack (ledger.suspended) asks for the same attempt back, which no retry delivery (attempt > 1)
    # can show: it is the ledger's to account for, not a retry expected here.
    nacked = ((events["kind"] == "nacked") & ~ledger.suspended(events)).to_numpy()
    nacks = pd.DataFrame({c: column(events, c)[nacked] for c in [*NACK_KEYS, "delivery_attempt", "cycle"]})
    nacks["message"] = message[nacked]
    nacks["cycle"] = nacks["cycle"].fillna(0)
    allowed = nacks["group"].map(dict(allowed_deliveries)).astype(float).fillna(float("inf"))
    nacks = nacks[_present(nacks["delivery_attempt"] < allowed)]
    nacks["delivery_attempt"] = nacks["delivery_attempt"] + 1
    # Null keys: one expected retry each (as a null-safe distinct counts them), never found.
    nacks = nacks.drop_duplicates([*NACK_KEYS, "delivery_attempt"])
    rows = retry_rows(events, message) if retries is None else retries
    came = pd.DataFrame({"message": message[events.index.get_indexer(rows.index)],
                         "delivery_attempt": rows["delivery_attempt"].to_numpy(),
                         "wait_ms": rows["wakeup_ms"].fillna(rows["pickup_ms"]).to_numpy()})
    came = came[came["message"] >= 0].groupby(keys, as_index=False)["wait_ms"].min().assign(redelivered=True)
    out = nacks.merge(came, on=keys, how="left").drop(columns="message")
    out["redelivered"] = out["redelivered"].astype("boolean").fillna(False).astype(bool)
    if long_poll_ms is not None:
        out["stalled"] = ~out["redelivered"] | stalled(out["wait_ms"].fillna(0.0), long_poll_ms)
    return out


def stall_counts(retries: int, count: int) -> dict[str, float | int | None]:
    """The ``stalled.*`` figures of one summary row."""
    return {"retries": retries, "count": count, "share": count / retries if retries else None}
