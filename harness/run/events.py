"""A run's events once its load is over: every worker's shards checked against what the worker counted, merged
into the archive a variant at a time, and summarised as they pass (the record's summary rows); the client's own
failures (a DriverError: it cannot measure) picked out."""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.archive.writer import event_check
from harness.client.driver import CLIENT_UNFIT
from harness.measure.slices import read_events
from harness.measure.tally import Routing, SlicesSummary
from harness.run.hooks import RunState


def client_unfit(path: Path) -> list[str]:
    """The client's DriverErrors among an event file's errors (read a batch at a time)."""
    out = []
    for batch in pq.ParquetFile(path).iter_batches(columns=["kind", "detail"]):
        errors = batch.filter(pc.equal(batch.column("kind"), "error"))
        out += [d for d in errors.column("detail").to_pylist() if (d or "").startswith(CLIENT_UNFIT)]
    return out


def archive_events(run: RunState) -> tuple[list[str], list[str]]:
    """Each variant's events merged into the archive and summarised into ``run.record`` (its events_check and
    summary), one variant at a time (a long run's events are the largest thing a run holds). Returns the workers
    whose events fell short and the client's DriverErrors."""
    sc, shard_dirs = run.scenario, run.fleet.shard_dirs
    checked, missing = event_check(shard_dirs)
    run.record.events_check = {"workers": checked, "problems": missing}
    summary, unfit = [], []
    for variant, shard_dir in sorted(shard_dirs.items()):
        acc = SlicesSummary(Routing.of(sc), [f for f in run.record.faults if f["variant"] == variant])
        # FIFO order is checked over whole message groups: those runs are read again at once. Others are
        # summarised from the slices of messages the merge holds anyway (harness.archive.writer).
        fifo = any(t.message_type == "FIFO" for t in sc.topics)
        path = run.staging.merge_events(variant, shard_dir, None if fifo else acc.add)
        if path is None:
            continue
        if fifo:
            acc.add(read_events(path))
        summary += acc.result()
        unfit += client_unfit(path)
    run.record.summary = summary
    return missing, unfit
