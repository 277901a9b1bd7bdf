"""Writing a run archive atomically: everything goes into a hidden staging directory beside the
final one, which is renamed into place only when complete; an existing archive is never replaced.

The staging directory holds an ``INCOMPLETE`` file from its creation until just before that rename, so
whatever a run leaves behind when it is interrupted or killed says so itself; a committed archive never
holds one.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.archive.schema import MANIFEST, Manifest
from harness.contracts import events as ev
from harness.core.errors import HarnessError
from harness.core.publish import INCOMPLETE, KEEP, mark_incomplete, publish, staging_of, write_atomically
from harness.measure.latency import derive
from harness.measure.shares import INPUT_COLUMNS, count, frame, share_numbers

WRITE_ROWS = 1_000_000  # rows per write of the merged file (one batch made plain at a time)


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


# Events merged in memory at once; a variant with more is merged a share of its messages at a time (flat
# memory: about 1 GB at the most here, whatever the run's length).
MERGE_SHARE_EVENTS = 1_000_000
POSITION = "_position"  # an event's place among all the shards' events: the order of events of one time


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


def _by_message(shards: list[Path], shares: int, work: Path) -> list[Path]:
    """The shards' events, numbered in order (POSITION), split into ``shares`` files by message (a batch at a
    time)."""
    paths = [work / f"share-{k:04d}.parquet" for k in range(shares)]
    writers: dict[int, pq.ParquetWriter] = {}
    seen = 0
    try:
        for shard in shards:
            for batch in pq.ParquetFile(shard).iter_batches(batch_size=WRITE_ROWS):
                table = _positioned(pa.Table.from_batches([batch]), seen)
                seen += table.num_rows
                which = share_numbers(frame(table.select(["kind", "ledger_id", "message_id"])), shares)
                for k in np.unique(which):
                    if k not in writers:
                        writers[k] = pq.ParquetWriter(paths[k], table.schema)
                    writers[k].write_table(table.filter(pa.array(which == k)))
    finally:
        for w in writers.values():
            w.close()
    return [p for k, p in enumerate(paths) if k in writers]


def _by_time(shares: list[Path], n: int, work: Path,
             each_share: Callable[[pd.DataFrame], None] | None) -> list[Path]:
    """Each share of messages with its derived columns (handed to ``each_share``), spread into ``2 n`` spans of
    equal time; the spans, in time order."""
    low = high = None
    for p in shares:
        stats = pc.min_max(pq.read_table(p, columns=["t_client_ns"]).column("t_client_ns")).as_py()
        low = stats["min"] if low is None else min(low, stats["min"])
        high = stats["max"] if high is None else max(high, stats["max"])
    spans = 2 * n
    width = (high - low) // spans + 1
    paths = [work / f"span-{j:04d}.parquet" for j in range(spans)]
    writers: dict[int, pq.ParquetWriter] = {}
    try:
        for p in shares:
            table = _with_derived(pq.read_table(p))
            p.unlink()
            if each_share:
                each_share(frame(_plain(table.select(INPUT_COLUMNS))))
            which = pc.divide(pc.subtract(pc.fill_null(table["t_client_ns"], low), low), width).to_numpy()
            for j in np.unique(which):
                if j not in writers:
                    writers[j] = pq.ParquetWriter(paths[j], table.schema)
                writers[j].write_table(table.filter(pa.array(which == j)))
            del table
    finally:
        for w in writers.values():
            w.close()
    return [p for j, p in enumerate(paths) if j in writers]


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
                     each_share: Callable[[pd.DataFrame], None] | None = None) -> Path | None:
        """Merge a variant's worker shards into ``events/<variant>.parquet``, ordered by time (events of one
        time in the order the shards hold them), with the derived columns filled (harness.measure.latency);
        ``each_share`` is handed every event of it (INPUT_COLUMNS), a share of its messages at a time
        (harness.measure.shares), for a summary that needs no second read. None without events.

        Memory stays flat whatever the run's length: up to MERGE_SHARE_EVENTS events are merged at once; more
        are split by message into shares on disk (the derived columns are per message), each share derived
        and spread into spans of time, and the spans sorted and written one after another."""
        shards = sorted(shard_dir.glob("*.parquet"))
        rows = sum(pq.read_metadata(s).num_rows for s in shards)
        if not rows:
            return None
        path = self.dir("events") / f"{variant}.parquet"
        tmp = path.with_name(f".{path.name}.tmp")
        shares = count(rows, MERGE_SHARE_EVENTS)
        if shares == 1:
            tables = [pq.read_table(s) for s in shards]
            firsts = np.cumsum([0, *(t.num_rows for t in tables)])
            table = _with_derived(pa.concat_tables([_positioned(t, int(f))
                                                    for t, f in zip(tables, firsts, strict=False)]))
            del tables
            if each_share:
                each_share(frame(_plain(table.select(INPUT_COLUMNS))))
            spans = [table]
        else:
            work = self.dir(f".merge-{variant}")
            spans = _by_time(_by_message(shards, shares, work), shares, work, each_share)
        with pq.ParquetWriter(tmp, ev.SCHEMA) as writer:
            for span in spans:
                table = pq.read_table(span) if isinstance(span, Path) else span
                # In time order, a slice of the order at a time: never a second copy of the whole span.
                order = pc.sort_indices(table, [("t_client_ns", "ascending"), (POSITION, "ascending")])
                for start in range(0, table.num_rows, WRITE_ROWS):
                    writer.write_table(_plain(table.take(order.slice(start, WRITE_ROWS)).drop_columns([POSITION])))
                del table, order
                if isinstance(span, Path):
                    span.unlink()
        if shares > 1:
            shutil.rmtree(work)
        tmp.replace(path)
        return path

    def commit(self, manifest: Manifest) -> Path:
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
