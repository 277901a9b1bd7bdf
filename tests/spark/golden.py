"""The golden run: a real run's archive committed with the summary the comparison gave of it, and the figures
of a summary (what it found, not when or where it ran) that a comparison of it today must give again."""

from __future__ import annotations

import json
from pathlib import Path

from harness.core.paths import REPO_ROOT

GOLDEN = REPO_ROOT / "tests" / "resources" / "archives" / "burst"
# What says when and where the comparison ran, not what it found.
CIRCUMSTANCES = ("generated_at",)


def golden_archive() -> Path:
    """The committed run archive (the one folder with a manifest)."""
    [archive] = [p for p in GOLDEN.iterdir() if (p / "manifest.json").exists()]
    return archive


def golden_summary() -> dict:
    """The summary.json committed beside it."""
    return json.loads((GOLDEN / "summary.json").read_text())


def figures(summary: dict) -> dict:
    """A summary without its circumstances, and its runs without their paths."""
    out = {k: v for k, v in summary.items() if k not in CIRCUMSTANCES}
    out["runs"] = [{k: v for k, v in r.items() if k != "path"} for r in summary["runs"]]
    return out
