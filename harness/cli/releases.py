"""The release commands of `rmq-harness`: sweep (every release of a range), bisect (the first build that
changed) and history (change points over archived runs). harness.cli.main registers and dispatches them."""

from __future__ import annotations

import argparse
import datetime as dt
import time
from pathlib import Path

from harness.cli.options import add_keep_brokers, add_out_file, adopt, refuse_existing, scenario_of
from harness.contracts.options import RunOptions, add_run_options
from harness.contracts.verdict import EXIT_REGRESSION, VerdictRule
from harness.core.errors import ConfigError, HarnessError
from harness.core.storage import dir_or_uri
from harness.inputs.variants import release_name
from harness.report.campaign_tables import print_bisect, print_history, print_sweep
from harness.report.console import console, log, warn
from harness.report.run_tables import print_hybrids, print_summary


def add_parsers(sub: argparse._SubParsersAction) -> None:
    sw = sub.add_parser("sweep", help="every RocketMQ release of a range that Maven Central can assemble, in batches "
                        "side by side, then one Spark report: the metric per release and where it changed")
    sw.add_argument("--versions", required=True, metavar="FIRST..LAST",
                    help="the releases, both ends included (e.g. 5.1.0..5.5.1; either end may be left out)")
    sw.add_argument("--scenario", action="append", dest="scenarios", metavar="NAME",
                    help="a scenario file or built-in name (repeat; default: burst), or 'upstream' (the scenarios "
                         "marked upstream: true, the pop defects upstream reported; docs/findings/upstream-defects.md)")
    sw.add_argument("--batch", type=int, default=None, metavar="N",
                    help="releases side by side in one run (default: 4, what this 2-core machine keeps apart)")
    add_run_options(sw)
    add_keep_brokers(sw)
    sw.add_argument("--runs-dir", type=dir_or_uri, default=None,
                    help="where run archives go: a directory or s3://bucket/prefix (default: runs/sweep-<time>)")
    sw.add_argument("--archives", type=dir_or_uri, nargs="+", default=None,
                    help="analyse these archives instead of running (re-render a sweep)")
    sw.add_argument("--out", type=Path, default=None, help="report directory (default: reports/<time>-sweep)")
    sw.add_argument("--dataset", type=dir_or_uri, default=Path("runs") / "history",
                    help="the history dataset the sweep's runs are added to (default: runs/history)")

    bi = sub.add_parser("bisect", help="binary search between two builds for the first that behaves like the newer "
                        "one, each step judged by the verdict rule with both ends run beside it")
    bi.add_argument("--good", required=True, metavar="VERSION|jars:DIR", help="one end: a release or a local build")
    bi.add_argument("--bad", required=True, metavar="VERSION|jars:DIR", help="the other end")
    bi.add_argument("--between", action="append", default=None, metavar="VERSION|jars:DIR",
                    help="the builds between, in order (repeat; default: the releases between two versions)")
    bi.add_argument("--scenario", default="burst", help="scenario file, or a name in workloads/scenarios/")
    add_run_options(bi, ui=False, keep_resources=False)
    bi.add_argument("--runs-dir", type=dir_or_uri, default=None,
                    help="where run archives go: a directory or s3://bucket/prefix (default: runs/bisect-<time>)")
    add_out_file(bi, "bench-results/bisect-<time>.json")

    hi = sub.add_parser("history", help="add archived runs to the per-cycle history dataset, find change points per "
                        "scenario, variant and metric over runs and over releases; exit 3 when the newest run starts "
                        "a regression")
    from spark.jobs.history import parser as history_parser

    adopt(hi, history_parser(), leave=("master",))
    sw.set_defaults(func=sweep)
    bi.set_defaults(func=bisect)
    hi.set_defaults(func=history)


def _stamp() -> str:
    return f"{dt.datetime.now(dt.UTC):%Y%m%d-%H%M%S}"


def sweep(args: argparse.Namespace) -> int:
    from harness.campaigns import matrix, releases
    from harness.campaigns import sweep as sweeping
    from harness.campaigns.loop import Campaign
    from spark.jobs.sweep import parser as sweep_parser
    from spark.jobs.sweep import run as run_sweep

    refuse_existing(args.out)
    batch = sweeping.DEFAULT_BATCH if args.batch is None else args.batch
    if batch < 1:
        raise ConfigError(f"--batch {batch}: at least one release per run")
    releases.check_range(args.versions)
    plan = None if args.archives else matrix.scenarios(args.scenarios or ["burst"]).scenarios
    skipped: dict[str, str] = {}
    not_applicable: dict[str, str] = {}
    if args.archives:
        archives, failed, wall = list(args.archives), {}, None
        ready = releases.in_archives(args.versions, archives)
    else:
        cat = releases.catalogue()
        versions = releases.in_range(args.versions, cat)
        if not versions:
            raise ConfigError(f"--versions {args.versions}: no RocketMQ release in that range; releases listed: "
                              + ", ".join(cat.versions))
        got = releases.assemble(versions, cat, log=log)
        ready, skipped = got.ready, got.skipped
        if not ready:
            raise HarnessError(f"--versions {args.versions}: Maven Central can assemble none of "
                               f"{', '.join(versions)}")
        variants = [releases.release_variant(v) for v in ready]
        console.print(f"sweep: {len(ready)} release(s) in batches of up to {batch}, {len(plan)} scenario(s): "
                      f"{', '.join(ready)}" + (f"; skipped {', '.join(skipped)}" if skipped else ""))
        print_hybrids(got.hybrids)
        campaign = Campaign(args.runs_dir or Path("runs") / f"sweep-{_stamp()}", RunOptions.from_args(args), log,
                            on_result=print_summary, keep_brokers=args.keep_brokers)
        campaign.check(plan, variants)
        done = sweeping.run_all(plan, variants, batch, campaign)
        if not done.archives:
            raise HarnessError("every run of the sweep failed; see the lines above")
        archives, failed, wall = done.archives, done.failed, done.wall_s
        not_applicable = done.not_applicable
    argv = [*map(str, archives), *[x for v in ready for x in ("--variant", release_name(v))],
            *[x for v, why in skipped.items() for x in ("--skipped", f"{v}={why}")],
            *[x for s, why in failed.items() for x in ("--failed", f"{s}={why}")],
            *[x for s, why in not_applicable.items() for x in ("--not-applicable", f"{s}={why}")]]
    if args.out:
        argv += ["--out", str(args.out)]
    with console.status("the sweep on Spark ..."):
        summary = run_sweep(sweep_parser().parse_args(argv))
    print_sweep(summary)
    if wall is not None:
        console.print(f"sweep runs took {wall / 60:.1f} min")
    _add_to_history(args.dataset, archives)
    return 0


def _add_to_history(dataset: Path | str, archives: list[Path | str]) -> None:
    from spark.history import ingest
    from spark.session import interruptible, local_session

    spark = local_session("local[*]", app="rmq-harness-history")
    with interruptible(spark), console.status("adding the runs to the history dataset ..."):
        added = ingest(spark, dataset, archives, warn=warn)
    console.print(f"history: {len(added['runs_added'])} run(s) added to {dataset}")


def history(args: argparse.Namespace) -> int:
    from spark.jobs.history import run as run_history

    with console.status("history on Spark ..."):
        summary = run_history(args, warn=warn)
    print_history(summary)
    return EXIT_REGRESSION if summary["regressions"] else 0


def bisect(args: argparse.Namespace) -> int:
    from harness.campaigns import bisect as bisecting
    from harness.campaigns import releases

    out = args.out or Path("bench-results") / f"bisect-{_stamp()}.json"
    if out.exists():
        raise ConfigError(f"{out} already exists; results are never overwritten (choose another --out)")
    good, bad = releases.endpoint(args.good), releases.endpoint(args.bad)
    if (good.version, good.jars and good.jars.resolve()) == (bad.version, bad.jars and bad.jars.resolve()):
        raise ConfigError(f"--good {args.good} and --bad {args.bad} are the same build: there is nothing between "
                          "them to search; give two builds that behave differently (e.g. --good 5.1.0 --bad 5.3.3)")
    scenario = scenario_of(argparse.Namespace(scenario=args.scenario))
    skipped: dict[str, str] = {}
    if args.between is not None:
        between = [releases.endpoint(b) for b in args.between]
    elif good.jars is None and bad.jars is None:
        lo, hi = sorted([good.version, bad.version], key=releases.parse)
        cat = releases.catalogue()
        inner = [v for v in releases.in_range(f"{lo}..{hi}", cat) if v not in (lo, hi)]
        got = releases.assemble(inner, cat, log=log)
        between, skipped = [releases.release_variant(v) for v in got.ready], got.skipped
        print_hybrids(got.hybrids)
    else:
        between = []
    points = bisecting.order(good, bad, between)
    runs_dir = args.runs_dir or Path("runs") / f"bisect-{_stamp()}"
    console.print(f"bisect over {len(points)} build(s), oldest first: {', '.join(p.name for p in points)}"
                  + (f"; not assemblable: {', '.join(skipped)}" if skipped else ""))
    judge = bisecting.spark_judge(points[0], points[-1], scenario, runs_dir, RunOptions.from_args(args), VerdictRule(),
                                  log)
    started = time.monotonic()
    result = bisecting.search(points, judge, log=log)
    doc = {"generated_at": dt.datetime.now(dt.UTC).isoformat(), "wall_s": round(time.monotonic() - started, 1),
           "scenario": scenario.name,
           "good": args.good, "bad": args.bad, "skipped": skipped, "rule": VerdictRule().as_dict(),
           **result.as_dict()}
    bisecting.write(doc, out)
    print_bisect(result, args.scenario)
    console.print(f"steps and evidence: {out} ({doc['wall_s'] / 60:.1f} min)")
    return 0 if result.outcome == "found" else 1


