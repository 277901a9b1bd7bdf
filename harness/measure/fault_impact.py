"""What each fault did to the messages, from the ledger (harness.measure.ledger) and the retry deliveries
(harness.measure.latency.retry_rows) of its variant. One definition: the run's own summary and the Spark report
both call ``impact``.

A (message, group) pair was **exposed** to a fault when it was sent before the fault's target was back and
was not yet final (acked or dead-lettered) when the fault began: what the fault could lose, duplicate or
delay. Its figures are the exposed pairs by ledger class, and the **longest wait** overlapping the window:
a wait is the time a pair was owed a delivery it had not got, from its send to its first delivery, or from
a retry's due time (nack + invisible duration) to its redelivery; a pair never delivered, or delivered and
never acked (lost), waits from its send or its first delivery at least until the last thing the run's ledger
saw (``longest_wait_open``). Besides, how long traffic stopped: the
longest **gap** between successful sends, and between deliveries, that overlaps the window (a gap still
open at the last thing the ledger saw is ``*_gap_open``): a target can be back long before its clients are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from harness.measure.ledger import OWED_CLASSES

IMPACT_CLASSES = ("lost", "duplicated", "dead_lettered", "late", "acked_first", "acked_after_retry")
FIGURES = ("longest_wait_ms", "longest_wait_open", "send_gap_ms", "send_gap_open", "delivery_gap_ms",
           "delivery_gap_open")


def waits(ledger_rows: pd.DataFrame, retries: pd.DataFrame, end_ns: int) -> pd.DataFrame:
    """variant, from_ns, to_ns, open: every wait for a delivery (see the module's docstring)."""
    owed = ledger_rows[ledger_rows["class"].isin(OWED_CLASSES) & ledger_rows["sent_ns"].notna()]
    received = owed["first_received_ns"]
    first = pd.DataFrame({"variant": owed["variant"], "from_ns": owed["sent_ns"].astype("int64"),
                          "to_ns": received.fillna(end_ns).astype("int64"), "open": received.isna()})
    # Delivered but never acked (its ack failed, or its consumer never got it again): still owed, from its
    # first delivery on.
    stuck = owed[(owed["class"] == "lost") & received.notna()]
    unfinished = pd.DataFrame({"variant": stuck["variant"], "from_ns": stuck["first_received_ns"].astype("int64"),
                               "to_ns": end_ns, "open": True})
    r = retries[retries["redelivery_ms"].notna()]
    to = r["t_client_ns"].astype("int64")
    waited_ns = (r["redelivery_ms"].astype(float) * 1e6).round().astype("int64")
    again = pd.DataFrame({"variant": r["variant"], "from_ns": to - waited_ns, "to_ns": to, "open": False})
    return pd.concat([first, unfinished, again], ignore_index=True)


TIMES = ["sent_ns", "first_received_ns", "acked_ns", "dead_lettered_ns"]


def longest_gap(times: np.ndarray, start: int, end: int, end_ns: int) -> tuple[float | None, bool | None]:
    """The longest gap (ms) between consecutive ``times`` that overlaps [start, end], and whether it is the
    one still open at ``end_ns`` (nothing after it)."""
    t = np.sort(times[~np.isnan(times)]) if times.dtype.kind == "f" else np.sort(times)
    edges = np.concatenate([t, [end_ns]])
    if edges.size < 2:
        return None, None
    a, b = edges[:-1], edges[1:]
    hit = (a <= end) & (b >= start)
    if not hit.any():
        return None, None
    gaps = np.where(hit, b - a, -1)
    i = int(np.argmax(gaps))
    return float(gaps[i]) / 1e6, bool(i == gaps.size - 1)


def impact(ledger_rows: pd.DataFrame, retries: pd.DataFrame,
           records: Sequence[Mapping[str, object]]) -> list[dict[str, object]]:
    """Per fault record (harness.run.faults.FaultRecord.as_dict) of one run: its exposed pairs by class and the
    longest wait across its window, from the run's ledger rows and retry rows."""
    seen = ledger_rows[TIMES].max().max() if len(ledger_rows) else None
    end_ns = int(seen) if seen is not None and not pd.isna(seen) else 0
    all_waits = waits(ledger_rows, retries, end_ns)
    out = []
    for rec in records:
        base = {k: rec.get(k) for k in ("variant", "label", "action", "target", "at_s", "duration_s", "window_s",
                                        "error")}
        start = rec.get("started_ns")
        if start is None:
            out.append({**base, "exposed": None, **dict.fromkeys(IMPACT_CLASSES), **dict.fromkeys(FIGURES)})
            continue
        end = rec.get("ended_ns") or end_ns
        rows = ledger_rows[(ledger_rows["variant"] == rec["variant"]) & ledger_rows["class"].isin(OWED_CLASSES)]
        final = rows[["acked_ns", "dead_lettered_ns"]].min(axis=1)
        exposed = rows[(rows["sent_ns"] <= end) & (final.isna() | (final >= start))]
        by_class = exposed["class"].value_counts()
        w = all_waits[(all_waits["variant"] == rec["variant"]) & (all_waits["from_ns"] <= end)
                      & (all_waits["to_ns"] >= start)]
        longest = (w["to_ns"] - w["from_ns"]) if len(w) else pd.Series(dtype="int64")
        at = longest.idxmax() if len(longest) else None
        sends = rows["sent_ns"].dropna().to_numpy(dtype=np.int64)
        delivered = np.concatenate([rows["first_received_ns"].dropna().to_numpy(dtype=np.int64),
                                    retries.loc[retries["variant"] == rec["variant"], "t_client_ns"]
                                    .dropna().to_numpy(dtype=np.int64)])
        send_gap, send_open = longest_gap(sends, start, end, end_ns)
        delivery_gap, delivery_open = longest_gap(delivered, start, end, end_ns)
        out.append({**base, "exposed": int(len(exposed)), **{c: int(by_class.get(c, 0)) for c in IMPACT_CLASSES},
                    "longest_wait_ms": float(longest.max()) / 1e6 if at is not None else None,
                    "longest_wait_open": bool(w.loc[at, "open"]) if at is not None else None,
                    "send_gap_ms": send_gap, "send_gap_open": send_open,
                    "delivery_gap_ms": delivery_gap, "delivery_gap_open": delivery_open})
    return out
