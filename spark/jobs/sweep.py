"""A release sweep over run archives (spark.sweep): per scenario, each release's level with its interval, its
p90 and its ledger, and where the behaviour changed between adjacent releases.

Called by `rmq-harness sweep` after its runs, or directly:
    spark-submit spark/jobs/sweep.py RUN... --variant rocketmq-5.2.0 --variant rocketmq-5.3.3 ...

Writes (spark.outputs; staged, never overwritten): summary.json (kind "sweep"), per_variant.parquet,
ledger.parquet, retries.parquet, report.html with plots/. Exit codes: 0 done, 1 error, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys

from harness.core.errors import ConfigError
from spark import outputs
from spark.comparison import check_variants
from spark.io import load_archives
from spark.jobs import entry
from spark.sweep import analyse_sweep


def parser() -> argparse.ArgumentParser:
    p = entry.archives_parser("sweep", "Spark release sweep of run archives", "sweep",
                              "the releases' variants, oldest first (repeat)")
    p.add_argument("--skipped", action="append", default=[], metavar="VERSION=REASON",
                   help="a release not run (Maven Central cannot assemble it), shown in the report (repeat)")
    p.add_argument("--failed", action="append", default=[], metavar="SCENARIO@VARIANT=REASON",
                   help="a run that failed, shown in the report (repeat)")
    p.add_argument("--not-applicable", action="append", default=[], metavar="SCENARIO@VARIANT=REASON",
                   help="a release a scenario could not run on (it lacks a setting the scenario needs) (repeat)")
    return p


def plan(args: argparse.Namespace, warn: entry.Warn) -> entry.Plan:
    """The releases the archives hold, oldest first (a release not run is left out)."""
    from harness.report.html import render_sweep

    variants = entry.distinct(args.variants, "release")
    skipped, failed, not_applicable = entry.reasons(args, "--skipped", "--failed", "--not-applicable")
    archives = load_archives(args.archives, warn=warn)
    present = {v for a in archives for v in a.variants}
    ran = [v for v in variants if v in present]
    if not ran:
        raise ConfigError(f"none of {', '.join(variants)} is in the archives")
    check_variants(archives, ran)
    return entry.Plan(archives, ran, lambda c, rule: outputs.summary_of(
        c, analyse_sweep(c, ran, rule, skipped, failed, not_applicable)), render_sweep)


JOB = entry.Job("sweep", parser, entry.on_archives(plan))
run, main = JOB.run, JOB.main


if __name__ == "__main__":
    sys.exit(main())
