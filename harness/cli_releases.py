"""The release commands of `rmq-harness`: sweep (every release of a range), bisect (the first build that
changed) and history (change points over archived runs). harness.cli registers and dispatches them."""

from __future__ import annotations

import argparse
import datetime as dt
import time
from pathlib import Path

from rich.table import Table

from harness.core.errors import ConfigError, HarnessError
from harness.inputs.variants import release_name

EXIT_REGRESSION = 3


def add_parsers(sub: argparse._SubParsersAction) -> None:
    sw = sub.add_parser("sweep", help="every RocketMQ release of a range that Maven Central can assemble, in batches "
                        "side by side, then one Spark report: the metric per release and where it changed")
    sw.add_argument("--versions", required=True, metavar="FIRST..LAST",
                    help="the releases, both ends included (e.g. 5.1.0..5.5.1; either end may be left out)")
    sw.add_argument("--scenario", action="append", dest="scenarios", metavar="NAME",
                    help="a scenario file or built-in name (repeat; default: burst)")
    sw.add_argument("--batch", type=int, default=None, metavar="N",
                    help="releases side by side in one run (default: 4, what this 2-core machine keeps apart)")
    sw.add_argument("--probe", action="store_true", help="install the wakeup probe agent in every release")
    sw.add_argument("--runs-dir", type=Path, default=None, help="where run archives go (default: runs/sweep-<time>)")
    sw.add_argument("--archives", type=Path, nargs="+", default=None,
                    help="analyse these archives instead of running (re-render a sweep)")
    sw.add_argument("--out", type=Path, default=None, help="report directory (default: reports/<time>-sweep)")
    sw.add_argument("--dataset", type=Path, default=Path("runs") / "history",
                    help="the history dataset the sweep's runs are added to (default: runs/history)")

    bi = sub.add_parser("bisect", help="binary search between two builds for the first that behaves like the newer "
                        "one, each step judged by the verdict rule with both ends run beside it")
    bi.add_argument("--good", required=True, metavar="VERSION|jars:DIR", help="one end: a release or a local build")
    bi.add_argument("--bad", required=True, metavar="VERSION|jars:DIR", help="the other end")
    bi.add_argument("--between", action="append", default=None, metavar="VERSION|jars:DIR",
                    help="the builds between, in order (repeat; default: the releases between two versions)")
    bi.add_argument("--scenario", default="burst", help="scenario file, or a name in workloads/scenarios/")
    bi.add_argument("--probe", action="store_true", help="install the wakeup probe agent in every build")
    bi.add_argument("--runs-dir", type=Path, default=None, help="where run archives go (default: runs/bisect-<time>)")
    bi.add_argument("--out", type=Path, default=None,
                    help="where the steps and their evidence go (default: bench-results/bisect-<time>.json)")

    hi = sub.add_parser("history", help="add archived runs to the per-cycle history dataset, find change points per "
                        "scenario, variant and metric over runs and over releases; exit 3 when the newest run starts "
                        "a regression")
    from spark.jobs.history import parser as history_parser

    for action in history_parser()._actions:
        if action.dest not in ("help", "master"):
            hi._add_action(action)


def _log(line: str) -> None:
    from harness.cli import console

    console.print(f"[dim]{line}[/]")


def _stamp() -> str:
    return f"{dt.datetime.now(dt.UTC):%Y%m%d-%H%M%S}"


def sweep(args: argparse.Namespace) -> int:
    from harness.campaigns import matrix, releases
    from harness.campaigns import sweep as sweeping
    from harness.cli import console, print_summary
    from spark.jobs.sweep import parser as sweep_parser
    from spark.jobs.sweep import run as run_sweep

    if args.out and args.out.exists():
        raise ConfigError(f"{args.out} already exists; reports are never overwritten (choose another --out)")
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
        got = releases.assemble(versions, cat, log=_log)
        ready, skipped = got.ready, got.skipped
        if not ready:
            raise HarnessError(f"--versions {args.versions}: Maven Central can assemble none of "
                               f"{', '.join(versions)}")
        variants = [releases.release_variant(v) for v in ready]
        console.print(f"sweep: {len(ready)} release(s) in batches of up to {batch}, {len(plan)} scenario(s): "
                      f"{', '.join(ready)}" + (f"; skipped {', '.join(skipped)}" if skipped else ""))
        done = sweeping.run_all(plan, variants, batch, args.runs_dir or Path("runs") / f"sweep-{_stamp()}",
                                args.probe, _log, on_result=print_summary)
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


def _add_to_history(dataset: Path, archives: list[Path]) -> None:
    from harness.cli import console
    from spark.jobs.history import ingest
    from spark.session import interruptible, local_session

    spark = local_session("local[*]", app="rmq-harness-history")
    with interruptible(spark), console.status("adding the runs to the history dataset ..."):
        added = ingest(spark, dataset, archives, warn=lambda s: console.print(f"[yellow]{s}[/]"))
    console.print(f"history: {len(added['runs_added'])} run(s) added to {dataset}")


def history(args: argparse.Namespace) -> int:
    from harness.cli import console
    from spark.jobs.history import run as run_history

    with console.status("history on Spark ..."):
        summary = run_history(args, warn=lambda s: console.print(f"[yellow]{s}[/]"))
    print_history(summary)
    return EXIT_REGRESSION if summary["regressions"] else 0


def print_history(summary: dict) -> None:
    from harness.cli import _fmt_ms, _fmt_share, console

    t = Table(title=f"change points over runs ({summary['method']['name']}, window {summary['method']['window']}, "
                    f"p < {summary['method']['max_pvalue']})")
    for col in ("scenario", "variant", "metric", "runs", "change points"):
        t.add_column(col, justify="right" if col == "runs" else "left")
    for s in summary["over_runs"]:
        fmt = _fmt_share if s["statistic"] == "share" else _fmt_ms
        cps = "; ".join(f"{c['direction']} at {c['run_id']} ({fmt(c['before'])} -> {fmt(c['after'])})"
                        for c in s["change_points"]) or "-"
        t.add_row(s["scenario"], s["variant"], s["metric"], str(len(s["points"])), cps)
    console.print(t)
    for s in summary["over_releases"]:
        if s["change_points"]:
            console.print(f"{s['scenario']} {s['metric']} over releases: " + ", ".join(
                f"{c['direction']} at {c['version']}" for c in s["change_points"]))
    for s in summary["regressions"]:
        c = s["newest_starts_regression"]
        console.print(f"[red]regression starting at run {c['run_id']}[/]: {s['scenario']} / {s['variant']} / "
                      f"{s['metric']}")
    console.print(f"{len(summary['runs_added'])} run(s) added; report: {summary['report']}")


def print_sweep(summary: dict) -> None:
    from harness.cli import _fmt_ms, _fmt_share, console

    for name, sc in summary["scenarios"].items():
        share = sc["releases"][0]["statistic"] == "share"
        t = Table(title=f"{name}: {sc['metric']} per release (level = median of cycle medians"
                        f"{', mean share' if share else ''}; interval 95%)")
        for col in ("release", "cycles", "level", "interval", "p90", "lost", "dup", "cross-topic", "never redelivered",
                    "other groups woken / nack", "change from the release before"):
            t.add_column(col, justify="left" if col in ("release", "change from the release before") else "right")
        steps = {s["newer"]: s for s in sc["steps"]}
        fmt = _fmt_share if share else _fmt_ms
        for r in sc["releases"]:
            s = steps.get(r["variant"])
            ci = r["ci"]
            woken = r["probe_retry_other_per_nack"]
            t.add_row(r["version"] or r["variant"], str(r["cycles"]), fmt(r["level"]),
                      f"{fmt(ci[0])}-{fmt(ci[1])}" if ci else "-", _fmt_ms(r["p90"]), str(r["lost"]),
                      str(r["duplicated"]), str(r["cross_topic"]), str(r["retries_never_redelivered"]),
                      "-" if woken is None else f"{woken:.2f}", s["verdict"] if s else "-")
        console.print(t)
        for r in sc["releases"]:
            if r.get("probe_note"):
                console.print(f"[yellow]{name} on {r['version']}: no wakeup counts[/]: {r['probe_note']}")
    for v, why in summary["skipped"].items():
        console.print(f"[yellow]not run: RocketMQ {v}[/]: {why}")
    for s, why in summary["failed_runs"].items():
        console.print(f"[red]run failed: {s}[/]: {why}")
    for s, why in summary["not_applicable"].items():
        console.print(f"[yellow]not applicable: {s}[/]: {why}")
    console.print(f"report: {summary['report']}\nsummary: {summary['out']}/summary.json")


def bisect(args: argparse.Namespace) -> int:
    from harness.campaigns import bisect as bisecting
    from harness.campaigns import releases
    from harness.cli import _scenario, console
    from spark.stats import VerdictRule

    out = args.out or Path("bench-results") / f"bisect-{_stamp()}.json"
    if out.exists():
        raise ConfigError(f"{out} already exists; results are never overwritten (choose another --out)")
    good, bad = releases.endpoint(args.good), releases.endpoint(args.bad)
    scenario = _scenario(argparse.Namespace(scenario=args.scenario, duration=None))
    skipped: dict[str, str] = {}
    if args.between is not None:
        between = [releases.endpoint(b) for b in args.between]
    elif good.jars is None and bad.jars is None:
        lo, hi = sorted([good.version, bad.version], key=releases.parse)
        cat = releases.catalogue()
        inner = [v for v in releases.in_range(f"{lo}..{hi}", cat) if v not in (lo, hi)]
        got = releases.assemble(inner, cat, log=_log)
        between, skipped = [releases.release_variant(v) for v in got.ready], got.skipped
    else:
        between = []
    points = bisecting.order(good, bad, between)
    runs_dir = args.runs_dir or Path("runs") / f"bisect-{_stamp()}"
    console.print(f"bisect over {len(points)} build(s), oldest first: {', '.join(p.name for p in points)}"
                  + (f"; not assemblable: {', '.join(skipped)}" if skipped else ""))
    judge = bisecting.spark_judge(points[0], points[-1], scenario, runs_dir, args.probe, VerdictRule(), _log)
    started = time.monotonic()
    result = bisecting.search(points, judge, log=_log)
    doc = {"generated_at": dt.datetime.now(dt.UTC).isoformat(), "wall_s": round(time.monotonic() - started, 1),
           "scenario": scenario.name,
           "good": args.good, "bad": args.bad, "skipped": skipped, "rule": VerdictRule().as_dict(),
           **result.as_dict()}
    bisecting.write(doc, out)
    print_bisect(result, args)
    console.print(f"steps and evidence: {out} ({doc['wall_s'] / 60:.1f} min)")
    return 0 if result.outcome == "found" else 1


def print_bisect(result: object, args: argparse.Namespace) -> None:
    from harness.cli import _fmt_ms, _fmt_share, console

    t = Table(title=f"bisect on {args.scenario}: each step run beside both ends")
    for col in ("step", "build", "behaves like", "older->point", "newer->point", "point level", "why"):
        t.add_column(col)
    for i, s in enumerate(result.steps):
        v, ev = s.judged.verdicts, s.judged.evidence
        e = ev.get("older->point") or ev.get("older->newer") or {}
        fmt = _fmt_share if e.get("metric") == "stalled" else _fmt_ms
        t.add_row(str(i), s.point, s.like, v.get("older->point", "-"), v.get("newer->point", "-"),
                  fmt(e.get("median_candidate")), s.why)
    console.print(t)
    if result.outcome == "found":
        console.print(f"[bold]first build behaving like {result.points[-1]}: {result.first}[/] "
                      f"(the one before it, {result.last_like_older}, behaves like {result.points[0]})")
    else:
        console.print(f"[yellow]bisect ended: {result.outcome}[/]")
