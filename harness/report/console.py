"""The terminal's plumbing: stdout's and stderr's consoles at their width, the result formats a command may
print (a table for people, rows for programs), progress lines, warnings and paths as a reader can use them."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from harness.core.errors import one_line
from harness.core.exits import DETAIL, ERROR

# How results print: tables for people, or rows for programs on stdout (progress then goes to stderr).
TABLE, TSV, JSON = "table", "tsv", "json"
FORMATS = (TABLE, TSV, JSON)
# Piped output with no COLUMNS (a file, a pipe into less) gets wide lines; a terminal its own width, and COLUMNS
# wins wherever it is set (CI logs set it to the width they show): rich reads both itself when given no width.
PIPED_WIDTH = 160


def _width(stream: object) -> int | None:
    return None if stream.isatty() or os.environ.get("COLUMNS", "").strip().isdigit() else PIPED_WIDTH


console = Console(highlight=False, width=_width(sys.stdout))
err_console = Console(stderr=True, highlight=False, width=_width(sys.stderr))


def line(label: str, colour: str, message: object) -> Text:
    """``label message`` as one line, the message as written: not rich markup ('[/]', '[a-z0-9]'), no emoji codes
    (':cat:'), line breaks escaped."""
    return Text.assemble((label, colour), " ", one_line(message))


def say_end(what: str, text: str) -> None:
    """How a command's end is said on stderr (harness.core.exits): an error in one red line, its detail dimmed
    below it, an interrupt as it is said."""
    if what == ERROR:
        err_console.print(line("error:", "red", text), soft_wrap=True)
    else:
        err_console.print(text, style="dim" if what == DETAIL else None, markup=False, highlight=False,
                          soft_wrap=True)


def log(text: str) -> None:
    """A progress line, dimmed, wrapped at the width; taken as written (a PID list is no markup)."""
    console.print(Text(one_line(text), style="dim"))


def log_to(out: Console) -> Callable[[str], None]:
    """``log`` onto ``out``: stdout beside the tables, stderr when stdout carries rows (--format tsv|json)."""
    return lambda text: out.print(Text(one_line(text), style="dim"))


def progress_console(fmt: str) -> Console:
    """Where a command's progress goes when its results print as ``fmt``: rows for programs keep stdout."""
    return console if fmt == TABLE else err_console


def labelled(label: str, colour: str, message: object) -> Table:
    """``label message`` wrapped at the width under the message's first word (a hanging indent): a wrapped
    warning still reads as one, its first line starting with its label; the message as written (``line``)."""
    grid = Table.grid(padding=(0, 1, 0, 0))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row(Text(label, style=colour), Text(one_line(message)))
    return grid


def warn(text: str) -> None:
    err_console.print(labelled("warning:", "yellow", text))


def place(path: str | Path) -> str:
    """A path as the reader can use it from here: relative when under the working directory (shorter lines); a
    URI (s3://) as it is."""
    if "://" in str(path):
        return str(path)
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)
