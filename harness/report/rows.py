"""A command's results as a table for people or as rows for programs (--format tsv|json): the rows' spelling
on stdout, and which of the two each kind of result prints as."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.core.publish import json_safe
from harness.report.comparison_table import print_comparison
from harness.report.console import JSON, TABLE
from harness.report.records import COMPARISON_FIELDS, SUMMARY_FIELDS, comparison_records, summary_record
from harness.report.run_tables import print_summary


def print_records(records: Sequence[Mapping], fields: Sequence[str], fmt: str, **about: object) -> None:
    """Rows for programs, on stdout as written (never wrapped): ``tsv``, a header line and a line per record
    (empty for none), then a blank line, so that the blocks of one command stay apart; ``json``, one document
    a line with ``about`` and the records as ``rows``."""
    if fmt == JSON:
        doc = {**about, "rows": [{k: r[k] for k in fields} for r in records]}
        sys.stdout.write(json.dumps(json_safe(doc), allow_nan=False) + "\n")
    else:
        sys.stdout.write("\t".join(fields) + "\n")
        for r in records:
            sys.stdout.write("\t".join(_tsv(r[k]) for k in fields) + "\n")
        sys.stdout.write("\n")
    sys.stdout.flush()


def _tsv(v: object) -> str:
    """A TSV field: empty for none, six significant digits for a figure, text with tabs and breaks as spaces."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return format(v, ".6g")
    return " ".join(str(v).split())


def print_summary_as(summary: Sequence[dict], fmt: str, archive: str | Path | None = None) -> None:
    """A run's figures per variant as ``fmt`` (a table, or rows for programs)."""
    if fmt == TABLE:
        print_summary(summary)
        return
    print_records([summary_record(s) for s in summary], SUMMARY_FIELDS, fmt, kind="variants",
                  **({"run_archive": str(archive)} if archive is not None else {}))


def print_comparison_as(summary: dict, fmt: str) -> None:
    """A comparison as ``fmt`` (a table, or rows for programs)."""
    if fmt == TABLE:
        print_comparison(summary)
        return
    print_records(comparison_records(summary), COMPARISON_FIELDS, fmt, kind="comparison",
                  verdict=summary["verdict"], report=summary["report"],
                  summary=str(Path(summary["out"]) / "summary.json"))
