"""History over every run archive in directories: add the runs not yet in the dataset (spark.history: per-
cycle levels, partitioned Parquet), then the series per (scenario, variant, metric) over runs and per
(scenario, metric) over releases, their change points (Apache Otava's E-divisive means) and a report.

Called by `rmq-harness history`, or directly:
    spark-submit spark/jobs/history.py runs/ --dataset runs/history

Exit codes: 0 done, 1 error, 2 bad input, 3 the newest run of a series starts a regression (for CI).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path

from harness.contracts.verdict import EXIT_REGRESSION
from harness.core.errors import ConfigError
from harness.core.publish import json_safe, json_text, publish_dir
from harness.core.storage import dir_or_uri, location
from spark import history, outputs
from spark.jobs import entry

DEFAULT_DATASET = Path("runs") / "history"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="history", description="change points over archived runs")
    p.add_argument("sources", nargs="+", help="run archives, or directories holding them (searched below)")
    p.add_argument("--dataset", type=dir_or_uri, default=DEFAULT_DATASET,
                   help="the per-cycle history dataset to add the new runs to and read: a directory or "
                        f"s3://bucket/prefix (default: {DEFAULT_DATASET})")
    p.add_argument("--out", type=Path, default=None, help="report directory (default: reports/<time>-history)")
    p.add_argument("--window", type=int, default=history.WINDOW, help="E-divisive window, in points")
    p.add_argument("--max-pvalue", type=float, default=history.MAX_PVALUE, help="a change point's p-value limit")
    p.add_argument("--master", default=None)
    return p


def work(call: entry.Call) -> dict:
    """Add the new runs (on Spark, when there are any), analyse the whole dataset, write the report."""
    from harness.report.html import render_history

    args = call.args
    if args.window < 4:
        raise ConfigError(f"--window {args.window}: at least 4 points")
    if not 0 < args.max_pvalue < 1:
        raise ConfigError(f"--max-pvalue {args.max_pvalue}: a probability between 0 and 1")
    paths = history.find_archives(args.sources)
    skipped: list[str] = []

    def note(line: str) -> None:
        skipped.append(line)
        call.warn(line)

    added: dict = {"archives_found": len(paths), "runs_added": [], "runs_already_in": [], "files_written": 0}
    if paths:
        with call.spark() as spark:
            added = history.ingest(spark, args.dataset, paths, note)
    result = history.analyse(history.read(args.dataset), args.window, args.max_pvalue)
    now = dt.datetime.now(dt.UTC)
    out = call.out(now=now)
    summary = json_safe({"generated_at": now.isoformat(), "dataset": location(args.dataset).uri, **added,
                         "skipped": skipped, **result})

    def fill(staging: Path) -> None:
        (staging / "summary.json").write_text(json_text(summary))
        render_history(summary, staging)

    publish_dir(out, fill)
    return outputs.with_place(summary, out)


JOB = entry.Job("history", parser, work,
                exit_code=lambda args, summary: EXIT_REGRESSION if summary["regressions"] else 0)
run, main = JOB.run, JOB.main


if __name__ == "__main__":
    sys.exit(main())
