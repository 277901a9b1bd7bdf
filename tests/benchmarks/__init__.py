"""Benchmarks: not tests; each writes what this machine did into bench-results/ (docs/benchmarks.md)."""

from __future__ import annotations

import json
from pathlib import Path


def write_result(out: dict, path: Path) -> None:
    """A benchmark's figures, as JSON, where docs/benchmarks.md quotes them from; the path said."""
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"written to {path}")
