"""`rmq-harness matrix`: every scenario on every variant side by side, then one Spark report."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.options import add_keep_brokers, add_variants_file, refuse_existing
from harness.contracts.options import RunOptions, add_run_options
from harness.contracts.verdict import add_gate_option, gate_exit
from harness.core.errors import HarnessError
from harness.core.storage import dir_or_uri
from harness.inputs.scenario import PROTOCOLS
from harness.inputs.variants import load_variants, select
from harness.report.campaign_tables import print_matrix
from harness.report.console import console, log
from harness.report.run_tables import print_summary


def add_parsers(sub: argparse._SubParsersAction) -> None:
    mx = sub.add_parser("matrix", help="every scenario on every variant (side by side), then one Spark report: "
                        "expectations, ledger and verdicts against the first variant")
    mx.add_argument("--variant", action="append", dest="variants_wanted", metavar="NAME", required=True,
                    help="a variant (repeat; the first is the baseline)")
    mx.add_argument("--scenario", action="append", dest="scenarios", metavar="NAME",
                    help="a scenario file or built-in name (repeat), 'gate' (the gate set: the scenarios marked "
                         "gate: true), 'upstream' (those marked upstream: true) or 'all' (the default)")
    mx.add_argument("--protocol", action="append", dest="protocols", choices=PROTOCOLS, metavar="PROTOCOL",
                    help="run each scenario over this protocol (repeat for both: grpc, remoting); a form over "
                         "another protocol than the scenario's is NAME-PROTOCOL (default: each scenario's own)")
    mx.add_argument("--runs-dir", type=dir_or_uri, default=Path("runs"),
                    help="where run archives go: a directory or s3://bucket/prefix (default: runs/)")
    mx.add_argument("--archives", type=dir_or_uri, nargs="+", default=None,
                    help="analyse these archives instead of running (e.g. to re-render a matrix)")
    mx.add_argument("--out", type=Path, default=None, help="report directory (default: reports/<time>-matrix)")
    add_variants_file(mx)
    add_run_options(mx)
    add_keep_brokers(mx)
    add_gate_option(mx, "any candidate regresses against the baseline")
    mx.set_defaults(func=matrix_command)


def matrix_command(args: argparse.Namespace) -> int:
    from harness.campaigns import matrix
    from harness.campaigns.loop import Campaign, Outcome
    from spark.jobs.matrix import parser as matrix_parser
    from spark.jobs.matrix import run as run_matrix

    variants = select(load_variants(args.variants, say=log), args.variants_wanted)
    refuse_existing(args.out)
    not_applicable: dict[str, str] = {}
    if args.archives:
        outcome = Outcome(archives=list(args.archives))
    else:
        planned = matrix.scenarios(args.scenarios or [matrix.ALL], args.protocols or ())
        plan, not_applicable = planned.scenarios, planned.not_applicable
        for name, why in not_applicable.items():
            console.print(f"[yellow]not run: {name}[/]: {why}")
        campaign = Campaign(args.runs_dir, RunOptions.from_args(args), log, on_result=print_summary, min_variants=2,
                            keep_brokers=args.keep_brokers)
        matrix.check(plan, variants, campaign)
        total = sum(matrix.estimate_s(sc) for sc in plan)
        console.print(f"matrix: {len(plan)} scenario(s) x {len(variants)} variant(s), about {total / 60:.0f} min: "
                      f"{', '.join(sc.name for sc in plan)}")
        outcome = matrix.run_all(plan, variants, campaign)
        if not outcome.archives:
            raise HarnessError("every scenario's run failed; see the lines above")
        not_applicable = {**not_applicable, **outcome.not_applicable}
    argv = [*map(str, outcome.archives), *[x for v in variants for x in ("--variant", v.name)],
            *[x for s, why in outcome.failed.items() for x in ("--failed", f"{s}={why}")],
            *[x for s, why in not_applicable.items() for x in ("--not-applicable", f"{s}={why}")]]
    if args.out:
        argv += ["--out", str(args.out)]
    if args.fail_on_regression:  # a gate tests one-sided (harness.contracts.verdict.VerdictRule.one_sided)
        argv += ["--one-sided"]
    with console.status("the matrix on Spark ..."):
        summary = run_matrix(matrix_parser().parse_args(argv))
    print_matrix(summary)
    return gate_exit(args, [r["verdict"] for r in summary["against_baseline"].values()])
