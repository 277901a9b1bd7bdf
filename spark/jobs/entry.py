"""The base every Spark job fills in (compare, matrix, sweep, history). A ``Job`` is its name, its command line,
its work and what its summary means as an exit code; the base refuses an existing --out, starts the session when
the work needs one (spark-submit's master under spark-submit, else local[*] or --master) with the interrupt that
reaches its Spark work, and gives each job a testable ``main``: errors as one line with their exit code (2: bad
input), an interrupt as 130, the report's place on stdout. ``on_archives`` is the work of a job over run
archives: its ``Plan`` (the archives loaded and checked before paying for a JVM), collected on Spark, analysed,
written as a report (spark.outputs).

A job is run as `spark-submit spark/jobs/<job>.py ...` with the virtualenv's Python as the driver's
(PYSPARK_DRIVER_PYTHON), where the project is installed, or as `python -m spark.jobs.<job>`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.contracts.verdict import VerdictRule, add_rule_options
from harness.core.errors import ConfigError
from harness.core.exits import ERROR, exit_code_of
from harness.core.publish import refuse_existing
from spark import outputs
from spark.comparison import Collected, collect
from spark.io import Archive

Warn = Callable[[str], None]
Log = Callable[[str], None]


def under_spark_submit() -> bool:
    return "SPARK_SUBMIT_OPTS" in os.environ or os.environ.get("SPARK_ENV_LOADED") == "1"


@dataclass(frozen=True)
class Call:
    """One call of a job: its arguments, where its warnings and progress lines go, the session it was handed."""

    job: Job
    args: argparse.Namespace
    warn: Warn
    log: Log
    given: object | None

    @contextmanager
    def spark(self, log: Log | None = None) -> Iterator[object]:
        """The session handed in, or one started now (``log``: a line as it starts): --master, or spark-submit's
        when submitted, or local[*] from Python. A Ctrl-C or SIGTERM inside comes out as KeyboardInterrupt, never
        as a cancelled job's error."""
        from spark.session import interruptible, local_session

        master = getattr(self.args, "master", None) or (None if under_spark_submit() else "local[*]")
        spark = self.given or local_session(master, app=f"rmq-harness-{self.job.name}", log=log)
        with interruptible(spark):
            yield spark

    def out(self, kind: str | None = None, now: dt.datetime | None = None) -> Path:
        """--out, else reports/<time>-<kind> (the job's name by default)."""
        return Path(self.args.out) if self.args.out else outputs.default_out(kind or self.job.name, now)


@dataclass(frozen=True)
class Job:
    """A Spark job: ``name`` (its Spark application is rmq-harness-<name>, its report reports/<time>-<name>), its
    command line, its work (the summary, with where the report went) and its exit code for a summary."""

    name: str
    parser: Callable[[], argparse.ArgumentParser]
    work: Callable[[Call], dict]
    exit_code: Callable[[argparse.Namespace, dict], int] = lambda args, summary: 0

    def run(self, args: argparse.Namespace, warn: Warn = print, spark: object | None = None,
            log: Log = outputs._stderr) -> dict:
        """The whole job; returns the summary (also written to summary.json). ``log``: its progress lines. A
        Ctrl-C or SIGTERM comes out as KeyboardInterrupt."""
        if args.out:
            refuse_existing(Path(args.out), "report")
        return self.work(Call(self, args, warn, log, spark))

    def main(self, argv: Sequence[str] | None = None) -> int:
        """Parse, run, say where the report went; an error or an interrupt is one line and its exit code."""
        def command() -> int:
            args = self.parser().parse_args(argv)
            summary = self.run(args, warn=stderr_warn)
            if "verdict" in summary:
                print(f"verdict: {summary['verdict']}")
            print(f"report: {summary['report']}")
            return self.exit_code(args, summary)

        return exit_code_of(command, _say)


@dataclass(frozen=True)
class Plan:
    """What a job over archives does, settled before paying for a JVM: the archives (loaded and checked), the
    variants to collect, their summary.json document (spark.outputs.summary_of) under the verdict rule, the
    report's renderer (harness.report.html), the report's kind when not the job's name, and the line to log
    once Spark is up (its start is logged too) if any."""

    archives: list[Archive]
    variants: list[str]
    summary: Callable[[Collected, VerdictRule], dict]
    render: Callable[..., object]
    kind: str | None = None
    starting: Callable[[object], str] | None = None


def on_archives(plan: Callable[[argparse.Namespace, Warn], Plan]) -> Callable[[Call], dict]:
    """The work of a job over run archives: the verdict rule and ``plan``, then collect, analyse, write."""
    def work(call: Call) -> dict:
        rule = VerdictRule.from_args(call.args)
        p = plan(call.args, call.warn)
        with call.spark(call.log if p.starting else None) as spark:
            if p.starting:
                call.log(p.starting(spark))
            c = collect(spark, p.archives, p.variants, seed=rule.seed)
            try:
                return outputs.write(c, p.summary(c, rule), call.out(p.kind), p.render, call.log)
            finally:
                c.close()

    return work


def archives_parser(prog: str, description: str, out: str, variants: str | None = None) -> argparse.ArgumentParser:
    """The command line every job over run archives shares: the archives, --out (its default: ``out``), the verdict
    rule's options, --master; with ``variants``, the repeatable --variant it helps with."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("archives", nargs="+", help="run archives: directories or s3://bucket/prefix/<run-id>")
    if variants:
        p.add_argument("--variant", action="append", dest="variants", required=True, metavar="NAME", help=variants)
    p.add_argument("--out", default=None, help=f"output directory (default: reports/<time>-{out})")
    add_rule_options(p)
    p.add_argument("--master", default=None, help="Spark master (default: local[*], or spark-submit's)")
    return p


def stderr_warn(line: str) -> None:
    print(f"warning: {line}", file=sys.stderr, flush=True)


def _say(what: str, text: str) -> None:
    print(f"error: {text}" if what == ERROR else text, file=sys.stderr)


def reasons(args: argparse.Namespace, *options: str) -> list[dict[str, str]]:
    """The NAME=REASON items of repeatable options (runs that failed, releases skipped), each option's as a dict."""
    out = []
    for option in options:
        out.append({})
        for item in getattr(args, option.removeprefix("--").replace("-", "_")):  # argparse's dest of the option
            name, sep, reason = item.partition("=")
            if not sep:
                raise ConfigError(f"{option} {item!r}: write SCENARIO=REASON")
            out[-1][name] = reason
    return out


def distinct(variants: Sequence[str], what: str = "variant") -> list[str]:
    if len(set(variants)) != len(variants):
        raise ConfigError(f"--variant: each {what} once")
    return list(variants)
