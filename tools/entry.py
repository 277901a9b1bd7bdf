"""What the tools' commands share (`python -m tools.cluster`, `python -m tools.s3`): errors as one line and
their exit code (2: bad input), an interrupt as 130 (harness.core.exits)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from harness.core.exits import ERROR, exit_code_of
from harness.report.terminal import err_console, line


def _say(what: str, text: str) -> None:
    if what == ERROR:
        err_console.print(line("error:", "red", text), soft_wrap=True)
    else:
        err_console.print(text, markup=False, highlight=False)


def main(parser: Callable[[], argparse.ArgumentParser], run: Callable[[argparse.Namespace], int],
         argv: Sequence[str] | None) -> int:
    return exit_code_of(lambda: run(parser().parse_args(argv)), _say)
