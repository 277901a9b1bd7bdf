"""Archives of any size with a real run's event shapes: a real archive (by default the committed `burst` run of
tests/resources/archives) repeated back to back, as if the run had gone on for that many more cycles. Each
repetition is the template's events as they are (every kind, every column, its cycles, polls, nacks and
retries, its variants' own event rates), its messages renamed (ledger and message ids suffixed with the
repetition) and its clocks moved on by the template's span, its cycle numbers by its cycle count. Written a
block of repetitions at a time, so memory stays flat however large the archive; the manifest is the template's
under the new run id. For benchmarks (bench_spark), never for a verdict.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.core.paths import REPO_ROOT

TEMPLATE = REPO_ROOT / "tests" / "resources" / "archives" / "burst" / "20261126-145553-burst-bed3"
BLOCK_EVENTS = 2_000_000  # events held at a time, per variant
SHIFT_NS = ("t_client_ns", "poll_started_ns", "started_ns")
SHIFT_MS = ("store_ts_ms", "born_ts_ms")
RENAMED = ("ledger_id", "message_id")


def _span(tables: dict[str, pa.Table]) -> tuple[int, int]:
    """How far each repetition moves the clocks (ns; the template's whole span and a second) and the cycles."""
    lows, highs, cycles = [], [], []
    for t in tables.values():
        lo, hi = pc.min_max(t["t_client_ns"]).values()
        lows.append(lo.as_py())
        highs.append(hi.as_py())
        cycles.append(pc.max(t["cycle"]).as_py() or 0)
    # A whole number of milliseconds: the broker's clocks (store_ts_ms) move by exactly what the client's do.
    span_ms = (max(highs) - min(lows)) // 1_000_000 + 1_000
    return span_ms * 1_000_000, max(cycles) + 1


def _repetition(t: pa.Table, rep: int, span_ns: int, cycles: int) -> pa.Table:
    cols = {}
    for name in t.column_names:
        col = t[name]
        if name in SHIFT_NS:
            col = pc.add(col, pa.scalar(rep * span_ns, col.type))
        elif name in SHIFT_MS:
            col = pc.add(col, pa.scalar(rep * (span_ns // 1_000_000), col.type))
        elif name == "cycle":
            col = pc.add(col, pa.scalar(rep * cycles, col.type))
        elif name in RENAMED and rep:
            col = pc.binary_join_element_wise(col, pa.scalar(f"r{rep}"), "-")
        cols[name] = col
    return pa.table(cols, schema=t.schema)


def tiled_archive(runs: Path, events: int, run_id: str, template: Path = TEMPLATE) -> Path:
    """An archive of at least ``events`` events made of ``template`` repeated; returns its directory."""
    paths = sorted((template / "events").glob("*.parquet"))
    tables = {p.stem: pq.read_table(p) for p in paths}
    per_rep = sum(len(t) for t in tables.values())
    reps = math.ceil(events / per_rep)
    span_ns, cycles = _span(tables)
    out = runs / run_id
    (out / "events").mkdir(parents=True)
    for variant, t in tables.items():
        t = t.set_column(t.schema.get_field_index("run_id"), "run_id", pa.array([run_id] * len(t), pa.string()))
        block = max(1, BLOCK_EVENTS // max(1, len(t)))
        with pq.ParquetWriter(out / "events" / f"{variant}.parquet", t.schema) as writer:
            for first in range(0, reps, block):
                writer.write_table(pa.concat_tables(
                    _repetition(t, rep, span_ns, cycles) for rep in range(first, min(reps, first + block))))
    manifest = json.loads((template / "manifest.json").read_text())
    manifest["run_id"] = run_id
    manifest["duration_s"] = round(manifest.get("duration_s", 0) * reps, 1)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return out
