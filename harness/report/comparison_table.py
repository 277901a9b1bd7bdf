"""A comparison in the terminal: one column a metric with its figures as rows, why each verdict, the verdict
and its sentence, and where the report and summary.json went."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from rich.text import Text

from harness.contracts.verdict import IMPROVEMENT, INCONCLUSIVE, NOT_ENOUGH, REGRESSION
from harness.report import console, formats
from harness.report.finding import sentence
from harness.report.records import comparison_records
from harness.report.run_tables import print_grpc_clients
from harness.report.tables import note, print_transposed, several

COLOUR = {IMPROVEMENT: "green", REGRESSION: "red", NOT_ENOUGH: "yellow", INCONCLUSIVE: "yellow"}


def _interval(r: Mapping) -> str:
    return "-" if r["ci_low"] is None else f"{formats.number(r['ci_low'])}-{formats.number(r['ci_high'])}"


def print_comparison(summary: dict) -> None:
    """A comparison: one column a metric, its figures as rows; why each verdict, and where the report went."""
    rule = summary["rule"]
    level = f"{1 - rule['alpha'] * (2 if rule.get('one_sided') else 1):.0%}"
    base, cand = summary["baseline"], summary["candidate"]
    records = comparison_records(summary)
    by_scenario = several(r["scenario"] for r in records)
    labels = ["cycles b/c", f"{base} (baseline)", f"{cand} (candidate)", "ratio", f"{level} interval", "p (adj.)",
              "verdict"]
    columns = []
    for r in records:
        name = (f"{r['scenario']}\n" if by_scenario else "") + r["metric"] + (" (primary)" if r["primary"] else "")
        columns.append((name, [f"{r['cycles_baseline']}/{r['cycles_candidate']}",
                               formats.level(r["level_baseline"], r["statistic"]),
                               formats.level(r["level_candidate"], r["statistic"]), formats.number(r["ratio"]),
                               _interval(r), formats.p_value(r["p_adjusted"]),
                               Text(r["verdict"], style=COLOUR.get(r["verdict"], "white"))]))
    print_transposed(f"{cand} against {base}, per cycle", labels, columns)
    for r in records:
        note(f"{r['scenario'] + ' ' if by_scenario else ''}{r['metric']}: {r['reason']}")
    print_grpc_clients({r["variant"]: r.get("grpc_client") for r in summary.get("per_variant", [])
                        if r["variant"] in (base, cand)})
    colour = {IMPROVEMENT: "green", REGRESSION: "red"}.get(summary["verdict"], "yellow")
    # The rule in full is in summary.json and the report (README: "The verdict rule"): not four lines here.
    console.console.print(Text.assemble("verdict: ", (summary["verdict"], f"bold {colour}")))
    console.console.print(sentence(summary), markup=False)
    console.console.print(f"report: {console.place(summary['report'])}", markup=False)
    console.console.print(f"summary: {console.place(Path(summary['out']) / 'summary.json')}", markup=False)
