"""The per-task side of the Spark analysis: one task holds every event of the messages it is given, computes
harness.measure.tally's facts, and hands them back to Spark as Parquet parts (PARTS_SCHEMA: a row per kind of
fact, run and chunk of at most CHUNK_ROWS rows, the rows inside as Parquet bytes), so the facts stay on the
executors, whatever node they run on, and nothing passes through a disk of the driver's. Parquet inside a row
rather than a row per fact: Spark moves and caches a few hundred binary values for the millions of rows of a
large run at almost no cost (measured on 10M events: a row per fact took 7 s more to cache than computing all
the facts costs), and a report's retry and ledger rows are these parts as they are.

The tasks read the event files themselves (pyarrow, a local path, file:// or s3://: harness.core.storage)
rather than through Spark: the facts are pandas work, and handing ten million events from the JVM to Python
costs more than all of it. ``plan`` gives a task a whole file, or, for a file larger than a task's share of the
events (``per_task``: the events spread over twice the cores, between MIN_SLICE_EVENTS and SLICE_EVENTS), a
slice of its messages (harness.measure.slices): the file's readers (``Reader``: a run of its row groups each)
cut what they read into the slices (``pieces``, Arrow IPC), Spark's shuffle brings each slice's pieces to one
task (``slice_events``), on whatever node. Each event is read once however many slices its file has, and the
cores stay busy when one variant's file is three times the other's. Runs in Spark's Python workers: nothing
here needs a SparkContext.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.contracts.events import COLUMNS_BY_VERSION, SCHEMA
from harness.core.storage import filesystem
from harness.inputs.expectations import DISTRIBUTIONS
from harness.measure import ledger, tally
from harness.measure.latency import RETRY_SCHEMA
from harness.measure.slices import INPUT_COLUMNS, count, frame, slice_numbers

# The most events a task holds: its memory, about 900 bytes an event in its Python worker (measured 2026-11-30:
# 7,155 MiB with 8M, on the 100M-event attempt of bench_spark, when an executor's JVM also ran out of its heap).
SLICE_EVENTS = 4_000_000
# A file of fewer events is read whole by one task, however many cores wait: a slice's shuffle costs more than
# it saves below that (and the archives of tests and of most runs are read as they always were).
MIN_SLICE_EVENTS = 1_000_000
RETRIES, LEDGER = "retries", "ledger"
# The values of PARTS_SCHEMA's ``fact``. TALLY, RETRY, LEDGER_ROW: the facts (OF_KIND's rows, as Parquet: a
# report's files are these parts as they are). DIST: a run's retry latencies (DISTRIBUTIONS) of one (scenario,
# variant), as Arrow IPC, what the percentiles are computed from. SAMPLE: the retry rows (SAMPLE_COLUMNS) each
# kept with probability ``fraction``, with their draw ``u`` and place ``row``, as Arrow IPC: a comparison's
# sample of a large run taken without reading its retry rows again.
TALLY, RETRY, LEDGER_ROW, DIST, SAMPLE = "tally", "retry", "ledger", "dist", "sample"
OF_KIND = {TALLY: tally.TALLY_SCHEMA, RETRY: RETRY_SCHEMA, LEDGER_ROW: ledger.SCHEMA}
SAMPLE_COLUMNS = ("scenario", "variant", "run_id", "cycle", "t_client_ns", *DISTRIBUTIONS)
SAMPLE_SCHEMA = pa.schema([*(RETRY_SCHEMA.field(c) for c in SAMPLE_COLUMNS), ("row", pa.int64()), ("u", pa.float64())])
# A part: ``rows`` facts of one kind, of one run (the ``run``-th of the ``task``-th task). (task, run, chunk) is
# the order the rows were made in: the order a comparison reads them in, whatever order Spark hands the parts
# back in (the bootstrap draws by position).
PARTS_SCHEMA = pa.schema([("fact", pa.string()), ("task", pa.int32()), ("run", pa.int32()), ("chunk", pa.int32()),
                          ("run_id", pa.string()), ("scenario", pa.string()), ("variant", pa.string()),
                          ("fraction", pa.float64()), ("rows", pa.int64()), ("data", pa.binary())])
ORDER = ("task", "run", "chunk")
IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression="zstd")
CHUNK_ROWS = 500_000  # rows a part: what a task, or the driver writing a report, holds of one at a time
# How many more retry rows the tasks draw (SAMPLE) than a comparison expects to keep, counting one retry for
# every SAMPLE_HEADROOM events: a run with fewer retries than that is sampled again (spark.analysis.retry_sample).
SAMPLE_HEADROOM = 8


def sample_fraction(tasks: Sequence[Task], wanted_rows: int | None) -> float:
    """The probability each task keeps a retry row with: enough for ``wanted_rows`` (None: every row) in a run
    with a retry every SAMPLE_HEADROOM events."""
    events = sum(t.file_rows for t in tasks if t.slice_index == 0)
    if wanted_rows is None or events <= 0:
        return 1.0
    return min(1.0, SAMPLE_HEADROOM * wanted_rows / events)
# Opens the one line a task says about an event file it cannot read: the driver finds it in whatever Spark
# wrapped the task's error in (unreadable_file) and names the file without a traceback.
UNREADABLE = "rmq-harness: unreadable event file: "


def unreadable_file(error: BaseException) -> str | None:
    """The one line a task's UNREADABLE error said, from the text of the error Spark raised with it."""
    text = str(error)
    at = text.find(UNREADABLE)
    return text[at + len(UNREADABLE):].splitlines()[0] if at >= 0 else None


@dataclass(frozen=True)
class Task:
    path: str
    version: int  # the archive's event schema version
    slice_index: int  # which slice of the file's messages (harness.measure.slices) the task holds, of ``slices``
    slices: int
    file_rows: int  # events in the whole file (every variant)


@dataclass(frozen=True)
class Reader:
    """A run of row groups of a sliced file, cut into its ``slices`` (``pieces``)."""

    path: str
    version: int
    row_groups: tuple[int, ...]
    slices: int
    first_task: int  # the number of the task holding the file's first slice (its others follow)


@dataclass(frozen=True)
class Plan:
    """The tasks (whole files first, then the slices of the larger ones: a task's number is its place here)
    and the readers of the sliced files."""

    tasks: list[Task]
    readers: list[Reader]

    @property
    def whole(self) -> list[Task]:
        return [t for t in self.tasks if t.slices == 1]


def per_task(total_events: int, cores: int) -> int:
    """The events a task holds at most: the events spread over twice the cores (so that a file three times
    another's does not keep one core busy while the other waits), between MIN_SLICE_EVENTS and SLICE_EVENTS."""
    return min(SLICE_EVENTS, max(MIN_SLICE_EVENTS, math.ceil(total_events / (2 * max(1, cores)))))


def plan(files: Iterable[tuple[str, int]], cores: int = 1) -> Plan:
    """(event file, schema version) -> the tasks and readers, by the files' sizes and row groups (Parquet
    footers) and the ``cores`` the tasks run on."""
    sized = []
    for path, version in files:
        where, inner = filesystem(path)
        with where.open_input_file(inner) as f:
            meta = pq.read_metadata(f)
        sized.append((path, version, meta.num_rows, [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]))
    most = per_task(sum(rows for _, _, rows, _ in sized), cores)
    sliced = [(path, version, rows, groups, count(rows, most)) for path, version, rows, groups in sized]
    tasks = [Task(path, version, 0, 1, rows) for path, version, rows, _, slices in sliced if slices == 1]
    readers = []
    for path, version, rows, groups, slices in sliced:
        if slices == 1:
            continue
        first = len(tasks)
        tasks += [Task(path, version, i, slices, rows) for i in range(slices)]
        run: list[int] = []
        held = 0
        for g, n in enumerate(groups):  # consecutive row groups, up to a task's events at a time (one at least)
            if run and held + n > most:
                readers.append(Reader(path, version, tuple(run), slices, first))
                run, held = [], 0
            run.append(g)
            held += n
        readers.append(Reader(path, version, tuple(run), slices, first))
    return Plan(tasks, readers)


def read_slice(task: Task, variants: Sequence[str]) -> pd.DataFrame:
    """The events of ``variants`` of a whole file's task: INPUT_COLUMNS, null where the archive's version
    predates one."""
    return frame(read_table(task.path, task.version, variants, INPUT_COLUMNS))


def read_table(path: str, version: int, variants: Sequence[str], columns: Sequence[str],
               row_groups: Sequence[int] | None = None) -> pa.Table:
    """The events of ``variants`` in a file (``row_groups`` of it, if given) as Arrow, ``columns`` of them (of
    the events' own types), null where the archive's version predates one."""
    present = [c for c in columns if c in COLUMNS_BY_VERSION[version]]
    try:
        # One thread: Spark runs a task per core already.
        where, inner = filesystem(path)
        if row_groups is None:
            table = pq.read_table(inner, columns=present, use_threads=False, filesystem=where)
        else:
            with where.open_input_file(inner) as f:
                table = pq.ParquetFile(f).read_row_groups(list(row_groups), columns=present, use_threads=False)
    except (OSError, pa.ArrowException, ValueError) as e:
        # The footer was checked before Spark (spark.io); its data pages only now.
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise OSError(f"{UNREADABLE}{path}: its data cannot be read ({first})") from None
    # Filtered here, not by read_table's filters: an event file holds one variant as a rule, and a filter in
    # the read costs a 5M-event file 1.7 s more than reading it whole (measured).
    keep = pc.is_in(table.column("variant"), value_set=pa.array(list(variants), pa.string()))
    if not pc.all(keep).as_py():
        table = table.filter(keep)
    for c in columns:
        if c not in present:
            table = table.append_column(c, pa.nulls(table.num_rows, SCHEMA.field(c).type))
    return table.select(list(columns))


def pieces(reader: Reader, number: int, variants: Sequence[str]) -> Iterator[tuple[int, tuple[int, bytes]]]:
    """What the ``number``-th reader read, cut by slice: (the task holding the slice, (``number``, its events
    of the slice as Arrow IPC)), one for every slice, empty ones included (a slice's task then knows it has
    every piece it will get)."""
    table = read_table(reader.path, reader.version, variants, INPUT_COLUMNS, reader.row_groups)
    numbers = slice_numbers(frame(table.select(["kind", "ledger_id", "message_id"])), reader.slices)
    for s in range(reader.slices):
        yield reader.first_task + s, (number, to_ipc(table.filter(pa.array(numbers == s))))


def slice_events(got: Iterable[tuple[int, bytes]]) -> pd.DataFrame:
    """A slice's events from its pieces (``pieces``' (reader, IPC) pairs, in any order): in the readers'
    order, so in the file's, as a task reading the whole file and keeping the slice would hold them."""
    tables = [from_ipc(data) for _, data in sorted(got, key=lambda p: p[0])]
    return frame(pa.concat_tables(tables)) if tables else pd.DataFrame(columns=INPUT_COLUMNS)


def slice_of_batches(batches: Iterable[pa.RecordBatch]) -> pd.DataFrame:
    """Events handed over by Spark (archives Spark reads itself) as read_slice returns them."""
    batches = list(batches)
    return frame(pa.Table.from_batches(batches)) if batches else pd.DataFrame(columns=INPUT_COLUMNS)


def encode(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def to_ipc(table: pa.Table) -> bytes:
    """Arrow's own format: for rows that only cross a shuffle (cheaper to write and read than Parquet).
    Compressed (zstd): a million events' pieces are 38 MiB rather than 299 and take 0.2 s to write rather than
    2.0 (measured: the copy of the uncompressed bytes costs more than compressing them)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=IPC_OPTIONS) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def from_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.BufferReader(data)).read_all()


def decode(data: bytes, columns: Sequence[str] | None = None) -> pa.Table:
    return pq.read_table(pa.BufferReader(data), columns=list(columns) if columns else None, use_threads=False)


def facts(events: pd.DataFrame, routing: Mapping[str, tally.Routing], task: int, chunk_rows: int = CHUNK_ROWS,
          sample_fraction: float = 1.0, seed: int = 1) -> pa.Table:
    """The facts of one task's events (the ``task``-th), run by run, as PARTS_SCHEMA rows: per run, its
    tallies (harness.measure.tally.TALLY_SCHEMA), its retry rows and its ledger rows, each in parts of at most
    ``chunk_rows`` rows (an empty part when there are none); its retry latencies per (scenario, variant) (DIST);
    and its retry rows drawn with probability ``sample_fraction`` (SAMPLE; the draws seeded by ``seed``, the
    task and the run)."""
    parts = []
    runs = events["run_id"].unique()
    for i, run in enumerate(runs):  # (one run, the usual case, without copying its events)
        ev = events if len(runs) == 1 else events[(events["run_id"] == run).to_numpy()]
        f = tally.slice_facts(ev, routing[run])
        common = {"task": task, "run": i, "run_id": str(run), "scenario": None, "variant": None, "fraction": None}
        for fact, rows in ((TALLY, f.tallies), (RETRY, f.retries), (LEDGER_ROW, f.ledger)):
            schema = OF_KIND[fact]
            whole = pa.Table.from_pandas(rows[schema.names], schema=schema, preserve_index=False)
            for chunk, start in enumerate(range(0, max(1, whole.num_rows), chunk_rows)):
                piece = whole.slice(start, chunk_rows)
                parts.append({**common, "fact": fact, "chunk": chunk, "rows": piece.num_rows, "data": encode(piece)})
        retries = f.retries.reset_index(drop=True)
        for chunk, ((scenario, variant), group) in enumerate(retries.groupby(["scenario", "variant"], sort=True)):
            values = pa.Table.from_pandas(group[list(DISTRIBUTIONS)], preserve_index=False)
            parts.append({**common, "fact": DIST, "chunk": chunk, "scenario": str(scenario), "variant": str(variant),
                          "rows": len(group), "data": to_ipc(values)})
        u = np.random.default_rng([seed, task, i]).random(len(retries))
        kept = np.flatnonzero(u < sample_fraction)
        drawn = pa.Table.from_pandas(retries.iloc[kept][list(SAMPLE_COLUMNS)].assign(row=kept, u=u[kept]),
                                     schema=SAMPLE_SCHEMA, preserve_index=False)
        parts.append({**common, "fact": SAMPLE, "chunk": 0, "fraction": sample_fraction, "rows": drawn.num_rows,
                      "data": to_ipc(drawn)})
    return pa.Table.from_pylist(parts, schema=PARTS_SCHEMA)
