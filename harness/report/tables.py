"""The terminal's table engine: figures as rows with one column a name, in as many tables as the width needs
and every name whole (print_transposed); a wide table printed whole rather than cut (print_whole); what a
table's figures mean, under it (note)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

# Looked up on each call, not imported by name: a test prints on a console of its own width.
from harness.report import console

# A cell wraps (on spaces) past this many columns, or past its column's name when that is longer: names and
# figures stay whole, and a long cell (a fault's open wait) takes lines, not the width of the others.
CELL_WIDTH = 18


def _text(cell: str | Text) -> Text:
    return cell if isinstance(cell, Text) else Text(cell)


def _column_width(header: str, cells: Sequence[str | Text]) -> int:
    """A column's width on the screen: its name whole (each line of it), its cells up to CELL_WIDTH."""
    name = max(Text(part).cell_len for part in header.split("\n"))
    return max(name, min(CELL_WIDTH, max((_text(c).cell_len for c in cells), default=0)))


def _chunks(label_width: int, widths: Sequence[int], room: int) -> list[range]:
    """The columns in runs that fit ``room`` beside the label column (at least one a run): a run's width is
    its columns' and the label column's, plus padding (2) and a border (1) each, plus the last border."""
    runs, start, used = [], 0, label_width + 4
    for i, w in enumerate(widths):
        if i > start and used + w + 3 > room:
            runs.append(range(start, i))
            start, used = i, label_width + 4
        used += w + 3
    runs.append(range(start, len(widths)))
    return runs


def print_transposed(title: str, labels: Sequence[str], columns: Sequence[tuple[str, Sequence[str | Text]]]) -> None:
    """Figures as rows (``labels``), one column per name (a variant, a metric, a fault): at every width each name
    whole, never cut (rich would ellipsize a squeezed column: 'patch…'); the columns that do not fit beside
    the first ones go to tables below, each with the row labels."""
    out = console.console
    label_width = max((Text(label).cell_len for label in labels), default=0)
    widths = [_column_width(header, cells) for header, cells in columns]
    for n, run in enumerate(_chunks(label_width, widths, out.width)):
        t = Table(title=title if n == 0 else None, title_justify="left")
        t.add_column("", no_wrap=True, overflow="fold")
        for i in run:
            t.add_column(columns[i][0], justify="right", overflow="fold", min_width=min(widths[i], out.width),
                         max_width=widths[i])
        for r, label in enumerate(labels):
            t.add_row(label, *(_text(columns[i][1][r]) for i in run))
        out.print(t)


def print_whole(t: Table) -> None:
    """A wide table (a sweep, a matrix, a ramp) as wide as its cells need when the console is narrower: a long
    line rather than a figure or a verdict cut to 'improvem…' (the run's own tables are transposed instead)."""
    out = console.console
    need = Measurement.get(out, out.options.update(width=10_000), t).maximum
    narrow = out.width
    out.width = max(need, narrow)  # print caps its width= at the console's own
    try:
        out.print(t)
    finally:
        out.width = narrow


def note(text: str) -> None:
    """What a table's figures mean, under it: dimmed, wrapped at the width."""
    console.console.print(Text(text, style="dim"))


def several(items: Iterable[str]) -> bool:
    """Whether ``items`` name more than one thing (a scenario then goes above each column's name)."""
    return len(set(items)) > 1
