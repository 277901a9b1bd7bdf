"""The arithmetic of retry latency: the one definition of wakeup and redelivery.

wakeup_ms      = receive time of a retry delivery - store time of its retry copy
                 (how long the retry waited for a consumer that was already waiting for it)
redelivery_ms  = receive time of a retry delivery - (time of the nack of the previous attempt
                 + the invisible duration that nack asked for); for a lapsed delivery the "nack" is the
                 receive itself and the duration is the invisible time requested on receive

The formulas are written once, as functions of their operands, and work unchanged on numbers (the
workers' live metrics), pandas Series (the archive writer, below) and Spark Columns (spark/analysis.py).
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import pandas as pd

NS_PER_MS = 1_000_000
QUANTILES = (0.5, 0.9, 0.99)
# Ledger ids are unique within a run only; a nack and the retry it leads to share these and the attempt.
NACK_KEYS = ("run_id", "scenario", "variant", "group", "ledger_id")
# When one attempt of a message was nacked more than once (it was delivered twice), the latest nack decides.
LATEST_NACK_ORDER = "t_client_ns"

X = TypeVar("X")  # a number, a pandas Series or a Spark Column


def is_retry_delivery(kind: X, delivery_attempt: X) -> X:
    return (kind == "received") & (delivery_attempt > 1)


def wakeup_ms(received_ns: X, store_ts_ms: X) -> X:
    return received_ns / NS_PER_MS - store_ts_ms


def due_ms(nacked_ns: X, invisible_ms: X) -> X:
    """When a nacked delivery is due back: the nack's time plus the invisible duration it asked for."""
    return nacked_ns / NS_PER_MS + invisible_ms


def redelivery_ms(received_ns: X, due: X) -> X:
    return received_ns / NS_PER_MS - due


def derive(events: pd.DataFrame) -> pd.DataFrame:
    """Return a copy with ``wakeup_ms`` and ``redelivery_ms`` filled on retry deliveries."""
    ev = events.reset_index(drop=True)
    ev["wakeup_ms"] = np.nan
    ev["redelivery_ms"] = np.nan
    retry = is_retry_delivery(ev["kind"], ev["delivery_attempt"])
    ev.loc[retry, "wakeup_ms"] = wakeup_ms(ev.loc[retry, "t_client_ns"], ev.loc[retry, "store_ts_ms"])

    keys = [k for k in NACK_KEYS if k in ev.columns]
    nacks = ev.loc[ev["kind"] == "nacked", [*keys, "delivery_attempt", LATEST_NACK_ORDER, "invisible_ms"]].copy()
    if nacks.empty or not retry.any():
        return ev
    nacks["due_ms"] = due_ms(nacks["t_client_ns"], nacks["invisible_ms"])
    nacks["delivery_attempt"] = nacks["delivery_attempt"] + 1  # the attempt this nack leads to
    nacks = nacks.sort_values(LATEST_NACK_ORDER).drop_duplicates([*keys, "delivery_attempt"], keep="last")
    retries = ev.loc[retry, [*keys, "delivery_attempt"]].reset_index()
    joined = retries.merge(nacks[[*keys, "delivery_attempt", "due_ms"]], on=[*keys, "delivery_attempt"], how="left")
    joined = joined.set_index("index")
    ev.loc[joined.index, "redelivery_ms"] = redelivery_ms(ev.loc[joined.index, "t_client_ns"], joined["due_ms"])
    return ev


def _dist(values: pd.Series) -> dict[str, float | int | None]:
    v = values.dropna()
    out: dict[str, float | int | None] = {"n": int(v.size)}
    for q in QUANTILES:
        out[f"p{round(q * 100)}"] = float(np.quantile(v, q)) if v.size else None
    out["max"] = float(v.max()) if v.size else None
    return out


def _ledger_ids(ev: pd.DataFrame, kind: str) -> set[tuple[str, str]]:
    rows = ev.loc[ev["kind"] == kind, ["run_id", "ledger_id"]]
    return set(zip(rows["run_id"], rows["ledger_id"], strict=True))


def summarize(events: pd.DataFrame) -> list[dict]:
    """Per (scenario, variant): counts, the ledger, and wakeup / redelivery distributions (ms).

    Quantiles are numpy's default (linear interpolation); ``events`` must already be derived.
    """
    out = []
    for (scenario, variant), ev in events.groupby(["scenario", "variant"], sort=True):
        kinds = ev["kind"].value_counts()
        sent_ids, received_ids, acked_ids = (_ledger_ids(ev, k) for k in ("sent", "received", "acked"))
        recv = ev[ev["kind"] == "received"]
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
                "duplicate_deliveries": int(recv.duplicated(["run_id", "ledger_id", "delivery_attempt"]).sum()),
            },
            "wakeup_ms": _dist(ev["wakeup_ms"]),
            "redelivery_ms": _dist(ev["redelivery_ms"]),
        })
    return out
