"""Writing a run archive atomically: everything goes into a hidden staging directory beside the
final one, which is renamed into place only when complete; an existing archive is never replaced.

The staging directory holds an ``INCOMPLETE`` file from its creation until just before that rename, so
whatever a run leaves behind when it is interrupted or killed says so itself; a committed archive never
holds one.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.contracts import events as ev
from harness.contracts.record import MANIFEST, RunRecord
from harness.core.errors import HarnessError
from harness.core.publish import INCOMPLETE, KEEP, mark_incomplete, publish, staging_of, write_atomically
from harness.measure.latency import derive
from harness.measure.slices import INPUT_COLUMNS, count, frame, slice_numbers

WRITE_ROWS = 1_000_000  # rows per write of the merged file (one batch made plain at a time)
SPLIT_ROWS = 250_000  # events split into slices at a time (measured: 1M at a time held 0.8 GB of Arrow memory)


def _plain(table: pa.Table) -> pa.Table:
    """The table with the event schema's own types (dictionary columns back to strings)."""
    return table.cast(pa.schema([ev.SCHEMA.field(n) for n in table.column_names]))


def event_check(shard_dirs: dict[str, Path]) -> tuple[dict[str, dict], list[str]]:
    """Whether every event each worker recorded is in its shards: per variant and worker (a shard's stem) the
    counts per kind its sealed last part says it recorded (harness.contracts.events.EventLog.close) beside the rows its
    parts hold; and one line per worker whose shards fall short (no sealed part: it never closed its log)."""
    out: dict[str, dict] = {}
    problems = []
    for variant, shard_dir in shard_dirs.items():
        workers: dict[str, dict] = {}
        for shard in sorted(shard_dir.glob("*.parquet")):
            stem = shard.name.rsplit("-", 1)[0]
            w = workers.setdefault(stem, {"counted": None, "archived": {}})
            kinds = pq.read_table(shard, columns=["kind"]).column("kind").value_counts().to_pylist()
            for k in kinds:
                w["archived"][k["values"]] = w["archived"].get(k["values"], 0) + k["counts"]
            sealed = ev.counted(shard)
            if sealed is not None:
                w["counted"] = sealed
        for stem, w in workers.items():
            if w["counted"] is None:
                problems.append(f"{variant}: {stem} never sealed its events (killed before it closed its log?): "
                                f"{sum(w['archived'].values())} archived, how many it recorded is unknown")
            elif w["counted"] != w["archived"]:
                short = {k: f"{w['archived'].get(k, 0)} of {n}" for k, n in w["counted"].items()
                         if w["archived"].get(k, 0) != n}
                problems.append(f"{variant}: {stem} recorded events that are not in its shards: {short}")
        out[variant] = workers
    return out, problems


# Events merged in memory at once; a variant with more is merged a slice of its messages at a time (flat
# memory whatever the run's length: measured, a slice of a million events took 1.6 GB at its peak, half a
# million 0.9 GB; bench-results/soak-*.json).
MERGE_SLICE_EVENTS = 500_000
POSITION = "_position"  # an event's place among all the shards' events: the order of events of one time


class _Scratch:
    """The merge's intermediate files, one per slice or span, each written a piece at a time: Arrow IPC streams
    (LZ4). Not Parquet: a Parquet writer holds every row group's metadata until it closes (measured: about 20 KB
    a row group, without statistics), and a run writes slices times batches of them (spans times slices in the
    second pass), which grows as the square of its length; a stream writer holds nothing between pieces."""

    OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4")

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths
        self.open: dict[int, tuple[pa.NativeFile, pa.ipc.RecordBatchStreamWriter]] = {}

    def write(self, k: int, piece: pa.Table) -> None:
        if k not in self.open:
            sink = pa.OSFile(str(self.paths[k]), "wb")
            self.open[k] = (sink, pa.ipc.new_stream(sink, piece.schema, options=self.OPTIONS))
        self.open[k][1].write_table(piece)

    def close(self) -> list[Path]:
        """The files written, in order."""
        for sink, writer in self.open.values():
            writer.close()
            sink.close()
        return [p for k, p in enumerate(self.paths) if k in self.open]


def _read_scratch(path: Path) -> pa.Table:
    with pa.OSFile(str(path)) as f:
        return pa.ipc.open_stream(f).read_all()


def _batches(shards: list[Path]) -> Iterator[pa.Table]:
    """The shards' events in order, about SPLIT_ROWS at a time: a worker writes parts of 50,000 events, and a
    split per part would give every slice a row group per part."""
    buf: list[pa.Table] = []
    rows = 0
    for shard in shards:
        for batch in pq.ParquetFile(shard).iter_batches(batch_size=SPLIT_ROWS):
            buf.append(pa.Table.from_batches([batch]))
            rows += batch.num_rows
            if rows >= SPLIT_ROWS:
                yield pa.concat_tables(buf, promote_options="default")
                buf, rows = [], 0
    if buf:
        yield pa.concat_tables(buf, promote_options="default")


def _split(table: pa.Table, which: np.ndarray) -> Iterator[tuple[int, pa.Table]]:
    """``table``'s rows grouped by ``which`` (in their order within a group): one reordering, then slices (a
    filter per group would read the whole table once per slice)."""
    order = np.argsort(which, kind="stable")
    keys = which[order]
    ordered = table.take(pa.array(order))
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else np.array([], dtype=int)
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(keys)
        yield int(keys[start]), ordered.slice(int(start), int(end - start))


def _positioned(table: pa.Table, first: int) -> pa.Table:
    return table.append_column(POSITION, pa.array(np.arange(first, first + table.num_rows), pa.int64()))


def _with_derived(table: pa.Table) -> pa.Table:
    """``table`` (every event of its messages) with the derived columns filled, computed over the retry
    deliveries and nacks only."""
    kind = table["kind"].cast(pa.string())
    retries = pc.or_(pc.and_(pc.equal(kind, "received"), pc.greater(table["delivery_attempt"], 1)),
                     pc.equal(kind, "nacked"))
    at = pc.indices_nonzero(pc.fill_null(retries, False))
    derived = derive(frame(_plain(table.select(INPUT_COLUMNS).take(at))))
    for c in ev.DERIVED:
        values = np.full(table.num_rows, np.nan)
        values[at.to_numpy()] = derived[c].to_numpy(dtype=float)
        table = table.set_column(table.schema.get_field_index(c), c, pa.array(values, from_pandas=True))
    return table


def _by_message(shards: list[Path], slices: int, work: Path) -> tuple[list[Path], int, int]:
    """The shards' events, numbered in order (POSITION), split into ``slices`` files by message (a batch at a
    time); and the earliest and latest client time among them."""
    scratch = _Scratch([work / f"slice-{k:04d}.arrows" for k in range(slices)])
    seen, low, high = 0, None, None
    try:
        for batch in _batches(shards):
            table = _positioned(batch, seen)
            seen += table.num_rows
            span = pc.min_max(table["t_client_ns"]).as_py()
            if span["min"] is not None:
                low = span["min"] if low is None else min(low, span["min"])
                high = span["max"] if high is None else max(high, span["max"])
            which = slice_numbers(frame(table.select(["kind", "ledger_id", "message_id"])), slices)
            for k, piece in _split(table, which):
                scratch.write(k, piece)
            del table, batch
    finally:
        written = scratch.close()
    return written, low or 0, high or 0


def _by_time(slices: list[Path], n: int, low: int, high: int, work: Path,
             each_slice: Callable[[pd.DataFrame], None] | None) -> list[Path]:
    """Each slice of messages with its derived columns (handed to ``each_slice``), spread into ``2 n`` spans of
    equal time between ``low`` and ``high``; the spans, in time order."""
    spans = 2 * n
    width = (high - low) // spans + 1
    scratch = _Scratch([work / f"span-{j:04d}.arrows" for j in range(spans)])
    try:
        for p in slices:
            table = _with_derived(_read_scratch(p))
            p.unlink()
            if each_slice:
                each_slice(frame(_plain(table.select(INPUT_COLUMNS))))
            which = pc.divide(pc.subtract(pc.fill_null(table["t_client_ns"], low), low), width).to_numpy()
            for j, piece in _split(table, which):
                scratch.write(j, piece)
            del table
            piece = None  # a part of the reordered slice: holds all of it
            pa.default_memory_pool().release_unused()  # what the slice held, back before the next is read
    finally:
        written = scratch.close()
    return written


class ArchiveStaging:
    """A run archive being assembled under ``<runs>/.<run-id>.partial``, marked INCOMPLETE until ``commit``
    renames it to ``<runs>/<run-id>``."""

    def __init__(self, runs_dir: Path, run_id: str) -> None:
        self.runs_dir = runs_dir
        self.run_id = run_id
        self.final = runs_dir / run_id
        if self.final.exists():
            raise HarnessError(f"{self.final} already exists; archives are never overwritten")
        self.path = staging_of(self.final)
        self.path.mkdir(parents=True, exist_ok=False)
        mark_incomplete(self.path, f"run archive of run {run_id}", self.final, KEEP)

    def dir(self, *parts: str) -> Path:
        d = self.path.joinpath(*parts)
        d.mkdir(parents=True, exist_ok=True)
        return d

    def merge_events(self, variant: str, shard_dir: Path,
                     each_slice: Callable[[pd.DataFrame], None] | None = None) -> Path | None:
        """Merge a variant's worker shards into ``events/<variant>.parquet``, ordered by time (events of one
        time in the order the shards hold them), with the derived columns filled (harness.measure.latency);
        ``each_slice`` is handed every event of it (INPUT_COLUMNS), a slice of its messages at a time
        (harness.measure.slices), for a summary that needs no second read. None without events.

        Memory stays flat whatever the run's length: up to MERGE_SLICE_EVENTS events are merged at once; more
        are split by message into slices on disk (the derived columns are per message), each slice derived
        and spread into spans of time, and the spans sorted and written one after another."""
        shards = sorted(shard_dir.glob("*.parquet"))
        rows = sum(pq.read_metadata(s).num_rows for s in shards)
        if not rows:
            return None
        path = self.dir("events") / f"{variant}.parquet"
        tmp = path.with_name(f".{path.name}.tmp")
        slices = count(rows, MERGE_SLICE_EVENTS)
        if slices == 1:
            tables = [pq.read_table(s) for s in shards]
            firsts = np.cumsum([0, *(t.num_rows for t in tables)])
            table = _with_derived(pa.concat_tables([_positioned(t, int(f))
                                                    for t, f in zip(tables, firsts, strict=False)]))
            del tables
            if each_slice:
                each_slice(frame(_plain(table.select(INPUT_COLUMNS))))
            spans = [table]
        else:
            work = self.dir(f".merge-{variant}")
            by_message, low, high = _by_message(shards, slices, work)
            spans = _by_time(by_message, slices, low, high, work, each_slice)
        with pq.ParquetWriter(tmp, ev.SCHEMA) as writer:
            for span in spans:
                table = _read_scratch(span) if isinstance(span, Path) else span
                # In time order, a slice of the order at a time: never a second copy of the whole span.
                order = pc.sort_indices(table, [("t_client_ns", "ascending"), (POSITION, "ascending")])
                for start in range(0, table.num_rows, WRITE_ROWS):
                    writer.write_table(_plain(table.take(order.slice(start, WRITE_ROWS)).drop_columns([POSITION])))
                del table, order
                if isinstance(span, Path):
                    span.unlink()
        if slices > 1:
            shutil.rmtree(work)
        tmp.replace(path)
        return path

    def commit(self, manifest: RunRecord) -> Path:
        files: dict[str, list[str]] = {}
        for p in sorted(self.path.rglob("*")):
            if p.is_file() and p != self.path / INCOMPLETE:
                rel = p.relative_to(self.path)
                files.setdefault(rel.parts[0] if len(rel.parts) > 1 else "root", []).append(str(rel))
        manifest.files = files
        write_atomically(self.path / MANIFEST, manifest.model_dump_json(indent=2))
        if self.final.exists():
            raise HarnessError(f"{self.final} appeared while the run was being written; kept {self.path}")
        return publish(self.path, self.final, f"run archive of run {self.run_id}", KEEP)
