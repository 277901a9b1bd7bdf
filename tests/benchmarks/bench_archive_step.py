"""The archive step alone (merge of the workers' shards and the summary, harness.run.sequence's _summarize), on
the events of a real run: a soak's archive (`make bench-soak`) cut back into worker shards of 50,000 events (as
harness.contracts.events.EventLog writes them, derived columns empty), then merged and summarised as a run
does, with the process's RSS sampled every 0.2 s and marked at each phase.

    .venv/bin/python -m tests.benchmarks.bench_archive_step runs/soak-<time>/<run-id> [VARIANT]

Writes bench-results/archive-step-<time>.json: events, peak RSS (MiB), wall time, RSS at each phase.
"""

from __future__ import annotations

import datetime as dt
import json
import multiprocessing
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.parquet as pq

from harness.archive import writer
from harness.archive.writer import ArchiveStaging
from harness.contracts.events import DERIVED
from harness.core.paths import REPO_ROOT
from harness.inputs.scenario import parse_scenario
from harness.measure.tally import Routing, SlicesSummary

PART_EVENTS = 50_000  # a worker's flush (EventLog.flush_every)
WORKERS = 2


def shards_of(events: Path, out: Path) -> int:
    """The events of ``events`` as WORKERS workers' shards, parts of PART_EVENTS, derived columns empty."""
    out.mkdir(parents=True)
    parts = [0] * WORKERS
    rows = 0
    for i, batch in enumerate(pq.ParquetFile(events).iter_batches(batch_size=PART_EVENTS)):
        table = pa.Table.from_batches([batch])
        for c in DERIVED:
            table = table.set_column(table.schema.get_field_index(c), c, pa.nulls(table.num_rows,
                                                                                   table.schema.field(c).type))
        w = i % WORKERS
        pq.write_table(table, out / f"worker-{w + 1}-{parts[w]:04d}.parquet")
        parts[w] += 1
        rows += table.num_rows
    return rows


def main() -> None:
    archive = Path(sys.argv[1])
    variant = sys.argv[2] if len(sys.argv) > 2 else "unpatched"
    manifest = json.loads((archive / "manifest.json").read_text())
    sc = parse_scenario(manifest["scenario"], str(archive))
    proc = psutil.Process()
    peak = [0]
    marks: list[dict] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.2):
            peak[0] = max(peak[0], proc.memory_info().rss)

    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        # Cut in a process of its own: what cutting leaves in this one's memory is not the archive step's.
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            events = pool.submit(shards_of, archive / "events" / f"{variant}.parquet", Path(tmp) / "shards").result()
        threading.Thread(target=sample, daemon=True).start()
        t0 = time.monotonic()

        def mark(what: str) -> None:
            marks.append({"at_s": round(time.monotonic() - t0, 1), "what": what,
                          "rss_mib": proc.memory_info().rss >> 20, "peak_mib": peak[0] >> 20})

        mark("start")

        acc = SlicesSummary(Routing.of(sc))
        added = [0]

        def add(frame: object) -> None:
            acc.add(frame)
            added[0] += 1
            if added[0] % 10 == 0:
                mark(f"slice {added[0]} summarised")

        staging = ArchiveStaging(Path(tmp) / "runs", "bench")
        staging.merge_events(variant, Path(tmp) / "shards", add)
        mark("merged")
        acc.result()
        mark("summarised")
        wall = time.monotonic() - t0
        stop.set()
    # "merge_share_events" and "shares" (the slices summarised) stay the keys the files in bench-results/ have.
    doc = {"generated_at": dt.datetime.now(dt.UTC).isoformat(), "archive": str(archive), "variant": variant,
           "events": events, "merge_share_events": writer.MERGE_SLICE_EVENTS, "shares": added[0],
           "peak_rss_mib": peak[0] >> 20, "wall_s": round(wall, 1), "marks": marks}
    out = REPO_ROOT / "bench-results" / f"archive-step-{dt.datetime.now(dt.UTC):%Y%m%d-%H%M%S}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps({k: doc[k] for k in ("events", "shares", "peak_rss_mib", "wall_s")}))


if __name__ == "__main__":
    main()
