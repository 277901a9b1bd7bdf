"""The one error type users see: a single line saying what is wrong and how to fix it."""

from __future__ import annotations

# Exit codes of the CLI (2 is also argparse's own for bad arguments).
EXIT_ERROR = 1
EXIT_USAGE = 2


class HarnessError(Exception):
    """An error to print as one line, ending the command with ``exit_code``."""

    def __init__(self, message: str, exit_code: int = EXIT_ERROR, detail: str = "") -> None:
        super().__init__(message)
        self.exit_code = exit_code
        # Extra lines (e.g. the tail of a broker log) shown below the one-line message.
        self.detail = detail


class ConfigError(HarnessError):
    """Bad user input in a config file or on the command line."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message, EXIT_USAGE, detail)
