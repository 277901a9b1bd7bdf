"""Writing a run archive atomically: everything goes into a hidden staging directory beside the
final one, which is renamed into place only when complete; an existing archive is never replaced.

The staging directory holds an ``INCOMPLETE`` file from its creation until just before that rename, so
whatever a run leaves behind when it is interrupted or killed says so itself; a committed archive never
holds one.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.archive.schema import MANIFEST, Manifest
from harness.contracts import events as ev
from harness.core.errors import HarnessError
from harness.core.publish import INCOMPLETE, KEEP, mark_incomplete, publish, staging_of, write_atomically
from harness.measure.latency import derive
from harness.measure.shares import INPUT_COLUMNS, frame

# Event columns with few distinct values (names, kinds, topics); read as dictionaries while merging.
REPEATED = ["run_id", "variant", "scenario", "worker", "consumer", "protocol", "kind", "topic", "group",
            "origin_topic", "intended_group", "tag", "message_group"]
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

    def merge_events(self, variant: str, shard_dir: Path) -> Path | None:
        """Merge a variant's worker shards into ``events/<variant>.parquet``, ordered by time, with the derived
        columns filled (harness.measure.latency). Columnar all the way, so a long run's tens of millions of events fit:
        the derived columns are computed over the retry deliveries and nacks only. None without events."""
        shards = sorted(shard_dir.glob("*.parquet"))
        if not shards:
            return None
        # Columns that repeat a handful of values are read as dictionaries: a fraction of the memory.
        table = pa.concat_tables([pq.read_table(s, read_dictionary=REPEATED) for s in shards])
        if table.num_rows == 0:
            return None
        retries = pc.or_(pc.and_(pc.equal(table["kind"].cast(pa.string()), "received"),
                                 pc.greater(table["delivery_attempt"], 1)),
                         pc.equal(table["kind"].cast(pa.string()), "nacked"))
        at = pc.indices_nonzero(pc.fill_null(retries, False))
        derived = derive(frame(_plain(table.select(INPUT_COLUMNS).take(at))))
        for c in ev.DERIVED:
            values = np.full(table.num_rows, np.nan)
            values[at.to_numpy()] = derived[c].to_numpy(dtype=float)
            table = table.set_column(table.schema.get_field_index(c), c, pa.array(values, from_pandas=True))
        # In time order, a slice of the order at a time: never a second copy of the whole table.
        order = pc.sort_indices(table["t_client_ns"])
        path = self.dir("events") / f"{variant}.parquet"
        tmp = path.with_name(f".{path.name}.tmp")
        with pq.ParquetWriter(tmp, ev.SCHEMA) as writer:
            for start in range(0, table.num_rows, WRITE_ROWS):
                writer.write_table(_plain(table.take(order.slice(start, WRITE_ROWS))))
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
