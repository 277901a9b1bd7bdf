"""The `rmq-harness` command. ``main(argv)`` is callable from tests; the console script calls it."""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from rich.console import Console
from rich.table import Table
from rich.text import Text

from harness import __version__, cli_releases
from harness.contracts.endpoints import Endpoints
from harness.core.errors import EXIT_USAGE, ConfigError, HarnessError, one_line
from harness.core.paths import REPO_ROOT, state_dir
from harness.inputs.scenario import PROTOCOLS
from harness.inputs.variants import load_variants, select

# Piped output (CI logs, files) gets wide lines rather than tables squeezed to 80 columns.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 160)


def _run_id(value: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}", value):
        raise argparse.ArgumentTypeError(f"{value!r}: a run id is letters, digits, '.', '_' and '-' (at most 63)")
    return value


ENV_PREFIX = "RMQ_HARNESS_"


def env_name(option: str) -> str:
    """The environment variable that sets an option: --runs-dir -> RMQ_HARNESS_RUNS_DIR."""
    return ENV_PREFIX + option.lstrip("-").replace("-", "_").upper()


def _actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """Every action of a parser and its subcommands, each once (parent parsers share action objects)."""
    out: dict[int, argparse.Action] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out.update((id(a), a) for a in _actions(sub))
        else:
            out[id(action)] = action
    return list(out.values())


def _env_defaults(parser: argparse.ArgumentParser) -> None:
    """Every long option of every command also takes its value from RMQ_HARNESS_<OPTION> (the command
    line wins); a repeatable option takes a comma-separated list. Said in each option's help."""
    for action in _actions(parser):
        longs = [o for o in action.option_strings if o.startswith("--")]
        if not longs or action.dest in ("help", "version") or action.help == argparse.SUPPRESS:
            continue
        var = env_name(longs[0])
        action.help = f"{action.help or ''} [env {var}]".strip()
        value = os.environ.get(var)
        if value is None:
            continue
        if isinstance(action, argparse._StoreTrueAction):
            if value.lower() not in ("1", "true", "yes", "0", "false", "no", ""):
                raise ConfigError(f"{var}={value!r}: expected 1/true/yes or 0/false/no")
            action.default = value.lower() in ("1", "true", "yes")
        elif isinstance(action, argparse._AppendAction) or action.nargs in ("+", "*"):
            action.default = [_env_value(action, var, v.strip()) for v in value.split(",") if v.strip()]
        else:
            action.default = _env_value(action, var, value)


def _env_value(action: argparse.Action, var: str, value: str) -> object:
    """One value from RMQ_HARNESS_<OPTION>, converted and checked as the option's own (argparse checks neither
    the type of a list default nor the choices of any default)."""
    try:
        converted = action.type(value) if action.type else value
    except (TypeError, ValueError, argparse.ArgumentTypeError) as e:
        raise ConfigError(f"{var}={value!r}: {e}") from None
    if action.choices is not None and converted not in action.choices:
        raise ConfigError(f"{var}={value!r}: expected one of {', '.join(map(str, action.choices))}")
    return converted


class _Parser(argparse.ArgumentParser):
    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> object:
        # Python 3.11 drops the value of --option=-- (it takes it for the end of the options) and hands the
        # option an empty list, whatever its type; later Pythons keep '--' as the value, and so does this.
        if action.nargs is None and action.option_strings and arg_strings == ["--"]:
            value = self._get_value(action, "--")
            self._check_value(action, value)
            return value
        return super()._get_values(action, arg_strings)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="rmq-harness", description="Load-test and regression harness for RocketMQ POP")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    p.add_argument("--variants", type=Path, default=None,
                   help="variants file: your own builds can live outside the repository "
                        "(default: workloads/variants.yaml)")
    sub = p.add_subparsers(dest="command", required=True)

    brokers = sub.add_parser("brokers", help="start, inspect and stop RocketMQ brokers locally")
    bsub = brokers.add_subparsers(dest="action", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--workdir", type=Path, default=None,
        help="where brokers keep state, stores and logs (default: $RMQ_HARNESS_STATE or ~/.local/state/rmq-harness)",
    )
    up = bsub.add_parser("up", parents=[common], help="start variants and wait until each passes a send/pop")
    up.add_argument("--variant", action="append", dest="variants_wanted", metavar="NAME",
                    help="variant to start (repeatable; default: unpatched)")
    up.add_argument("--timeout", type=float, default=180.0, help="seconds each variant may take to be ready")
    fetch = bsub.add_parser("fetch", help="download variants' jars into the cache (up does this when needed)")
    fetch.add_argument("--variant", action="append", dest="variants_wanted", metavar="NAME")
    bsub.add_parser("status", parents=[common], help="show the variants that are up and whether they are healthy")
    down = bsub.add_parser("down", parents=[common], help="stop variants (default: all)")
    down.add_argument("--variant", action="append", dest="variants_wanted", metavar="NAME")
    run_opts = argparse.ArgumentParser(add_help=False)
    run_opts.add_argument("--variant", action="append", dest="variants_wanted", metavar="NAME",
                          help="variant to run against (repeatable; default: unpatched)")
    run_opts.add_argument("--scenario", default="burst", help="scenario file, or a name in workloads/scenarios/")
    run_opts.add_argument("--protocol", choices=PROTOCOLS, default=None,
                          help="run the scenario's form over this protocol (NAME-PROTOCOL; default: its own)")
    run_opts.add_argument("--duration", type=float, default=None, help="override the scenario's duration_s")
    run_opts.add_argument("--fault", action="append", dest="faults", metavar="ACTION:TARGET@AT_S[+DURATION_S]",
                          help="inject this fault instead of the scenario's own (repeatable; e.g. kill9:broker@30+10, "
                               "sigstop:proxy@30+10, restart:namesrv@30); the scenario is named after its faults")
    run_opts.add_argument("--runs-dir", type=Path, default=Path("runs"),
                          help="where run archives go (default: runs/)")
    run_opts.add_argument("--probe", action="store_true",
                          help="mount the pop-wakeup-probe agent on every variant and archive its counters")
    run_opts.add_argument("--compare", action="store_true",
                          help="afterwards compare the second variant (candidate) against the first (baseline)")
    run_opts.add_argument("--run-id", type=_run_id, default=None, help=argparse.SUPPRESS)
    run = sub.add_parser("run", parents=[run_opts],
                         help="run a scenario against variants side by side and write a run archive")
    run.add_argument("--backend", choices=("local", "k8s"), default="local",
                     help="local: brokers on this machine (default); k8s: the Helm release's brokers, from inside "
                          "its load-test pod (from a workstation: `rmq-harness k8s run`)")
    k8s_opts = argparse.ArgumentParser(add_help=False)
    k8s_opts.add_argument("--release", default="rmq", help="Helm release name (default: rmq)")
    k8s_opts.add_argument("--namespace", default="rmq-harness", help="its namespace (default: rmq-harness)")
    k8s = sub.add_parser("k8s", help="the Kubernetes side: runs as Jobs of the Helm release, their archives")
    ksub = k8s.add_subparsers(dest="action", required=True)
    ksub.add_parser("run", parents=[run_opts, k8s_opts],
                    help="submit a run as a Job of the release, follow it, copy its archive into --runs-dir")
    collect = ksub.add_parser("collect", parents=[k8s_opts],
                              help="copy run archives from the cluster's runs volume (default: all not yet here)")
    collect.add_argument("run_ids", nargs="*", metavar="RUN_ID")
    collect.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where run archives go (default: runs/)")
    status = ksub.add_parser("status", parents=[k8s_opts], help="readiness of the release's workloads")
    status.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                        help="wait up to SECONDS until every workload is ready")

    cluster = sub.add_parser("cluster", help="a single-node Kubernetes cluster on this machine, without Docker "
                             "(Kubernetes and etcd built from the Go module proxy; needs root)")
    csub = cluster.add_subparsers(dest="action", required=True)
    csub.add_parser("build", help="build the cluster's programs into the cache (up does this when needed)")
    csub.add_parser("up", help="start the cluster; prints the KUBECONFIG to use")
    csub.add_parser("status", help="which components run, and whether the API and the node are ready")
    cimg = csub.add_parser("images", help="build the harness image and the broker images of the variants' "
                           "versions (podman, on local Debian stand-ins) and load them into the cluster")
    cimg.add_argument("--variant", action="append", dest="variants_wanted", metavar="NAME",
                      help="variants whose RocketMQ versions get a broker image (repeatable; default: unpatched "
                           "and patched, the chart's default variants)")
    cimg.add_argument("--tag", default="dev", help="the harness image's tag (the chart's harnessImage.tag)")
    csub.add_parser("down", help="stop the cluster and remove everything it left on the host")

    cal = sub.add_parser("calibrate", help="measure the verdict rule on real brokers: the false-verdict rate of "
                         "two identical builds (A/A) and the detection rate of planted slowdowns")
    cal.add_argument("--variant", default="patched", help="the build to calibrate on (default: patched)")
    cal.add_argument("--scenario", default="burst", help="scenario file, or a name in workloads/scenarios/")
    cal.add_argument("--runs", type=int, default=20, help="runs, each judged on its own (default 20)")
    cal.add_argument("--shift-ms", type=int, action="append", dest="shifts",
                     help="a planted wakeup delay, ms (repeatable; default 50)")
    cal.add_argument("--runs-dir", type=Path, default=None,
                     help="where the runs' archives go (default: runs/calibration-<time>)")
    cal.add_argument("--archives", type=Path, nargs="+", default=None,
                     help="judge these archives of an earlier calibration instead of running new ones")
    cal.add_argument("--out", type=Path, default=None,
                     help="the result (default: bench-results/calibration-<time>.json)")
    cal.add_argument("--alpha", type=float, default=0.05, help="the rule's alpha (default 0.05)")
    cal.add_argument("--min-effect", type=float, default=0.10, help="the rule's margin (default 0.10)")
    cal.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples (default 2000)")

    mx = sub.add_parser("matrix", help="every scenario on every variant (side by side), then one Spark report: "
                        "expectations, ledger and verdicts against the first variant")
    mx.add_argument("--variant", action="append", dest="variants_wanted", metavar="NAME", required=True,
                    help="a variant (repeat; the first is the baseline)")
    mx.add_argument("--scenario", action="append", dest="scenarios", metavar="NAME",
                    help="a scenario file or built-in name (repeat), or 'all' (the default)")
    mx.add_argument("--protocol", action="append", dest="protocols", choices=PROTOCOLS, metavar="PROTOCOL",
                    help="run each scenario over this protocol (repeat for both: grpc, remoting); a form over "
                         "another protocol than the scenario's is NAME-PROTOCOL (default: each scenario's own)")
    mx.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where run archives go (default: runs/)")
    mx.add_argument("--archives", type=Path, nargs="+", default=None,
                    help="analyse these archives instead of running (e.g. to re-render a matrix)")
    mx.add_argument("--out", type=Path, default=None, help="report directory (default: reports/<time>-matrix)")
    mx.add_argument("--probe", action="store_true", help="install the wakeup probe agent in every variant")

    cli_releases.add_parsers(sub)

    cmp_ = sub.add_parser("compare", help="Spark comparison of run archives: verdict, summary.json, report.html")
    from spark.jobs.compare import parser as compare_parser

    for action in compare_parser()._actions:
        if action.dest != "help":
            cmp_._add_action(action)
    _env_defaults(p)
    return p


def _print_endpoints(rows: Sequence[Endpoints], health: dict[str, tuple[bool, str]] | None = None) -> None:
    # One block per variant: endpoints are long and a wide table wraps them unreadably.
    for ep in rows:
        title = f"[bold]{ep.variant}[/] (RocketMQ {ep.version})"
        if health is not None:
            ok, detail = health[ep.variant]
            title += f"  [green]healthy[/] [dim]{detail}[/]" if ok else f"  [red]unhealthy:[/] {detail}"
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="dim")
        grid.add_column()
        for label, value in (("gRPC proxy", ep.grpc), ("remoting proxy", ep.remoting), ("broker", ep.broker),
                             ("name server", ep.namesrv), ("metrics", ep.metrics)):
            grid.add_row(label, value)
        console.print(title)
        console.print(grid, soft_wrap=True)


def _brokers(args: argparse.Namespace) -> int:
    from harness.deploy.local import LocalBackend
    from harness.deploy.local.jars import distribution_for

    if args.action == "fetch":
        for v in select(load_variants(args.variants), args.variants_wanted or ["unpatched"]):
            dist = distribution_for(v.version, v.jars, log=console.print)
            console.print(f"{v.name}: RocketMQ {v.version} jars in {dist.lib}")
        return 0
    backend = LocalBackend(
        args.workdir or state_dir() / "brokers",
        ready_timeout_s=getattr(args, "timeout", 180.0),
        log=lambda line: console.print(f"[dim]{line}[/]"),
    )
    if args.action == "up":
        variants = select(load_variants(args.variants), args.variants_wanted or ["unpatched"])
        with console.status("starting brokers ..."):
            eps = backend.up(variants)
        _print_endpoints(eps)
        return 0
    if args.action == "status":
        health = backend.status()
        if not health:
            console.print("no variants are up")
            return 0
        _print_endpoints([h.endpoints for h in health], {h.endpoints.variant: (h.healthy, h.detail) for h in health})
        return 0 if all(h.healthy for h in health) else 1
    stopped = backend.down(args.variants_wanted)
    console.print(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")
    return 0


def _fmt_ms(v: float | str | None) -> str:
    if v is None:
        return "-"
    if v == "inf" or v == float("inf"):
        return "never"
    return f"{v / 1000:.2f} s" if abs(v) >= 1000 else f"{v:.0f} ms"


def _fmt_share(v: float | None) -> str:
    return "-" if v is None else f"{v:.0%}"


def _stalled(st: dict | None) -> str:
    """Retries that waited for a poll to run out, of those asked for (archives before summary schema 4: -)."""
    return f"{st['count']}/{st['retries']}" if st else "-"


def print_summary(summary: Sequence[dict]) -> None:
    t = Table(title="retry wakeup (receive - retry copy's store time, for a poll already waiting), pickup (the same, "
                    "for a poll that started later), redelivery (receive - nack due) and nack -> retry (receive - "
                    "nack, the seed's measure)")
    for col in ("scenario", "variant", "cycles", "sent", "retries", "wakeup n", "p50", "p90", "max", "pickup n",
                "p50 ", "redelivery p50", "nack->retry p50", "stalled", "never redelivered", "lost", "dup", "cross",
                "errors"):
        t.add_column(col, justify="left" if col in ("scenario", "variant") else "right")
    for s in summary:
        w, p, r, ledger = s["wakeup_ms"], s["pickup_ms"], s["redelivery_ms"], s["ledger"]
        nr = s.get("nack_retry_ms") or {}
        t.add_row(s["scenario"], s["variant"], str(s["cycles"]), str(s["sent"]), str(s["retry_deliveries"]),
                  str(w["n"]), _fmt_ms(w["p50"]), _fmt_ms(w["p90"]), _fmt_ms(w["max"]), str(p["n"]), _fmt_ms(p["p50"]),
                  _fmt_ms(r["p50"]), _fmt_ms(nr.get("p50")), _stalled(s.get("stalled")),
                  f"{ledger['retries_never_redelivered']}/{ledger['retries_expected']}",
                  str(ledger["lost"]), str(ledger["duplicated"]), str(ledger["cross_topic"]), str(s["errors"]))
    console.print(t)


def _open_ms(ms: float | None, still_open: bool | None, how: str) -> str:
    """A duration that may have no end in sight: at least this long, and ``how`` it ended."""
    return "-" if ms is None else f">= {_fmt_ms(ms)} ({how})" if still_open else _fmt_ms(ms)


def print_faults(summary: Sequence[dict]) -> None:
    """Per fault and variant: how long its target was away, what happened to the messages in flight, and how
    long sends and deliveries stopped."""
    rows = [f for s in summary for f in s.get("faults") or []]
    if not rows:
        return
    t = Table(title="faults: the (message, group) pairs in flight across each (sent before its target was back, "
                    "not yet acked when it began), the longest wait for a delivery, and the longest gaps between "
                    "successful sends and between deliveries, overlapping it")
    for col in ("fault", "at", "variant", "away", "in flight", "lost", "dup", "dlq", "acked after retry",
                "longest wait", "sends stopped", "deliveries stopped", "error"):
        t.add_column(col, justify="left" if col in ("fault", "variant", "error") else "right")
    for f in rows:
        away = "-" if f["window_s"] is None else f"{f['window_s']:.1f} s"
        counts = (str(f[k]) if f[k] is not None else "-"
                  for k in ("exposed", "lost", "duplicated", "dead_lettered", "acked_after_retry"))
        t.add_row(f["label"], f"{f['at_s']:g} s", f["variant"], away, *counts,
                  _open_ms(f["longest_wait_ms"], f["longest_wait_open"], "never delivered"),
                  _open_ms(f.get("send_gap_ms"), f.get("send_gap_open"), "none since"),
                  _open_ms(f.get("delivery_gap_ms"), f.get("delivery_gap_open"), "none since"), f["error"] or "")
    console.print(t)


def print_probes(probes: dict[str, list[dict]]) -> None:
    """Wakeups seen by the broker-side probe, per variant, group and cause."""
    t = Table(title="pop long-poll wakeups seen inside the broker (pop-wakeup-probe)")
    for col in ("variant", "group", "cause", "wakeups", "found nothing, re-suspended"):
        t.add_column(col, justify="right" if col in ("wakeups", "found nothing, re-suspended") else "left")
    for variant, samples in probes.items():
        rows: dict[tuple[str, str], list[float]] = {}
        for s in samples:
            if s["name"] in ("rmq_probe_pop_wakeups_total", "rmq_probe_pop_empty_wakeups_total"):
                cell = rows.setdefault((s["group"], s["cause"]), [0.0, 0.0])
                cell[0 if s["name"] == "rmq_probe_pop_wakeups_total" else 1] += s["value"]
        for (group, cause), (woken, empty) in sorted(rows.items()):
            t.add_row(variant, group, cause, f"{woken:.0f}", f"{empty:.0f}")
    console.print(t)


def _run(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from harness.run.sequence import Run
    from harness.run.site import SITES

    scenario = _scenario(args)
    variants = select(load_variants(args.variants), args.variants_wanted or ["unpatched"])
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), TimeElapsedColumn(),
                        TextColumn("{task.fields[counts]}"), console=console, transient=False)
    tasks = {v.name: progress.add_task(v.name, total=scenario.duration_s, counts="starting brokers")
             for v in variants}

    def on_tick(elapsed: float, counts: dict) -> None:
        for name, c in counts.items():
            mean = f"{c.mean_wakeup_s:.2f} s" if c.mean_wakeup_s is not None else "-"
            progress.update(tasks[name], completed=min(elapsed, scenario.duration_s),
                            counts=f"sent {c.sent:.0f}  delivered {c.deliveries:.0f}  retries {c.retries:.0f}  "
                                   f"mean wakeup {mean}")

    with progress:
        result = Run(variants, scenario, args.runs_dir, log=lambda line: progress.console.print(f"[dim]{line}[/]"),
                     on_tick=on_tick, probe=args.probe, site=SITES[args.backend], run_id=args.run_id).execute()
    print_summary(result.summary)
    print_faults(result.summary)
    if result.probes:
        print_probes(result.probes)
    console.print(f"run archive: {result.archive}")
    return _maybe_compare(args, result.archive, [v.name for v in variants])


def _scenario(args: argparse.Namespace) -> object:
    from harness.inputs.scenario import load_scenario, on_protocol, parse_fault, parse_scenario, with_faults

    scenario = load_scenario(args.scenario)
    if getattr(args, "protocol", None):
        scenario = on_protocol(scenario, args.protocol)
    # The faults first: a shorter --duration is checked against the faults that will run.
    if getattr(args, "faults", None):
        scenario = with_faults(scenario, [parse_fault(f) for f in args.faults])
    if args.duration is not None:
        scenario = parse_scenario({**scenario.model_dump(), "duration_s": args.duration},
                                  f"{scenario.source} (--duration {args.duration:g})")
    return scenario


def _maybe_compare(args: argparse.Namespace, archive: Path, variants: list[str]) -> int:
    if not args.compare:
        return 0
    if len(variants) < 2:
        raise ConfigError("--compare needs two variants: --variant BASELINE --variant CANDIDATE")
    return _compare(_compare_defaults([str(archive)], variants[0], variants[1]))


def _k8s_run(args: argparse.Namespace) -> int:
    """From a workstation: the run becomes a Job of the Helm release; its archive is copied back here."""
    from harness.deploy.k8s.remote import Cluster
    from harness.run.sequence import GRACE_S, new_run_id

    scenario = _scenario(args)
    names = list(dict.fromkeys(args.variants_wanted or ["unpatched"]))
    cluster = Cluster(args.release, args.namespace, log=lambda line: console.print(line, markup=False,
                                                                                   highlight=False))
    run_id = args.run_id or new_run_id(scenario.name)
    job = cluster.start(run_id, scenario, names, args.probe)
    # Brokers restart for the run (up to their readiness timeout), then the load, then the export.
    cluster.follow(job, timeout_s=scenario.run_time_s + GRACE_S + 900)
    [archive] = cluster.fetch([run_id], args.runs_dir)
    manifest = json.loads((archive / "manifest.json").read_text())
    print_summary(manifest["summary"])
    print_faults(manifest["summary"])
    if manifest.get("probe"):
        print_probes(manifest["probe"])
    console.print(f"run archive: {archive}")
    return _maybe_compare(args, archive, names)


def _k8s(args: argparse.Namespace) -> int:
    from harness.deploy.k8s.remote import Cluster, wait_ready

    if args.action == "run":
        return _k8s_run(args)
    if args.action == "status":
        with console.status(f"waiting for release {args.release} in namespace {args.namespace} ..."):
            wait_ready(args.namespace, args.release, max(args.wait, 1.0), log=console.print)
        return 0

    cluster = Cluster(args.release, args.namespace, log=console.print)
    wanted = args.run_ids or [r for r in cluster.archives() if not (args.runs_dir / r).exists()]
    if not wanted:
        console.print(f"every archive on the runs volume is already in {args.runs_dir}")
        return 0
    for path in cluster.fetch(wanted, args.runs_dir):
        console.print(f"copied {path}")
    return 0


def _compare_defaults(archives: list[str], baseline: str, candidate: str) -> argparse.Namespace:
    from spark.jobs.compare import parser as compare_parser

    return compare_parser().parse_args([*archives, "--baseline", baseline, "--candidate", candidate])


def _num(v: float | str | None) -> str:
    return "-" if v is None else (v if isinstance(v, str) else f"{v:.3g}")


def print_comparison(summary: dict) -> None:
    level = f"{1 - summary['rule']['alpha']:.0%}"
    t = Table(title=f"{summary['candidate']} against {summary['baseline']} (unit: the cycle)")
    for col in ("scenario", "metric", "cycles b/c", "baseline", "candidate", "ratio", f"{level} interval", "p (Holm)",
                "verdict"):
        t.add_column(col, justify="left" if col in ("scenario", "metric", "verdict") else "right")
    for c in summary["comparisons"]:
        ci = f"{_num(c['ci'][0])}-{_num(c['ci'][1])}" if c["ci"] else "-"
        ratio = _num(c["ratio_of_medians"])
        p = f"{c['p_adjusted']:.2g}" if c["p_adjusted"] is not None else "-"
        colour = {"improvement": "green", "regression": "red", "not enough data": "yellow"}.get(c["verdict"], "white")
        level_of = _fmt_share if c.get("statistic") == "share" else _fmt_ms
        t.add_row(c["scenario"], c["metric"] + (" (primary)" if c["primary"] else ""),
                  f"{c['n_baseline']}/{c['n_candidate']}", level_of(c["median_baseline"]),
                  level_of(c["median_candidate"]), ratio, ci, p, f"[{colour}]{c['verdict']}[/] ({c['reason']})")
    console.print(t)
    colour = {"improvement": "green", "regression": "red"}.get(summary["verdict"], "yellow")
    console.print(f"verdict: [bold {colour}]{summary['verdict']}[/]   rule: {summary['rule']['text']}")
    console.print(f"report: {summary['report']}\nsummary: {summary['out']}/summary.json")


def _check_rule(args: argparse.Namespace) -> None:
    """The verdict rule's options, before any run or Spark (else a bad one surfaces only after them)."""
    if not 0 < args.alpha < 1:
        raise ConfigError(f"--alpha {args.alpha:g}: a significance level above 0 and below 1 (default 0.05)")
    if not 0 <= args.min_effect < 1:
        raise ConfigError(f"--min-effect {args.min_effect:g}: a relative change from 0 to below 1 (default 0.10)")
    if args.bootstrap < 1:
        raise ConfigError(f"--bootstrap {args.bootstrap}: at least one resample (default 2000)")


def _compare(args: argparse.Namespace) -> int:
    from spark.jobs.compare import EXIT_REGRESSION, run

    _check_rule(args)
    with console.status("comparing on Spark ..."):
        summary = run(args, warn=lambda s: err_console.print(_line("warning:", "yellow", s), soft_wrap=True))
    print_comparison(summary)
    return EXIT_REGRESSION if args.fail_on_regression and summary["verdict"] == "regression" else 0


def _matrix(args: argparse.Namespace) -> int:
    from harness.campaigns import matrix
    from spark.jobs.matrix import parser as matrix_parser
    from spark.jobs.matrix import run as run_matrix

    variants = select(load_variants(args.variants), args.variants_wanted)
    if args.out and args.out.exists():
        raise ConfigError(f"{args.out} already exists; reports are never overwritten (choose another --out)")
    not_applicable: dict[str, str] = {}
    if args.archives:
        outcome = matrix.Outcome(archives=list(args.archives))
    else:
        planned = matrix.scenarios(args.scenarios or [matrix.ALL], args.protocols or ())
        plan, not_applicable = planned.scenarios, planned.not_applicable
        for name, why in not_applicable.items():
            console.print(f"[yellow]not run: {name}[/]: {why}")
        matrix.check(plan, variants)
        total = sum(matrix.estimate_s(sc) for sc in plan)
        console.print(f"matrix: {len(plan)} scenario(s) x {len(variants)} variant(s), about {total / 60:.0f} min: "
                      f"{', '.join(sc.name for sc in plan)}")
        outcome = matrix.run_all(plan, variants, args.runs_dir, args.probe,
                                 log=lambda line: console.print(f"[dim]{line}[/]"), on_result=print_summary)
        if not outcome.archives:
            raise HarnessError("every scenario's run failed; see the lines above")
    argv = [*map(str, outcome.archives), *[x for v in variants for x in ("--variant", v.name)],
            *[x for s, why in outcome.failed.items() for x in ("--failed", f"{s}={why}")],
            *[x for s, why in not_applicable.items() for x in ("--not-applicable", f"{s}={why}")]]
    if args.out:
        argv += ["--out", str(args.out)]
    with console.status("the matrix on Spark ..."):
        summary = run_matrix(matrix_parser().parse_args(argv))
    print_matrix(summary)
    return 0


def print_matrix(summary: dict) -> None:
    t = Table(title=f"scenario x variant (verdicts against {summary['baseline']})")
    for col in ("scenario", "variant", "expectations", "wakeup p50", "lost", "dup", "cross", "dlq", "verdict",
                "not met"):
        t.add_column(col, justify="left" if col in ("scenario", "variant", "verdict", "not met") else "right")
    for r in summary["overview"]:
        colour = "red" if r["failing"] else "green"
        t.add_row(r["scenario"], r["variant"], f"[{colour}]{r['expectations']}[/]", _fmt_ms(r["wakeup_p50_ms"]),
                  str(r["lost"]), str(r["duplicated"]), str(r["cross_topic"]), str(r["dead_lettered"]), r["verdict"],
                  "; ".join(r["failing"]) or "-")
    console.print(t)
    for s, why in summary["failed_runs"].items():
        console.print(f"[red]scenario {s}: run failed:[/] {why}")
    console.print(f"report: {summary['report']}\nsummary: {summary['out']}/summary.json")


def _calibrate(args: argparse.Namespace) -> int:
    import datetime as dt

    from harness.campaigns import calibrate

    if args.runs < 1:
        raise ConfigError(f"--runs {args.runs}: at least one run")
    _check_rule(args)
    base = select(load_variants(args.variants), [args.variant])[0]
    p = calibrate.plan(base, args.shifts or [50])
    scenario = _scenario(argparse.Namespace(scenario=args.scenario, duration=None))
    stamp = f"{dt.datetime.now(dt.UTC):%Y%m%d-%H%M%S}"
    out = args.out or Path("bench-results") / f"calibration-{stamp}.json"
    if out.exists():
        raise ConfigError(f"{out} already exists; calibration results are never overwritten")
    log = lambda line: console.print(f"[dim]{line}[/]")  # noqa: E731
    if args.archives:
        archives = args.archives
    else:
        archives = calibrate.run_all(p, scenario, args.runs, args.runs_dir or Path("runs") / f"calibration-{stamp}",
                                     log)
        if not archives:
            raise HarnessError("every calibration run failed; see the lines above")
    with console.status("judging every run on Spark ..."):
        judged = calibrate.judge(archives, p, args.alpha, args.min_effect, args.bootstrap, log)
    result = calibrate.summarise(judged, p, scenario)
    calibrate.write(result, out)
    print_calibration(result)
    console.print(f"calibration: {out}")
    return 0


def print_calibration(result: dict) -> None:
    def pct(r: dict) -> str:
        if r["rate"] is None:
            return "-"
        return f"{r['rate']:.0%} ({r['k']}/{r['n']}; 95% CI {r['ci'][0]:.0%}-{r['ci'][1]:.0%})"

    t = Table(title=f"the verdict rule on {result['variant']}, each run judged on its own")
    for col in ("control", "what counts", "rate", "verdicts"):
        t.add_column(col)
    aa = result["aa"]
    t.add_row("A/A: two identical builds", "improvement or regression (false)", pct(aa),
              ", ".join(f"{k} {v}" for k, v in aa["verdicts"].items()))
    for s in result["shifts"]:
        t.add_row(f"+{s['delay_ms']} ms on every wakeup", "regression (detected)", pct(s),
                  ", ".join(f"{k} {v}" for k, v in s["verdicts"].items()))
    console.print(t)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # Turn SIGTERM into an exception so cleanup (stopping half-started brokers) runs as for Ctrl-C.
    raise KeyboardInterrupt


def _cluster(args: argparse.Namespace) -> int:
    from tools.cluster import binaries, node
    from tools.cluster.layout import default_layout

    lay = default_layout()
    log = console.print
    if args.action == "build":
        for name, path in binaries.build(log).items():
            console.print(f"{name}: {path}")
    elif args.action == "up":
        node.up(lay, log)
        console.print(f"export KUBECONFIG={lay.admin_kubeconfig}")
    elif args.action == "down":
        node.down(node.owner() or lay, log)
    elif args.action == "images":
        from tools.cluster import images
        from harness.deploy.local import jars

        if not node.status(lay)["node_ready"]:
            raise ConfigError("the cluster is not up: `make cluster-up` first")
        wanted = select(load_variants(args.variants), args.variants_wanted or ["unpatched", "patched"])
        for v in wanted:
            if v.jars is not None:
                raise ConfigError(f"variant {v.name} runs local jars ({v.jars}); broker images are built from "
                                  "Maven Central versions only")
        dists = {}
        for version in dict.fromkeys(v.version for v in wanted):
            jars.ensure_version(version, log)
            dists[version] = jars.version_dir(version)
        images.load_all(lay, REPO_ROOT, args.tag, dists, log)
    else:
        st = node.status(lay)
        for name, up in st["components"].items():
            console.print(f"{name:24} {'[green]running[/]' if up else '[red]stopped[/]'}")
        console.print(f"API ready: {st['api']}; node Ready: {st['node_ready']}")
        return 0 if st["node_ready"] else 1
    return 0


def _line(label: str, colour: str, message: object) -> Text:
    """``label message`` as one line, the message as written: not rich markup ('[/]', '[a-z0-9]'), no emoji codes
    (':cat:'), line breaks escaped."""
    return Text.assemble((label, colour), " ", one_line(message))


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
    except ConfigError as e:
        err_console.print(_line("error:", "red", e), soft_wrap=True)
        return e.exit_code
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        if args.command == "brokers":
            return _brokers(args)
        if args.command == "run":
            return _run(args)
        if args.command == "compare":
            return _compare(args)
        if args.command == "k8s":
            return _k8s(args)
        if args.command == "calibrate":
            return _calibrate(args)
        if args.command == "cluster":
            return _cluster(args)
        if args.command == "matrix":
            return _matrix(args)
        if args.command == "sweep":
            return cli_releases.sweep(args)
        if args.command == "bisect":
            return cli_releases.bisect(args)
        if args.command == "history":
            return cli_releases.history(args)
        return EXIT_USAGE
    except HarnessError as e:
        err_console.print(_line("error:", "red", e), soft_wrap=True)
        if e.detail:
            err_console.print(e.detail, style="dim", markup=False, soft_wrap=True)
        return e.exit_code
    except KeyboardInterrupt:
        err_console.print("interrupted; started processes were stopped")
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
