"""`rmq-harness calibrate`: the verdict rule measured on real brokers (A/A and planted slowdowns)."""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

from harness.cli.options import add_keep_brokers, add_out_file, add_variants_file
from harness.contracts.options import RunOptions, add_run_options
from harness.contracts.verdict import VerdictRule, add_rule_options
from harness.core.errors import ConfigError, HarnessError
from harness.core.storage import dir_or_uri
from harness.inputs.variants import load_variants, select
from harness.report.campaign_tables import print_calibration
from harness.report.console import console, log


def add_parsers(sub: argparse._SubParsersAction) -> None:
    cal = sub.add_parser("calibrate", help="measure the verdict rule on real brokers: the false-verdict rate of "
                         "two identical builds (A/A) and the detection rate of planted slowdowns")
    cal.add_argument("--variant", default="patched", help="the build to calibrate on (default: patched)")
    cal.add_argument("--scenario", action="append", dest="scenarios", metavar="SCENARIO",
                     help="scenario file, or a name in workloads/scenarios/ (repeat; 'gate': the gate set, every "
                          "scenario marked gate: true; default: burst); each round runs each scenario once")
    cal.add_argument("--runs", type=int, default=60,
                     help="A/A runs per scenario (the build beside a copy), each judged on its own (default 60: "
                          "with no false verdict, the one-sided 95%% bound of the rate is under 5%%)")
    cal.add_argument("--shift-ms", type=int, action="append", dest="shifts",
                     help="a planted wakeup delay, ms (repeatable; default 50)")
    cal.add_argument("--shift-runs", type=int, default=10,
                     help="runs per planted delay and scenario judged on the wakeup (the build beside the build "
                          "plus the delay; default 10)")
    cal.add_argument("--runs-dir", type=dir_or_uri, default=None,
                     help="where the runs' archives go (default: runs/calibration-<time>)")
    cal.add_argument("--archives", type=Path, nargs="+", default=None,
                     help="judge these archives of an earlier calibration instead of running new ones")
    add_out_file(cal, "bench-results/calibration-<time>.json")
    add_variants_file(cal)
    add_rule_options(cal)
    # The variants' order stays random (the calibration measures the rule as runs give it, order effect included).
    add_run_options(cal, probe=False, order=False, ui=False, keep_resources=False)
    add_keep_brokers(cal)
    cal.set_defaults(func=calibrate_command)


def calibrate_command(args: argparse.Namespace) -> int:
    from harness.campaigns import calibrate, matrix
    from harness.campaigns.loop import Campaign

    if args.runs < 1 or args.shift_runs < 0:
        raise ConfigError(f"--runs {args.runs} --shift-runs {args.shift_runs}: at least one A/A run, and no "
                          "negative count of runs per delay")
    rule = VerdictRule.from_args(args)
    base = select(load_variants(args.variants, say=log), [args.variant])[0]
    p = calibrate.plan(base, args.shifts or [50])
    scenarios = matrix.scenarios(args.scenarios or ["burst"]).scenarios
    stamp = f"{dt.datetime.now(dt.UTC):%Y%m%d-%H%M%S}"
    out = args.out or Path("bench-results") / f"calibration-{stamp}.json"
    if out.exists():
        raise ConfigError(f"{out} already exists; calibration results are never overwritten")
    if args.archives:
        archives = args.archives
    else:
        campaign = Campaign(args.runs_dir or Path("runs") / f"calibration-{stamp}", RunOptions.from_args(args), log,
                            min_variants=2, keep_brokers=args.keep_brokers)
        archives = calibrate.run_all(p, scenarios, args.runs, args.shift_runs, campaign)
        if not archives:
            raise HarnessError("every calibration run failed; see the lines above")
    with console.status("judging every run on Spark ..."):
        judged = calibrate.judge(archives, p, rule, log)
    result = calibrate.summarise(judged, p, scenarios)
    calibrate.write(result, out)
    print_calibration(result)
    console.print(f"calibration: {out}")
    return 0
