"""What a comparison, a matrix or a sweep leaves: a report directory (published whole, never over one;
harness.core.publish) with summary.json (harness.contracts.schemas.SUMMARY; docs/summary.md),
per_variant.parquet, the retry and ledger rows, and report.html with its plots (harness.report.html)."""

from __future__ import annotations

import datetime as dt
import sys
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from harness.contracts import schemas
from harness.contracts.record import RunRecord
from harness.core.publish import json_safe, json_text, publish_dir, write_atomically
from spark import facts
from spark.comparison import Collected
from spark.facts import LEDGER, RETRIES


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def summary_of(c: Collected, result: dict, per_variant: list[dict] | None = None) -> dict:
    """summary.json's document: the schema version, when, what the analysis found, which runs it read."""
    return json_safe({
        "schema_version": schemas.SUMMARY.version,
        "generated_at": dt.datetime.now(dt.UTC).isoformat(),
        **result,
        "runs": [{"run_id": a.run_id, "path": a.path, "variants": a.variants,
                  "variant_order": a.record.variant_order, **what_ran(a.record)} for a in c.archives],
        "per_variant": c.per_variant if per_variant is None else per_variant,
    })


def what_ran(record: RunRecord) -> dict:
    """What a report's first screen says of a run (summary schema 11; 12: its gRPC client; 17: kept brokers): the
    scenario, the harness, the host, when and how long, the client the workers drove and each build with its
    agents and, in a campaign run with --keep-brokers, the earlier run whose brokers it ran on, as its record
    says them (None where an older manifest did not)."""
    scenario = record.scenario
    return {
        "scenario": {"name": scenario.get("name"), "description": scenario.get("description"),
                     "protocol": scenario.get("protocol"), "retry_topic": scenario.get("retry_topic"),
                     "topology": scenario.get("topology"), "duration_s": scenario.get("duration_s"),
                     "cycles": (scenario.get("cycles") or {}).get("count")},
        "harness": {"version": record.harness_version, "git_sha": record.harness_git_sha},
        "host": record.host.model_dump() if record.host else None,
        "started_at": record.started_at,
        "duration_s": record.duration_s,
        "grpc_client": record.grpc_client,
        "builds": [{"variant": v.name, "version": v.version, "jars": v.jars, "external": bool(v.external),
                    "agents": [{"jar": Path(g.jar).name, "options": g.options,
                                "report": v.agent_report.get(Path(g.jar).name, [])} for g in v.agents],
                    "clock_offset_ms": v.clock_offset_ms, "kept": v.kept}
                   for v in record.variants],
    }


class Halted(Exception):
    """The report was abandoned while its rows were being written: nothing more is written."""


class Gate:
    """Lets the rows' writer, in a thread of its own, write only while the report is still wanted: once ``halt``
    returns no write starts, and the one in progress has ended. (pyarrow creates a missing parent directory, so a
    write after the staging directory was removed would bring part of it back.)"""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._halted = False

    def write(self, step: Callable[[], object]) -> None:
        with self._lock:
            if self._halted:
                raise Halted
            step()

    def halt(self) -> None:
        """Waits for a write in progress. A second interrupt while it waits (harness: interruptible delivers one
        again) is the first one still on its way: waited through, the first one is what the caller raises."""
        while True:
            try:
                with self._lock:
                    self._halted = True
                return
            except KeyboardInterrupt:
                continue


def write_rows(parts: object, directories: Mapping[str, Path], gate: Gate | None = None) -> dict[str, int]:
    """The rows of each kind of fact in ``directories`` (spark.facts.RETRY or LEDGER_ROW -> where), each as a
    directory of Parquet files, one a part (``parts``: spark.facts.PARTS_SCHEMA), written here: the parts come
    to the driver a partition (one task's) at a time, in the order they were made, whatever the run's length.
    Every write passes ``gate`` (its owner may halt the writing). Returns the rows written of each kind."""
    from pyspark.sql import functions as F

    gate = gate or Gate()
    for d in directories.values():
        gate.write(lambda d=d: d.mkdir(parents=True, exist_ok=True))
    total, n = dict.fromkeys(directories, 0), dict.fromkeys(directories, 0)
    wanted = parts.where(F.col("fact").isin(list(directories))).select("fact", "rows", "data")
    for part in wanted.toLocalIterator(prefetchPartitions=False):
        kind = part["fact"]
        path = directories[kind] / f"part-{n[kind]:05d}.parquet"
        gate.write(lambda path=path, part=part: write_atomically(path, bytes(part["data"])))
        total[kind], n[kind] = total[kind] + part["rows"], n[kind] + 1
    for kind, d in directories.items():
        if not n[kind]:  # nothing at all: still a dataset of the rows' columns
            empty = facts.OF_KIND[kind].empty_table()
            gate.write(lambda empty=empty, d=d: pq.write_table(empty, d / "part-00000.parquet"))
    return total


def write(c: Collected, summary: dict, out: Path, render: Callable[..., object],
          log: Callable[[str], None] = _stderr) -> dict:
    """The report directory, with every retry and ledger row of ``c`` (spark.facts). Returns the summary with
    where the report went."""
    def fill(staging: Path) -> None:
        pq.write_table(pa.Table.from_pandas(c.per_variant_table, preserve_index=False),
                       staging / "per_variant.parquet")
        # The rows stream from the executors while the report is drawn (a Spark job mostly waited on here). Given
        # up (an interrupt, a failure), the writer is halted before the staging directory can be removed.
        gate = Gate()
        with ThreadPoolExecutor(1, thread_name_prefix="report-rows") as pool:
            rows = pool.submit(write_rows, c.parts, {facts.RETRY: staging / f"{RETRIES}.parquet",
                                                     facts.LEDGER_ROW: staging / f"{LEDGER}.parquet"}, gate)
            try:
                (staging / "summary.json").write_text(json_text(summary))
                render(summary, c.plot, c.samples, staging, timeline=c.timeline)
                rows.result()
            except BaseException:
                gate.halt()
                raise

    publish_dir(out, fill, "report", log)
    c.close()
    return with_place(summary, out)


def with_place(summary: dict, out: Path) -> dict:
    return {**summary, "out": str(out.resolve()), "report": str((out / "report.html").resolve())}


def default_out(kind: str, now: dt.datetime | None = None) -> Path:
    """reports/<time>-<kind>: where a report goes without --out."""
    return Path("reports") / f"{(now or dt.datetime.now(dt.UTC)):%Y%m%d-%H%M%S}-{kind}"
