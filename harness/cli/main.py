"""The `rmq-harness` command: the one composition root. Each command group's module adds its parsers and names
the function that runs it (``set_defaults(func=...)``); this module builds the parser, applies RMQ_HARNESS_*
to every option, and turns errors and interrupts into one line and an exit code. ``main(argv)`` is callable
from tests; the console script calls ``entry``."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from harness import __version__
from harness.cli import brokers, calibrate, compare, matrix, ramp, releases, runs
from harness.cli.options import Parser, env_defaults
from harness.core.errors import ConfigError, HarnessError
from harness.report.terminal import err_console, line

# In the order `rmq-harness --help` lists them.
COMMANDS = (brokers, runs, calibrate, matrix, ramp, releases, compare)


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="rmq-harness", description="Load-test and regression harness for RocketMQ POP")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    p.add_argument("--variants", type=Path, default=None,
                   help="variants file: your own builds can live outside the repository "
                        "(default: workloads/variants.yaml)")
    sub = p.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parsers(sub)
    env_defaults(p)
    return p


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # Turn SIGTERM into an exception so cleanup (stopping half-started brokers) runs as for Ctrl-C.
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
    except ConfigError as e:
        err_console.print(line("error:", "red", e), soft_wrap=True)
        return e.exit_code
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return args.func(args)
    except HarnessError as e:
        err_console.print(line("error:", "red", e), soft_wrap=True)
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
