"""What every Spark job shares: its session (spark-submit's master under spark-submit, else local[*] or
--master), the interrupt that reaches its Spark work, and a testable ``main``: errors as one line with their
exit code (2: bad input), the report's place on stdout.

A job is run as `spark-submit spark/jobs/<job>.py ...` with the virtualenv's Python as the driver's
(PYSPARK_DRIVER_PYTHON), where the project is installed, or as `python -m spark.jobs.<job>`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from harness.core.errors import ConfigError, HarnessError

Warn = Callable[[str], None]


def under_spark_submit() -> bool:
    return "SPARK_SUBMIT_OPTS" in os.environ or os.environ.get("SPARK_ENV_LOADED") == "1"


def session(args: argparse.Namespace, app: str, log: Callable[[str], None] | None = None) -> object:
    """The job's SparkSession: --master, or spark-submit's when submitted, or local[*] from Python."""
    from spark.session import local_session

    master = getattr(args, "master", None) or (None if under_spark_submit() else "local[*]")
    return local_session(master, app=app, log=log)


def stderr_warn(line: str) -> None:
    print(f"warning: {line}", file=sys.stderr, flush=True)


def main(parser: Callable[[], argparse.ArgumentParser], run: Callable[..., dict], argv: Sequence[str] | None,
         exit_code: Callable[[argparse.Namespace, dict], int] = lambda args, summary: 0) -> int:
    """Parse, run, say where the report went; a HarnessError is one line and its exit code."""
    args = parser().parse_args(argv)
    try:
        summary = run(args, warn=stderr_warn)
    except HarnessError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    if "verdict" in summary:
        print(f"verdict: {summary['verdict']}")
    print(f"report: {summary['report']}")
    return exit_code(args, summary)


def reasons(option: str, items: Sequence[str], form: str = "SCENARIO=REASON") -> dict[str, str]:
    """NAME=REASON items of a repeatable option (runs that failed, releases skipped) as a dict."""
    out = {}
    for item in items:
        name, sep, reason = item.partition("=")
        if not sep:
            raise ConfigError(f"{option} {item!r}: write {form}")
        out[name] = reason
    return out


def distinct(variants: Sequence[str], what: str = "variant") -> list[str]:
    if len(set(variants)) != len(variants):
        raise ConfigError(f"--variant: each {what} once")
    return list(variants)
