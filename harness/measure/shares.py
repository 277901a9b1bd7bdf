"""Reading events a share of their messages at a time: every event of a message lands in one share, so the
facts of each share (harness.measure.tally) are whole, and no share holds more events than memory allows. The run's
own summary of a long run and the Spark tasks over a large event file both read this way.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from harness.contracts.events import SCHEMA
from harness.measure import ledger
from harness.measure.latency import RETRY_SCHEMA

# Every event column a fact reads; no other column changes a result.
INPUT_COLUMNS = list(dict.fromkeys([
    *ledger.INPUT_COLUMNS, *[c for c in RETRY_SCHEMA.names if c in SCHEMA.names], "invisible_ms", "message_group"]))


def frame(table: pa.Table) -> pd.DataFrame:
    """Events as pandas, Arrow-backed strings (no Python object per cell); poll start times stay exact
    nanoseconds (nullable integers) where a float would round them."""
    ev = table.to_pandas(types_mapper=lambda t: pd.ArrowDtype(t) if pa.types.is_string(t) else None,
                         use_threads=False)
    if "poll_started_ns" in table.column_names:
        exact = {pa.int64(): pd.Int64Dtype()}.get
        ev["poll_started_ns"] = table.column("poll_started_ns").to_pandas(types_mapper=exact)
    return ev


def share_numbers(events: pd.DataFrame, shares: int) -> np.ndarray:
    """Each event's share: a hash of the id the ledger knows its message by (harness.measure.ledger.message_ids)."""
    ids = ledger.message_ids(events).astype(object).fillna("")
    return pd.util.hash_pandas_object(ids, index=False).to_numpy() % shares


def count(rows: int, per_share: int) -> int:
    """How many shares keep each under ``per_share`` events (evenly spread messages)."""
    return max(1, math.ceil(rows / per_share))


def read_shares(path: Path, shares: int, columns: Sequence[str] = INPUT_COLUMNS) -> Iterator[pd.DataFrame]:
    """The events of ``path`` (``columns``), one share of its messages at a time."""
    table = pq.read_table(path, columns=list(columns))
    if shares == 1:
        yield frame(table)
        return
    which = share_numbers(frame(table.select(["kind", "ledger_id", "message_id"])), shares)
    for k in range(shares):
        yield frame(table.filter(pa.array(which == k)))
