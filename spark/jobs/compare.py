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

from harness.contracts.verdict import VerdictRule, add_gate_option, gate_exit
from spark import outputs
from spark.comparison import Collected, analyse, check_variants
from spark.io import load_archives
from spark.jobs import entry


def parser() -> argparse.ArgumentParser:
    p = entry.archives_parser("compare", "Spark regression comparison of run archives", "<cand>-vs-<base>")
    p.add_argument("--baseline", required=True, help="variant to compare against")
    p.add_argument("--candidate", required=True, help="variant under test")
    add_gate_option(p)
    p.add_argument("--skip-bad", action="store_true", help="warn about unreadable archives and compare the rest")
    return p


def plan(args: argparse.Namespace, warn: entry.Warn) -> entry.Plan:
    """The two variants in the archives; its log: a line when Spark starts, one when it starts working, one when
    the report is being written."""
    from harness.report.html import render

    wanted = [args.baseline, args.candidate]
    archives = load_archives(args.archives, skip_bad=args.skip_bad, warn=warn)
    check_variants(archives, wanted, ["baseline variant", "candidate variant"])

    def summary(c: Collected, rule: VerdictRule) -> dict:
        per_variant = [r for r in c.per_variant if r["variant"] in wanted]
        return outputs.summary_of(c, analyse(c, args.baseline, args.candidate, rule), per_variant)

    return entry.Plan(archives, wanted, summary, render, kind=f"{args.candidate}-vs-{args.baseline}",
                      starting=lambda spark: f"comparing {args.candidate} against {args.baseline} on Spark "
                                             f"{spark.version}: {len(archives)} archive(s)")


JOB = entry.Job("compare", parser, entry.on_archives(plan),
                exit_code=lambda args, summary: gate_exit(args, [summary["verdict"]]))
run, main = JOB.run, JOB.main


if __name__ == "__main__":
    sys.exit(main())
