"""The arithmetic of retry latency, as pure functions over an events DataFrame.

wakeup_ms      = receive time of a retry delivery - store time of its retry copy
                 (how long the retry waited for a consumer that was already waiting for it)
redelivery_ms  = receive time of a retry delivery - (time of the nack of the previous attempt
                 + the invisible duration that nack asked for); for a lapsed delivery the "nack" is the
                 receive itself and the duration is the invisible time requested on receive
"""

from __future__ import annotations

import numpy as np
import pandas as pd

NS_PER_MS = 1_000_000
QUANTILES = (0.5, 0.9, 0.99)


def derive(events: pd.DataFrame) -> pd.DataFrame:
    """Return a copy with ``wakeup_ms`` and ``redelivery_ms`` filled on retry deliveries."""
    ev = events.reset_index(drop=True)
    ev["wakeup_ms"] = np.nan
    ev["redelivery_ms"] = np.nan
    retry = (ev["kind"] == "received") & (ev["delivery_attempt"] > 1)
    recv_ms = ev["t_client_ns"] / NS_PER_MS
    has_store = retry & ev["store_ts_ms"].notna()
    ev.loc[has_store, "wakeup_ms"] = recv_ms[has_store] - ev.loc[has_store, "store_ts_ms"]

    # Ledger ids are unique within a run only.
    keys = [k for k in ("run_id", "scenario", "variant", "group", "ledger_id") if k in ev.columns]
    nacks = ev.loc[ev["kind"] == "nacked", [*keys, "delivery_attempt", "t_client_ns", "invisible_ms"]].copy()
    if nacks.empty or not retry.any():
        return ev
    nacks["due_ms"] = nacks["t_client_ns"] / NS_PER_MS + nacks["invisible_ms"]
    nacks["delivery_attempt"] = nacks["delivery_attempt"] + 1  # the attempt this nack leads to
    # A message delivered twice at one attempt may be nacked twice: the later nack decides.
    nacks = nacks.sort_values("t_client_ns").drop_duplicates([*keys, "delivery_attempt"], keep="last")
    retries = ev.loc[retry, [*keys, "delivery_attempt"]].reset_index()
    joined = retries.merge(nacks[[*keys, "delivery_attempt", "due_ms"]], on=[*keys, "delivery_attempt"], how="left")
    joined = joined.set_index("index")
    ev.loc[joined.index, "redelivery_ms"] = recv_ms[joined.index] - joined["due_ms"]
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
