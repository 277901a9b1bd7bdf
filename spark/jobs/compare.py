"""Compare a candidate variant against a baseline over one or many run archives.

Called by `rmq-harness compare`, or directly:
    spark-submit spark/jobs/compare.py RUN... --baseline unpatched --candidate patched

collect (Spark), analyse (pure; spark.comparison), write (spark.outputs): summary.json, per_variant.parquet,
retries.parquet, ledger.parquet, report.html with plots/. Exit codes: 0 done, 1 error, 2 bad input,
3 regression with --fail-on-regression.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from harness.contracts.verdict import VerdictRule, add_gate_option, add_rule_options, gate_exit
from harness.core.publish import refuse_existing
from spark import outputs
from spark.comparison import analyse, check_variants, collect
from spark.io import load_archives
from spark.jobs import entry


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="compare", description="Spark regression comparison of run archives")
    p.add_argument("archives", nargs="+", help="run archives: directories or s3://bucket/prefix/<run-id>")
    p.add_argument("--baseline", required=True, help="variant to compare against")
    p.add_argument("--candidate", required=True, help="variant under test")
    p.add_argument("--out", default=None, help="output directory (default: reports/<time>-<cand>-vs-<base>)")
    add_rule_options(p)
    add_gate_option(p)
    p.add_argument("--skip-bad", action="store_true", help="warn about unreadable archives and compare the rest")
    p.add_argument("--master", default=None, help="Spark master (default: local[*], or spark-submit's)")
    return p


def run(args: argparse.Namespace, warn: entry.Warn = print, spark: object | None = None,
        log: Callable[[str], None] = outputs._stderr) -> dict:
    """The whole job; returns the summary (also written to summary.json). ``log``: a line when Spark starts,
    one when it starts working and one when the report is being written. A Ctrl-C or SIGTERM comes out as
    KeyboardInterrupt."""
    from harness.report.html import render
    from spark.session import interruptible

    if args.out:
        refuse_existing(Path(args.out), "report")
    rule = VerdictRule.from_args(args)
    wanted, roles = [args.baseline, args.candidate], ["baseline variant", "candidate variant"]
    # Inputs checked (wherever they are) before paying for a JVM.
    archives = load_archives(args.archives, skip_bad=args.skip_bad, warn=warn)
    check_variants(archives, wanted, roles)
    spark = spark or entry.session(args, "rmq-harness-compare", log=log)
    with interruptible(spark):
        log(f"comparing {args.candidate} against {args.baseline} on Spark {spark.version}: "
            f"{len(archives)} archive(s)")
        collected = collect(spark, archives, wanted, seed=rule.seed)
        try:
            result = analyse(collected, args.baseline, args.candidate, rule)
            out = Path(args.out) if args.out else outputs.default_out(f"{args.candidate}-vs-{args.baseline}")
            per_variant = [r for r in collected.per_variant if r["variant"] in wanted]
            return outputs.write(collected, outputs.summary_of(collected, result, per_variant), out, render, log)
        finally:
            collected.close()


def main(argv: Sequence[str] | None = None) -> int:
    return entry.main(parser, run, argv, lambda args, summary: gate_exit(args, [summary["verdict"]]))


if __name__ == "__main__":
    sys.exit(main())
