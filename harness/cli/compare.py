"""`rmq-harness compare`: the Spark comparison of run archives (the job's own options, spark/jobs/compare.py)."""

from __future__ import annotations

import argparse

from harness.cli.options import add_format_option, adopt
from harness.contracts.verdict import VerdictRule, gate_exit
from harness.report.console import TABLE, log_to, progress_console, warn
from harness.report.rows import print_comparison_as


def add_parsers(sub: argparse._SubParsersAction) -> None:
    from spark.jobs.compare import parser

    cmp_ = sub.add_parser("compare", help="Spark comparison of run archives: verdict, summary.json, report.html")
    adopt(cmp_, parser())
    add_format_option(cmp_)
    cmp_.set_defaults(func=compare_command)


def compare_command(args: argparse.Namespace) -> int:
    from spark.jobs.compare import run

    VerdictRule.from_args(args)  # a bad option is refused before Spark starts
    fmt = getattr(args, "format", TABLE)
    out = progress_console(fmt)
    with out.status("comparing on Spark ..."):
        summary = run(args, warn=warn, log=log_to(out))
    print_comparison_as(summary, fmt)
    return gate_exit(args, [summary["verdict"]])


def compare_archives(archives: list[str], baseline: str, candidate: str, gate: bool = False,
                     fmt: str = TABLE) -> int:
    """`compare` with its defaults, after a run (`run --compare`; ``gate``: its --fail-on-regression; ``fmt``: its
    --format)."""
    from spark.jobs.compare import parser

    args = parser().parse_args([*archives, "--baseline", baseline, "--candidate", candidate,
                                *(["--fail-on-regression"] if gate else [])])
    args.format = fmt
    return compare_command(args)
