"""What the tools' commands share (`python -m tools.cluster`, `python -m tools.s3`): errors as one line and
their exit code (2: bad input), an interrupt as 130."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from harness.core.errors import HarnessError
from harness.report.console import err_console, line


def main(parser: Callable[[], argparse.ArgumentParser], run: Callable[[argparse.Namespace], int],
         argv: Sequence[str] | None) -> int:
    args = parser().parse_args(argv)
    try:
        return run(args)
    except HarnessError as e:
        err_console.print(line("error:", "red", e), soft_wrap=True)
        if e.detail:
            err_console.print(e.detail, markup=False, highlight=False)
        return e.exit_code
    except KeyboardInterrupt:
        err_console.print("interrupted")
        return 130
