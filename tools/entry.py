"""What the tools' commands share (`python -m tools.cluster`, `python -m tools.s3`): errors as one line and
their exit code (2: bad input), an interrupt as 130 (harness.core.exits)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from harness.core.exits import exit_code_of
from harness.report.console import say_end


def main(parser: Callable[[], argparse.ArgumentParser], run: Callable[[argparse.Namespace], int],
         argv: Sequence[str] | None) -> int:
    return exit_code_of(lambda: run(parser().parse_args(argv)), say_end)
