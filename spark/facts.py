"""The per-task side of the Spark analysis: one task reads its share of an archive's events (every event of
the messages it holds), computes harness.measure.tally's facts, writes the retry and ledger rows as Parquet parts
into a scratch directory, and hands its tallies back to Spark.

A task reads its event file itself (pyarrow) rather than through Spark: the facts are pandas work, and
handing ten million events from the JVM to Python costs more than all of it. A file of more than
SHARE_EVENTS events is read by several tasks, each keeping the messages whose id hashes to its share, so
one large run still spreads over the cores. Runs in Spark's Python workers: nothing here needs a
SparkContext.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from harness.contracts.events import COLUMNS_BY_VERSION, SCHEMA
from harness.measure import ledger, tally
from harness.measure.latency import RETRY_SCHEMA
from harness.measure.shares import INPUT_COLUMNS, frame, share_numbers

SHARE_EVENTS = 8_000_000
RETRIES, LEDGER = "retries", "ledger"
# Opens the one line a task says about an event file it cannot read: the driver finds it in whatever Spark
# wrapped the task's error in (unreadable_file) and names the file without a traceback.
UNREADABLE = "rmq-harness: unreadable event file: "


def unreadable_file(error: BaseException) -> str | None:
    """The one line a task's UNREADABLE error said, from the text of the error Spark raised with it."""
    text = str(error)
    at = text.find(UNREADABLE)
    return text[at + len(UNREADABLE):].splitlines()[0] if at >= 0 else None


@dataclass(frozen=True)
class Routing:
    """What a run's facts depend on besides its events (from its scenario)."""

    subscriptions: dict[str, dict[str, list[str]]]
    allowed_deliveries: dict[str, int]
    long_poll_ms: float


@dataclass(frozen=True)
class Task:
    path: str
    version: int  # the archive's event schema version
    share: int
    shares: int


def plan(files: Iterable[tuple[str, int]]) -> list[Task]:
    """(event file, schema version) -> the tasks reading them, by the files' sizes (Parquet footers)."""
    tasks = []
    for path, version in files:
        shares = max(1, math.ceil(pq.ParquetFile(path).metadata.num_rows / SHARE_EVENTS))
        tasks += [Task(path, version, i, shares) for i in range(shares)]
    return tasks


def read_share(task: Task, variants: Sequence[str]) -> pd.DataFrame:
    """The task's events of ``variants``: INPUT_COLUMNS, null where the archive's version predates one."""
    present = [c for c in INPUT_COLUMNS if c in COLUMNS_BY_VERSION[task.version]]
    try:
        # One thread: Spark runs a task per core already.
        table = pq.read_table(task.path, columns=present, filters=[("variant", "in", list(variants))],
                              use_threads=False)
    except (OSError, pa.ArrowException, ValueError) as e:
        # The footer was checked before Spark (spark.io); its data pages only now.
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise OSError(f"{UNREADABLE}{task.path}: its data cannot be read ({first})") from None
    for c in INPUT_COLUMNS:
        if c not in present:
            table = table.append_column(c, pa.nulls(table.num_rows, SCHEMA.field(c).type))
    ev = frame(table.select(INPUT_COLUMNS))
    if task.shares > 1:
        ev = ev[share_numbers(ev, task.shares) == task.share]
    return ev


def share_of_batches(batches: Iterable[pa.RecordBatch]) -> pd.DataFrame:
    """Events handed over by Spark (archives Spark reads itself) as read_share returns them."""
    batches = list(batches)
    return frame(pa.Table.from_batches(batches)) if batches else pd.DataFrame(columns=INPUT_COLUMNS)


def write_part(table: pa.Table, directory: Path, name: str) -> None:
    """One Parquet part, whole or not at all (a task run twice writes the same part again)."""
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{name}.tmp"
    pq.write_table(table, tmp)
    os.replace(tmp, directory / name)


def facts(events: pd.DataFrame, routing: Mapping[str, Routing], scratch: Path, name: str) -> pa.Table:
    """The facts of one task's events, run by run: retry and ledger rows written under ``scratch`` as
    ``retries/<name>`` and ``ledger/<name>``; the tallies returned (TALLY_SCHEMA)."""
    retries, rows, tallies = [], [], []
    runs = events["run_id"].unique()
    for run in runs:  # (one run, the usual case, without copying its events)
        ev = events if len(runs) == 1 else events[(events["run_id"] == run).to_numpy()]
        r = routing[run]
        f = tally.slice_facts(ev, r.subscriptions, r.allowed_deliveries, r.long_poll_ms)
        retries.append(f.retries)
        rows.append(f.ledger)
        tallies.append(f.tallies)

    def table(frames: list[pd.DataFrame], schema: pa.Schema) -> pa.Table:
        if not frames:
            return schema.empty_table()
        return pa.Table.from_pandas(pd.concat(frames, ignore_index=True)[schema.names], schema=schema,
                                    preserve_index=False)

    write_part(table(retries, RETRY_SCHEMA), scratch / RETRIES, name)
    write_part(table(rows, ledger.SCHEMA), scratch / LEDGER, name)
    return table(tallies, tally.TALLY_SCHEMA)
