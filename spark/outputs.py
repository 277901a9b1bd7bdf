"""What a comparison, a matrix or a sweep leaves: a report directory (published whole, never over one;
harness.core.publish) with summary.json (harness.contracts.schemas.SUMMARY; docs/summary.md),
per_variant.parquet, the retry and ledger rows, and report.html with its plots (harness.report.html)."""

from __future__ import annotations

import datetime as dt
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from harness.contracts import schemas
from harness.core.publish import json_safe, json_text, publish_dir
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
        "runs": [{"run_id": a.run_id, "path": a.path, "variants": a.variants} for a in c.archives],
        "per_variant": c.per_variant if per_variant is None else per_variant,
    })


def write(c: Collected, summary: dict, out: Path, render: Callable[..., object],
          log: Callable[[str], None] = _stderr) -> dict:
    """The report directory; the retry and ledger rows move there from ``c.scratch`` (directories of Parquet
    parts). Returns the summary with where the report went."""
    def fill(staging: Path) -> None:
        pq.write_table(pa.Table.from_pandas(c.per_variant_table, preserve_index=False),
                       staging / "per_variant.parquet")
        for name in (RETRIES, LEDGER):
            shutil.move(c.scratch / name, staging / f"{name}.parquet")
        (staging / "summary.json").write_text(json_text(summary))
        render(summary, c.plot, c.samples, staging, timeline=c.timeline)

    publish_dir(out, fill, "report", log)
    c.close()
    return with_place(summary, out)


def with_place(summary: dict, out: Path) -> dict:
    return {**summary, "out": str(out.resolve()), "report": str((out / "report.html").resolve())}


def default_out(kind: str, now: dt.datetime | None = None) -> Path:
    """reports/<time>-<kind>: where a report goes without --out."""
    return Path("reports") / f"{(now or dt.datetime.now(dt.UTC)):%Y%m%d-%H%M%S}-{kind}"
