"""The one error type users see: a single line saying what is wrong and how to fix it."""

from __future__ import annotations

import re

# Exit codes of the CLI (2 is also argparse's own for bad arguments).
EXIT_ERROR = 1
EXIT_USAGE = 2

# Line breaks (every one str.splitlines knows) and the other control characters.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(text: object) -> str:
    r"""``text`` with line breaks and other control characters written as escapes (\n, \x00), for messages
    that quote what a user wrote (a YAML key, a path, an argument): the message stays one line."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(text))


def first_line(err: BaseException) -> str:
    """The first non-empty line of an exception's message (its type's name when it has none), one line."""
    lines = [s for s in str(err).splitlines() if s.strip()]
    return one_line(lines[0].strip() if lines else type(err).__name__)


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


class NotApplicable(ConfigError):
    """A build the scenario cannot ask: it predates what the scenario needs, does not know a setting the scenario
    turns on, or (a hybrid) cannot run the code that setting turns on; a run would measure something else.
    Campaigns (matrix, sweep) run the other builds and show this one as not applicable."""

    def __init__(self, variant: str, message: str) -> None:
        super().__init__(message)
        self.variant = variant
