"""`rmq-harness run` (a scenario against variants side by side, here or in the chart's load-test pod) and
`rmq-harness k8s` (runs as Jobs of the Helm release, from a workstation; their archives)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from harness.cli.compare import compare_archives
from harness.cli.options import add_format_option, run_options, scenario_of
from harness.contracts.options import RunOptions
from harness.contracts.record import MANIFEST, RunRecord
from harness.contracts.verdict import VerdictRule, add_gate_option, add_rule_options, gate_exit
from harness.core.errors import ConfigError
from harness.core.publish import refuse_existing
from harness.core.storage import dir_or_uri
from harness.inputs import timing
from harness.inputs.expectations import evaluate
from harness.inputs.variants import load_variants, select
from harness.report.console import TABLE, console, log_to, place, progress_console
from harness.report.rows import print_comparison_as, print_summary_as
from harness.report.run_tables import print_actions, print_expectations, print_faults, print_probes
from harness.run import outbox


def add_parsers(sub: argparse._SubParsersAction) -> None:
    opts = run_options()
    run = sub.add_parser("run", parents=[opts], help="run a scenario against variants side by side and write a run "
                         "archive")
    run.add_argument("--backend", choices=("local", "k8s"), default="local",
                     help="local: brokers on this machine (default); k8s: the Helm release's brokers, from inside "
                          "its load-test pod (from a workstation: `rmq-harness k8s run`)")
    add_format_option(run)
    run.set_defaults(func=run_command)

    k8s_opts = argparse.ArgumentParser(add_help=False)
    k8s_opts.add_argument("--release", default="rmq", help="Helm release name (default: rmq)")
    k8s_opts.add_argument("--namespace", default="rmq-harness", help="its namespace (default: rmq-harness)")
    k8s = sub.add_parser("k8s", help="the Kubernetes side: runs as Jobs of the Helm release, their archives")
    ksub = k8s.add_subparsers(dest="action", required=True)
    krun = ksub.add_parser("run", parents=[opts, k8s_opts],
                           help="submit a run as a Job of the release, follow it, copy its archive into --runs-dir")
    add_format_option(krun)
    krun.set_defaults(func=k8s_run)
    collect = ksub.add_parser("collect", parents=[k8s_opts],
                              help="copy run archives from the cluster's runs volume (default: all not yet here)")
    collect.add_argument("run_ids", nargs="*", metavar="RUN_ID")
    collect.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where run archives go (default: runs/)")
    collect.set_defaults(func=k8s_collect)
    upload = sub.add_parser("upload", help="copy run archives to object storage (s3://bucket/prefix), each "
                            "manifest last; never over an archive already there")
    upload.add_argument("archives", nargs="+", type=Path, metavar="ARCHIVE", help="run archive directories")
    upload.add_argument("--runs-dir", type=dir_or_uri, required=True, metavar="S3_URI",
                        help="where they go: s3://bucket/prefix (endpoint and credentials: the AWS environment)")
    upload.set_defaults(func=upload_command)
    kcmp = ksub.add_parser("compare", parents=[k8s_opts],
                           help="compare archives on the runs volume in the cluster (a Spark driver Job whose "
                                "executors are pods); the report is copied into --out")
    kcmp.add_argument("run_ids", nargs="+", metavar="RUN_ID", help="run archives on the release's runs volume")
    kcmp.add_argument("--baseline", required=True, help="variant to compare against")
    kcmp.add_argument("--candidate", required=True, help="variant under test")
    kcmp.add_argument("--out", type=Path, default=None,
                      help="where the report goes (default: reports/<time>-<cand>-vs-<base>)")
    add_rule_options(kcmp)
    add_gate_option(kcmp)
    kcmp.add_argument("--timeout", type=float, default=900.0, metavar="SECONDS",
                      help="how long the comparison may take in the cluster (default 900)")
    add_format_option(kcmp)
    kcmp.set_defaults(func=k8s_compare)
    status = ksub.add_parser("status", parents=[k8s_opts], help="readiness of the release's workloads")
    status.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                        help="wait up to SECONDS until every workload is ready")
    status.set_defaults(func=k8s_status)


def _check_compare(args: argparse.Namespace, variants: list[str]) -> None:
    """Before anything starts: --compare (or --fail-on-regression, which compares) needs exactly two variants."""
    if (args.compare or args.fail_on_regression) and len(variants) != 2:
        raise ConfigError(f"--compare needs two variants, the baseline then the candidate (got {len(variants)}): "
                          "--variant BASELINE --variant CANDIDATE")


def _then_compare(args: argparse.Namespace, archive: Path | str, variants: list[str]) -> int:
    if not (args.compare or args.fail_on_regression):
        return 0
    return compare_archives([str(archive)], variants[0], variants[1], gate=args.fail_on_regression,
                            fmt=getattr(args, "format", TABLE))


def _print_run(rows: list[dict], probes: dict, archive: Path | str, fmt: str = TABLE,
               rules: Sequence[str] = ()) -> None:
    """A run's table (or rows for programs), its scenario's rules, what its faults and actions did, its probes'
    counts, where its archive is."""
    print_summary_as(rows, fmt, archive)
    if fmt == TABLE:
        print_expectations({r["variant"]: evaluate(rules, r)["checks"] for r in rows})
        print_faults(rows)
        print_actions(rows)
        if probes:
            print_probes(probes)
        console.print(f"run archive: {place(archive)}", markup=False)


def run_command(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from harness.run.hooks import Hook, RunState
    from harness.run.sequence import Run
    from harness.run.site import SITES

    scenario = scenario_of(args)
    out = progress_console(args.format)
    variants = select(load_variants(args.variants, say=log_to(out)), args.variants_wanted or ["unpatched"])
    _check_compare(args, [v.name for v in variants])
    # The bars live in a terminal; piped (a CI log) they would print once, at the end, what the summary says.
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(bar_width=20), TimeElapsedColumn(),
                        TextColumn("{task.fields[counts]}"), console=out, disable=not out.is_terminal)
    tasks = {v.name: progress.add_task(v.name, total=scenario.duration_s, counts="starting brokers")
             for v in variants}

    class Bars(Hook):
        """Each variant's live counts on its bar."""

        def tick(self, run: RunState, elapsed_s: float, counts: dict) -> None:
            for name, c in counts.items():
                mean = f"{c.mean_wakeup_s:.2f} s" if c.mean_wakeup_s is not None else "-"
                progress.update(tasks[name], completed=min(elapsed_s, scenario.duration_s),
                                counts=f"sent {c.sent:.0f}  retries {c.retries:.0f}  mean wakeup {mean}")

    with progress:
        result = Run(variants, scenario, args.runs_dir, RunOptions.from_args(args), log=log_to(out), hooks=[Bars()],
                     site=SITES[args.backend], run_id=args.run_id).execute()
    _print_run(result.summary, result.probes, result.archive, args.format, result.record.scenario.get("expect") or [])
    return _then_compare(args, result.archive, [v.name for v in variants])


def k8s_run(args: argparse.Namespace) -> int:
    """From a workstation: the run becomes a Job of the Helm release; its archive is copied back here."""
    from harness.deploy.k8s.naming import UI_PORTS
    from harness.deploy.k8s.remote import Cluster
    from harness.run.plan import new_run_id
    from harness.run.sequence import GRACE_S, RunResult

    scenario = scenario_of(args)
    names = list(dict.fromkeys(args.variants_wanted or ["unpatched"]))
    _check_compare(args, names)
    if args.ui and len(names) > UI_PORTS:
        raise ConfigError(f"--ui with {len(names)} variants: the chart's load-test Service forwards Locust's UI for "
                          f"{UI_PORTS}; run at most {UI_PORTS} variants with --ui, or drop it")
    # The Job's log (the pod's own tables among it) is progress: on stderr when stdout carries rows.
    out = progress_console(args.format)
    cluster = Cluster(args.release, args.namespace, log=lambda line: out.print(line, markup=False, highlight=False))
    # The run's variants are the release's (builds it deploys, clusters of the user's named by endpoints:), not
    # this machine's variants file: asked for before a Job starts.
    cluster.check_variants(names)
    run_id = args.run_id or new_run_id(scenario.name)
    bucket = outbox.bucket_of(args.runs_dir, [run_id])
    job = cluster.start(run_id, scenario, names, RunOptions.from_args(args))
    # Brokers restart for the run (up to their readiness timeout), then the load, then the export.
    cluster.follow(job, timeout_s=timing.run_time_s(scenario) + GRACE_S + 900)
    [fetched] = cluster.fetch([run_id], outbox.local_dir(args.runs_dir))
    record = RunRecord.model_validate_json((fetched / MANIFEST).read_text())
    result = RunResult(record, outbox.deliver(fetched, bucket, log=out.print))
    _print_run(result.summary, result.probes, result.archive, args.format,
               result.record.scenario.get("expect") or [])
    return _then_compare(args, result.archive, names)


def upload_command(args: argparse.Namespace) -> int:
    for uri in outbox.upload(args.archives, args.runs_dir, log=console.print):
        console.print(f"run archive: {uri}")
    return 0


def k8s_compare(args: argparse.Namespace) -> int:
    """The comparison where the archives are: Spark's driver and executors as pods of the release."""
    from harness.deploy.k8s.remote import Cluster
    from spark.outputs import default_out, with_place

    rule = VerdictRule.from_args(args)  # a bad option is refused before anything starts
    out = (args.out or default_out(f"{args.candidate}-vs-{args.baseline}")).expanduser().resolve()
    refuse_existing(out, "report")
    if args.baseline == args.candidate:
        raise ConfigError("--baseline and --candidate name the same variant: give two")
    progress = progress_console(args.format)
    cluster = Cluster(args.release, args.namespace, log=lambda line: progress.print(line, markup=False,
                                                                                    highlight=False))
    cluster.compare(list(dict.fromkeys(args.run_ids)), args.baseline, args.candidate, rule.as_args(), out,
                    timeout_s=args.timeout)
    summary = json.loads((out / "summary.json").read_text())
    if args.format == TABLE:
        # The driver's log above ends with its table and verdict; here is where its report landed.
        console.print(f"verdict: {summary['verdict']}\nreport: {out / 'report.html'}\nsummary: {out / 'summary.json'}")
    else:  # the rows `compare --format` prints, with where the report landed here (not in the driver's pod)
        print_comparison_as(with_place(summary, out), args.format)
    return gate_exit(args, [summary["verdict"]])


def k8s_status(args: argparse.Namespace) -> int:
    from harness.deploy.k8s.remote import wait_ready

    with console.status(f"waiting for release {args.release} in namespace {args.namespace} ..."):
        wait_ready(args.namespace, args.release, max(args.wait, 1.0), log=console.print)
    return 0


def k8s_collect(args: argparse.Namespace) -> int:
    from harness.deploy.k8s.remote import Cluster

    cluster = Cluster(args.release, args.namespace, log=console.print)
    wanted = args.run_ids or [r for r in cluster.archives() if not (args.runs_dir / r).exists()]
    if not wanted:
        console.print(f"every archive on the runs volume is already in {args.runs_dir}")
        return 0
    for path in cluster.fetch(wanted, args.runs_dir):
        console.print(f"copied {path}")
    return 0
