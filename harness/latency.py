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

from collections.abc import Mapping, Sequence
from typing import TypeVar

import numpy as np
import pandas as pd

from harness import ledger, ordering
from harness.expectations import DISTRIBUTIONS

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


def derive(events: pd.DataFrame) -> pd.DataFrame:
    """Return a copy with ``wakeup_ms`` or ``pickup_ms``, ``redelivery_ms`` and ``nack_retry_ms`` filled on
    retry deliveries (the archive keeps the first three; nack_retry_ms is recomputed where it is needed)."""
    ev = events.reset_index(drop=True)
    for c in DISTRIBUTIONS:
        ev[c] = np.nan
    for c in ("cycle", "poll_started_ns"):  # absent from version 1 events
        if c not in ev.columns:
            ev[c] = np.nan
    retry = is_retry_delivery(ev["kind"], ev["delivery_attempt"])
    was_waiting = retry & waited(ev["poll_started_ns"], ev["store_ts_ms"])
    late = retry & ~was_waiting
    ev.loc[was_waiting, "wakeup_ms"] = wakeup_ms(ev.loc[was_waiting, "t_client_ns"], ev.loc[was_waiting, "store_ts_ms"])
    ev.loc[late, "pickup_ms"] = wakeup_ms(ev.loc[late, "t_client_ns"], ev.loc[late, "store_ts_ms"])

    keys = [k for k in NACK_KEYS if k in ev.columns]
    nacks = ev.loc[ev["kind"] == "nacked", [*keys, "delivery_attempt", LATEST_NACK_ORDER, "invisible_ms"]].copy()
    if nacks.empty or not retry.any():
        return ev
    nacks["due_ms"] = due_ms(nacks["t_client_ns"], nacks["invisible_ms"])
    nacks["nacked_ns"] = nacks["t_client_ns"].astype("Int64")  # nullable: stays exact through the left merge
    nacks["delivery_attempt"] = nacks["delivery_attempt"] + 1  # the attempt this nack leads to
    nacks = nacks.sort_values(LATEST_NACK_ORDER).drop_duplicates([*keys, "delivery_attempt"], keep="last")
    retries = ev.loc[retry, [*keys, "delivery_attempt"]].reset_index()
    joined = retries.merge(nacks[[*keys, "delivery_attempt", "due_ms", "nacked_ns"]], on=[*keys, "delivery_attempt"],
                           how="left")
    joined = joined.set_index("index")
    ev.loc[joined.index, "redelivery_ms"] = redelivery_ms(ev.loc[joined.index, "t_client_ns"],
                                                          joined["due_ms"].astype(float))
    # Subtract in exact integers first (ns since the epoch do not fit a float's 53 bits), as Spark does.
    ev.loc[joined.index, "nack_retry_ms"] = nack_retry_ms(ev.loc[joined.index, "t_client_ns"].astype("Int64"),
                                                          joined["nacked_ns"]).astype(float)
    return ev


def _dist(values: pd.Series) -> dict[str, float | int | None]:
    v = values.dropna()
    out: dict[str, float | int | None] = {"n": int(v.size)}
    for q in QUANTILES:
        out[f"p{round(q * 100)}"] = float(np.quantile(v, q)) if v.size else None
    out["max"] = float(v.max()) if v.size else None
    return out


def retry_outcomes(events: pd.DataFrame, allowed_deliveries: Mapping[str, int],
                   long_poll_ms: float | None = None) -> pd.DataFrame:
    """One row per retry the consumers asked for (a nack), with its cycle, whether it came back, how long its
    first delivery waited after the copy was stored (``wait_ms``) and, given the long poll, ``stalled``.

    A nack of attempt n expects a delivery of attempt n + 1 to the same group, unless n is the last
    delivery the group allows (``allowed_deliveries``: group -> retryMaxTimes + 1; the message is then
    dead-lettered, not retried). One that never comes is a retry lost (or still pending when the run
    ended): the verdict counts it as an endless wait.
    """
    keys = [k for k in NACK_KEYS if k in events.columns]
    nacks = events.loc[events["kind"] == "nacked", [*keys, "delivery_attempt", "cycle"]].copy()
    nacks = nacks[nacks["delivery_attempt"] < nacks["group"].map(dict(allowed_deliveries)).fillna(float("inf"))]
    nacks["delivery_attempt"] = nacks["delivery_attempt"] + 1
    nacks = nacks.drop_duplicates([*keys, "delivery_attempt"])
    retries = events.loc[is_retry_delivery(events["kind"], events["delivery_attempt"]),
                         [*keys, "delivery_attempt", "t_client_ns", "store_ts_ms"]]
    came = (retries.assign(wait_ms=wakeup_ms(retries["t_client_ns"], retries["store_ts_ms"]))
            .groupby([*keys, "delivery_attempt"], as_index=False)["wait_ms"].min().assign(redelivered=True))
    out = nacks.merge(came, on=[*keys, "delivery_attempt"], how="left")
    out["redelivered"] = out["redelivered"].astype("boolean").fillna(False).astype(bool)
    if long_poll_ms is not None:
        out["stalled"] = ~out["redelivered"] | stalled(out["wait_ms"].fillna(0.0), long_poll_ms)
    return out


DUPLICATE_KEYS = ["run_id", "group", "ledger_id", "delivery_attempt"]


def _ledger_ids(ev: pd.DataFrame, kind: str) -> set[tuple[str, str]]:
    rows = ev.loc[ev["kind"] == kind, ["run_id", "ledger_id"]]
    return set(zip(rows["run_id"], rows["ledger_id"], strict=True))


def stall_counts(retries: int, count: int) -> dict[str, float | int | None]:
    """The ``stalled.*`` figures of one summary row."""
    return {"retries": retries, "count": count, "share": count / retries if retries else None}


def summarize(events: pd.DataFrame, subscriptions: Mapping[str, Mapping[str, Sequence[str]]],
              allowed_deliveries: Mapping[str, int], long_poll_ms: float) -> list[dict]:
    """Per (scenario, variant): counts, the ledger (harness.ledger: ``subscriptions`` topic -> its groups,
    ``allowed_deliveries`` group -> retryMaxTimes + 1), wakeup / redelivery distributions (ms), and the
    retries that stalled (waited for the scenario's ``long_poll_ms`` to run out).

    Quantiles are numpy's default (linear interpolation); ``events`` must already be derived.
    """
    out = []
    for (scenario, variant), ev in events.groupby(["scenario", "variant"], sort=True):
        classes = ledger.counts(ledger.classify(ev, subscriptions, allowed_deliveries))
        fifo = ordering.fifo_rows(ev)
        kinds = ev["kind"].value_counts()
        sent_ids, received_ids, acked_ids = (_ledger_ids(ev, k) for k in ("sent", "received", "acked"))
        recv = ev[ev["kind"] == "received"]
        outcomes = retry_outcomes(ev, allowed_deliveries, long_poll_ms)
        out.append({
            "scenario": scenario,
            "variant": variant,
            "sent": int(kinds.get("sent", 0)),
            "deliveries": int(kinds.get("received", 0)),
            "retry_deliveries": int((recv["delivery_attempt"] > 1).sum()),
            "acks": int(kinds.get("acked", 0)),
            "nacks": int(kinds.get("nacked", 0)),
            "empty_polls": int(kinds.get("empty_poll", 0)),
            "errors": int(kinds.get("error", 0)),
            "ledger": {
                "sent": len(sent_ids),
                "received": len(sent_ids & received_ids),
                "acked": len(sent_ids & acked_ids),
                "never_received": len(sent_ids - received_ids),
                "unknown_received": len(received_ids - sent_ids),
                "duplicate_deliveries": int(recv.duplicated(DUPLICATE_KEYS).sum()),
                "retries_expected": len(outcomes),
                "retries_never_redelivered": int((~outcomes["redelivered"]).sum()),
                **classes,
            },
            "cycles": len(ev.loc[ev["kind"] == "sent", ["run_id", "cycle"]].drop_duplicates()),
            **{d: _dist(ev[d]) for d in DISTRIBUTIONS},
            "stalled": stall_counts(len(outcomes), int(outcomes["stalled"].sum())),
            **({"fifo": ordering.fifo_counts(fifo)} if not fifo.empty else {}),
        })
    return out
