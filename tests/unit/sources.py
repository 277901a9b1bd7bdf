"""The project's own Python sources, which the architecture tests read (test_imports.py, test_one_definition.py)."""

from __future__ import annotations

from pathlib import Path

from harness.core.paths import REPO_ROOT

# The top folders whose modules the import rules cover.
ROOTS = ("harness", "spark", "dashboards", "workloads", "tools")


def sources() -> list[Path]:
    """Every module under ROOTS, sorted."""
    files = []
    for root in ROOTS:
        files += [p for p in (REPO_ROOT / root).rglob("*.py") if "__pycache__" not in p.parts]
    return sorted(files)
