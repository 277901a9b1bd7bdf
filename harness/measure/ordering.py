"""FIFO order: within each message group, messages must reach a group in the order they were sent, and
none may be delivered while the one sent before it is still in flight (not yet acked or dead-lettered).

One row per (message, group) of a FIFO run: its place in its message group, when it was first received,
acked, and whether it came out of order or overtook the message before it; for a nacked message, how
long its message group was blocked (from the nack to the next delivery in that message group). The run's
summary and the Spark analysis both call ``fifo_rows`` and ``fifo_counts``. With batches of one message
(what the FIFO scenario uses) "overtaken" is exact; a batch may legitimately hold several messages of a
message group in order.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from harness.inputs.expectations import FIFO

PAIR = ["run_id", "scenario", "variant", "group", "ledger_id"]
SCHEMA = pa.schema([
    ("run_id", pa.string()), ("scenario", pa.string()), ("variant", pa.string()), ("group", pa.string()),
    ("message_group", pa.string()), ("ledger_id", pa.string()), ("seq", pa.int64()), ("sent_ns", pa.int64()),
    ("first_received_ns", pa.int64()), ("done_ns", pa.int64()), ("out_of_order", pa.bool_()),
    ("overtaken", pa.bool_()), ("block_ms", pa.float64()),
])
COLUMNS = SCHEMA.names


def fifo_rows(events: pd.DataFrame) -> pd.DataFrame:
    """``events`` of FIFO runs (any others are ignored) -> one row per (message, receiving group)."""
    if "message_group" not in events.columns:
        return pd.DataFrame(columns=COLUMNS)
    ev = events[events["message_group"].notna()]  # every event of a FIFO message carries it
    sent = ev[(ev["kind"] == "sent") & ev["message_group"].notna()]
    sent = sent.sort_values("t_client_ns").drop_duplicates(["run_id", "variant", "ledger_id"])
    sent = sent[["run_id", "scenario", "variant", "ledger_id", "message_group", "t_client_ns"]].rename(
        columns={"t_client_ns": "sent_ns"})
    if sent.empty:
        return pd.DataFrame(columns=COLUMNS)
    recv = ev[ev["kind"] == "received"]
    first = recv.groupby(PAIR)["t_client_ns"].min().rename("first_received_ns").reset_index()
    # Done when the ack was sent, not when it returned: the broker may free the message group and serve
    # the next message before the ack's answer is back (an "overtaken" inside that round trip is no evidence).
    fin = ev[ev["kind"].isin(["acked", "dlq_seen"])]
    since = (fin["started_ns"] if "started_ns" in fin.columns else pd.Series(pd.NA, index=fin.index)).astype("Int64")
    done = (fin.assign(done_ns=since.fillna(fin["t_client_ns"].astype("Int64"))).groupby(PAIR)["done_ns"].min()
            .reset_index())
    nacked = ev[(ev["kind"] == "nacked")].groupby(PAIR)["t_client_ns"].min().rename("nacked_ns").reset_index()
    rows = (first.merge(sent, on=["run_id", "scenario", "variant", "ledger_id"], how="inner")
            .merge(done, on=PAIR, how="left").merge(nacked, on=PAIR, how="left"))
    rows = rows.sort_values(["run_id", "variant", "group", "message_group", "sent_ns"], ignore_index=True)
    by = rows.groupby(["run_id", "variant", "group", "message_group"], sort=False)
    rows["seq"] = by.cumcount()
    prev_first = by["first_received_ns"].shift()
    prev_done = by["done_ns"].shift()
    rows["out_of_order"] = (prev_first.notna() & (rows["first_received_ns"] < prev_first)).astype(bool)
    # Delivered while the one before was still in flight (never finished counts as in flight).
    rows["overtaken"] = (prev_first.notna()
                         & (prev_done.isna() | (rows["first_received_ns"] < prev_done))).astype(bool)
    rows["block_ms"] = _block_ms(rows, recv)
    return rows[COLUMNS]


def _block_ms(rows: pd.DataFrame, recv: pd.DataFrame) -> pd.Series:
    """For a nacked message: its nack -> the next delivery of any message of its message group there (a
    loop per nacked message: FIFO scenarios nack tens to hundreds)."""
    out = pd.Series(np.nan, index=rows.index)
    nacked = rows[rows["nacked_ns"].notna()]
    if nacked.empty:
        return out
    mg = rows[["run_id", "variant", "group", "ledger_id", "message_group"]]
    deliveries = recv[["run_id", "variant", "group", "ledger_id", "t_client_ns"]].merge(
        mg, on=["run_id", "variant", "group", "ledger_id"], how="inner")
    for i, r in nacked.iterrows():
        same = deliveries[(deliveries["run_id"] == r["run_id"]) & (deliveries["variant"] == r["variant"])
                          & (deliveries["group"] == r["group"]) & (deliveries["message_group"] == r["message_group"])
                          & (deliveries["t_client_ns"] > r["nacked_ns"])]
        if not same.empty:
            out[i] = (same["t_client_ns"].min() - r["nacked_ns"]) / 1e6
    return out


def fifo_counts(rows: pd.DataFrame) -> dict[str, float | int | None]:
    """The ``fifo.*`` metrics of one variant: messages, out_of_order, overtaken, and the block time (ms)."""
    block = rows["block_ms"].dropna().astype(float)
    out = {
        "messages": int(len(rows)), "out_of_order": int(rows["out_of_order"].sum()),
            "overtaken": int(rows["overtaken"].sum()), "block_n": int(block.size),
            "block_p50": float(np.quantile(block, 0.5)) if block.size else None,
            "block_p90": float(np.quantile(block, 0.9)) if block.size else None,
            "block_max": float(block.max()) if block.size else None}
    assert tuple(out) == FIFO
    return out
