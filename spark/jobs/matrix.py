"""The scenario x variant matrix over run archives (spark.matrix): one Spark job, one report.

Called by `rmq-harness matrix` after its runs, or directly:
    spark-submit spark/jobs/matrix.py RUN... --variant unpatched --variant patched --variant upstream-5.4.0

Writes (spark.outputs; staged, never overwritten): summary.json (kind "matrix"), per_variant.parquet,
ledger.parquet, retries.parquet, report.html with plots/. Exit codes: 0 done, 1 error, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys

from spark import outputs
from spark.comparison import check_variants
from spark.io import load_archives
from spark.jobs import entry
from spark.matrix import analyse_matrix


def parser() -> argparse.ArgumentParser:
    p = entry.archives_parser("matrix", "Spark scenario x variant matrix of run archives", "matrix",
                              "variants in the matrix, the first being the baseline (repeat)")
    p.add_argument("--failed", action="append", default=[], metavar="SCENARIO=REASON",
                   help="a scenario whose run failed, shown in the report (repeat)")
    p.add_argument("--not-applicable", action="append", default=[], metavar="SCENARIO=REASON",
                   help="a scenario form that was not run because it does not apply, shown in the report (repeat)")
    return p


def plan(args: argparse.Namespace, warn: entry.Warn) -> entry.Plan:
    """Each variant once, the first being the baseline."""
    from harness.report.html import render_matrix

    variants = entry.distinct(args.variants)
    failed, not_applicable = entry.reasons(args, "--failed", "--not-applicable")
    archives = load_archives(args.archives, warn=warn)
    check_variants(archives, variants)
    return entry.Plan(archives, variants, lambda c, rule: outputs.summary_of(
        c, analyse_matrix(c, variants, rule, failed, not_applicable)), render_matrix)


JOB = entry.Job("matrix", parser, entry.on_archives(plan))
run, main = JOB.run, JOB.main


if __name__ == "__main__":
    sys.exit(main())
