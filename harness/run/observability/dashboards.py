"""The committed Grafana dashboards (dashboards/*.json) read as data: their panel queries, with the
dashboard variables filled in for one run, so a run can export exactly what the dashboards show."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from harness.core.paths import REPO_ROOT

DASHBOARD_DIR = REPO_ROOT / "dashboards"


def _panels(panels: list[dict]) -> Iterator[dict]:
    for p in panels:
        yield p
        yield from _panels(p.get("panels") or [])


def queries(directory: Path = DASHBOARD_DIR) -> list[tuple[str, str]]:
    """(dashboard / panel title / ref, PromQL with $variables) of every panel target."""
    out = []
    for path in sorted(directory.glob("*.json")):
        dash = json.loads(path.read_text())
        for panel in _panels(dash.get("panels") or []):
            for target in panel.get("targets") or []:
                if target.get("expr"):
                    out.append((f"{path.stem} / {panel.get('title')} / {target.get('refId')}", target["expr"]))
    return out


def substitute(expr: str, run: str = ".*", variant: str = ".*", scenario: str = ".*") -> str:
    return expr.replace("$run", run).replace("$variant", variant).replace("$scenario", scenario)


def panel_queries(run_id: str, directory: Path = DASHBOARD_DIR) -> list[tuple[str, str]]:
    return [(title, substitute(expr, run=run_id)) for title, expr in queries(directory)]
