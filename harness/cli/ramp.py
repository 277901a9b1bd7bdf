"""`rmq-harness ramp`: the highest produce-and-nack rate at which each variant's retry rules still hold."""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path

from harness.cli.options import add_keep_brokers, add_variants_file, refuse_existing, scenario_of
from harness.contracts.options import RunOptions, add_run_options
from harness.core.errors import ConfigError
from harness.core.storage import dir_or_uri
from harness.inputs.variants import load_variants, select
from harness.report.campaign_tables import print_ramp
from harness.report.console import console, log
from harness.report.run_tables import print_summary

# A ramp's gRPC client unless told otherwise: its rates are what the official one cannot drive (it spends about six
# times the CPU per delivery: bench-results/workload.json), and both measure seconds-scale waits alike
# (grpc_client_parity).
GRPC_CLIENT = "native"


def rates(value: str) -> list[float]:
    try:
        return [float(x) for x in value.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r}: messages per second, comma-separated (e.g. 50,100,200)") from None


def add_parsers(sub: argparse._SubParsersAction) -> None:
    rp = sub.add_parser("ramp", help="raise a steady scenario's rate step by step, variants side by side, and say "
                        "per variant the highest rate at which its expect: rules (wakeup, redelivery, nothing "
                        "lost) still hold")
    rp.add_argument("--variant", action="append", dest="variants_wanted", metavar="NAME", required=True,
                    help="a variant (repeat; an external cluster too: variants with endpoints:)")
    rp.add_argument("--scenario", default="mixed-load",
                    help="a steady scenario with expect: rules (default: mixed-load)")
    rp.add_argument("--rates", type=rates, default=[50.0, 100.0, 200.0, 400.0, 800.0], metavar="R1,R2,...",
                    help="offered messages per second in all, one step each (default 50,100,200,400,800)")
    rp.add_argument("--duration", type=float, default=40.0, metavar="SECONDS",
                    help="each step's duration_s, seconds (default 40; the producers start delay_s into it)")
    rp.add_argument("--rule", action="append", dest="rules", default=[], metavar="RULE",
                    help="a rule every step must also meet, beside the scenario's expect: (repeatable; e.g. "
                         "'redelivery_ms.p99 < 3000': your SLO)")
    rp.add_argument("--runs-dir", type=dir_or_uri, default=Path("runs"),
                    help="where run archives go: a directory or s3://bucket/prefix (default: runs/)")
    rp.add_argument("--out", type=Path, default=None, help="where ramp.json goes (default: reports/<time>-ramp)")
    add_variants_file(rp)
    add_run_options(rp, grpc_client_default=GRPC_CLIENT)
    add_keep_brokers(rp)
    rp.set_defaults(func=ramp_command, grpc_client=None)  # None: native for a gRPC scenario (a remoting one has none)


def ramp_command(args: argparse.Namespace) -> int:
    from harness.campaigns import ramp
    from harness.campaigns.loop import Campaign

    if args.duration <= 0:
        raise ConfigError(f"--duration {args.duration:g}: seconds of load per step, above 0 (default 40)")
    variants = select(load_variants(args.variants, say=log), args.variants_wanted)
    scenario = scenario_of(argparse.Namespace(scenario=args.scenario))
    if args.grpc_client is None and scenario.protocol == "grpc":
        args.grpc_client = GRPC_CLIENT
    ramp.check(scenario, args.rates, args.rules, args.duration)
    out = args.out or Path("reports") / f"{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}-ramp"
    refuse_existing(out)
    console.print(f"ramp: {scenario.name} at {', '.join(f'{r:g}' for r in args.rates)} messages/s, "
                  f"{args.duration:g} s each, on {', '.join(v.name for v in variants)}")
    campaign = Campaign(args.runs_dir, RunOptions.from_args(args), log, on_result=print_summary,
                        stop_on_config_error=True, outcome=ramp.Outcome(), keep_brokers=args.keep_brokers)
    outcome = ramp.run_all(scenario, variants, args.rates, campaign, duration_s=args.duration, rules=args.rules)
    result = {"scenario": scenario.name, "rules": [*scenario.expect, *args.rules], "rates": args.rates,
              "duration_s": args.duration, "wall_s": round(outcome.wall_s, 1), "steps": outcome.steps,
              "failed": outcome.failed, "variants": ramp.verdicts(outcome, [v.name for v in variants])}
    out.mkdir(parents=True)
    (out / "ramp.json").write_text(json.dumps(result, indent=2) + "\n")
    print_ramp(result)
    console.print(f"ramp: {out / 'ramp.json'}")
    return 1 if outcome.failed else 0
