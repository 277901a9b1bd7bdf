"""`rmq-harness compare`: the Spark comparison of run archives (the job's own options, spark/jobs/compare.py)."""

from __future__ import annotations

import argparse

from harness.cli.options import adopt
from harness.contracts.verdict import VerdictRule, gate_exit
from harness.report.terminal import console, print_comparison, warn


def add_parsers(sub: argparse._SubParsersAction) -> None:
    from spark.jobs.compare import parser

    cmp_ = sub.add_parser("compare", help="Spark comparison of run archives: verdict, summary.json, report.html")
    adopt(cmp_, parser())
    cmp_.set_defaults(func=compare_)


def compare_(args: argparse.Namespace) -> int:
    from spark.jobs.compare import run

    VerdictRule.from_args(args)  # a bad option is refused before Spark starts
    with console.status("comparing on Spark ..."):
        summary = run(args, warn=warn)
    print_comparison(summary)
    return gate_exit(args, [summary["verdict"]])


def compare_archives(archives: list[str], baseline: str, candidate: str, gate: bool = False) -> int:
    """`compare` with its defaults, after a run (`run --compare`; ``gate``: its --fail-on-regression)."""
    from spark.jobs.compare import parser

    return compare_(parser().parse_args([*archives, "--baseline", baseline, "--candidate", candidate,
                                         *(["--fail-on-regression"] if gate else [])]))
