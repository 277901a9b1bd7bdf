"""The scenario x variant matrix over run archives (spark.matrix): one Spark job, one report.

Called by `rmq-harness matrix` after its runs, or directly:
    spark-submit spark/jobs/matrix.py RUN... --variant unpatched --variant patched --variant upstream-5.4.0

Writes (spark.outputs; staged, never overwritten): summary.json (kind "matrix"), per_variant.parquet,
ledger.parquet, retries.parquet, report.html with plots/. Exit codes: 0 done, 1 error, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.contracts.verdict import VerdictRule, add_rule_options
from harness.core.publish import refuse_existing
from spark import outputs
from spark.comparison import check_variants, collect
from spark.io import load_archives
from spark.jobs import entry
from spark.matrix import analyse_matrix


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="matrix", description="Spark scenario x variant matrix of run archives")
    p.add_argument("archives", nargs="+", help="run archive directories")
    p.add_argument("--variant", action="append", dest="variants", required=True, metavar="NAME",
                   help="variants in the matrix, the first being the baseline (repeat)")
    p.add_argument("--out", default=None, help="output directory (default: reports/<time>-matrix)")
    add_rule_options(p)
    p.add_argument("--failed", action="append", default=[], metavar="SCENARIO=REASON",
                   help="a scenario whose run failed, shown in the report (repeat)")
    p.add_argument("--not-applicable", action="append", default=[], metavar="SCENARIO=REASON",
                   help="a scenario form that was not run because it does not apply, shown in the report (repeat)")
    p.add_argument("--master", default=None)
    return p


def run(args: argparse.Namespace, warn: entry.Warn = print, spark: object | None = None) -> dict:
    from harness.report.html import render_matrix
    from spark.session import interruptible

    if args.out:
        refuse_existing(Path(args.out), "report")
    rule = VerdictRule.from_args(args)
    variants = entry.distinct(args.variants)
    failed = entry.reasons("--failed", args.failed)
    not_applicable = entry.reasons("--not-applicable", args.not_applicable)
    archives = load_archives(args.archives, warn=warn)
    check_variants(archives, variants)
    spark = spark or entry.session(args, "rmq-harness-matrix")
    # A Ctrl-C or SIGTERM in the middle comes out as KeyboardInterrupt, never as a cancelled job's error.
    with interruptible(spark):
        c = collect(spark, archives, variants, seed=rule.seed)
        try:
            result = analyse_matrix(c, variants, rule, failed, not_applicable)
            out = Path(args.out) if args.out else outputs.default_out("matrix")
            return outputs.write(c, outputs.summary_of(c, result), out, render_matrix)
        finally:
            c.close()


def main(argv: Sequence[str] | None = None) -> int:
    return entry.main(parser, run, argv)


if __name__ == "__main__":
    sys.exit(main())
