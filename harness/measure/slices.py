"""Events a slice of their messages at a time: every event of a message lands in one slice (``slice_numbers``), so
the facts of each slice (harness.measure.tally) are whole, and no slice holds more events than memory allows. The
archive's merge of a long run (harness.archive.writer), and with it the run's own summary, and the Spark tasks
over a large event file (spark.facts) both split events this way; the columns they read and how they hold them.
"""

from __future__ import annotations

import math
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
    *ledger.INPUT_COLUMNS, *[c for c in RETRY_SCHEMA.names if c in SCHEMA.names], "invisible_ms", "message_group",
    "delivered_topic"]))


def frame(table: pa.Table) -> pd.DataFrame:
    """Events as pandas, Arrow-backed strings (no Python object per cell); poll start times stay exact
    nanoseconds (nullable integers) where a float would round them."""
    ev = table.to_pandas(types_mapper=lambda t: pd.ArrowDtype(t) if pa.types.is_string(t) else None,
                         use_threads=False)
    if "poll_started_ns" in table.column_names:
        exact = {pa.int64(): pd.Int64Dtype()}.get
        ev["poll_started_ns"] = table.column("poll_started_ns").to_pandas(types_mapper=exact)
    return ev


def slice_numbers(events: pd.DataFrame, slices: int) -> np.ndarray:
    """Each event's slice: a hash of the id the ledger knows its message by (harness.measure.ledger.message_ids)."""
    ids = ledger.message_ids(events).astype(object).fillna("")
    return pd.util.hash_pandas_object(ids, index=False).to_numpy() % slices


def count(rows: int, per_slice: int) -> int:
    """How many slices keep each under ``per_slice`` events (evenly spread messages)."""
    return max(1, math.ceil(rows / per_slice))


def read_events(path: Path) -> pd.DataFrame:
    """Every event of ``path`` at once (INPUT_COLUMNS), as ``frame`` holds them."""
    return frame(pq.read_table(path, columns=INPUT_COLUMNS))
