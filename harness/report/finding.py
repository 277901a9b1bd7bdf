"""What a comparison found, in one sentence: the report's first screen and the terminal's last line say it, so
a reader who stops there still knows which build did what. Pure: from summary.json's document."""

from __future__ import annotations

from collections.abc import Sequence

from harness.contracts.verdict import NOT_ENOUGH
from harness.report import formats

# How the sentence names each compared metric (harness.contracts.verdict.COMPARED and the verdict metrics).
DOES = {
    "wakeup_ms": "wakes a poll already waiting for a retry in",
    "redelivery_ms": "redelivers a nacked message, after its due time, in",
    "stalled": "leaves waiting for a poll to run out",
    "lost": "loses",
}


def _level(comparison: dict, side: str) -> str:
    return formats.level(comparison[f"median_{side}"], comparison.get("statistic", "median"))


def _primary(comparison: dict, baseline: str, candidate: str) -> str:
    what = DOES.get(comparison["metric"], f"{comparison['metric']}:")
    shares = " of retries" if comparison.get("statistic") == "share" else ""
    cand, base = _level(comparison, "candidate"), _level(comparison, "baseline")
    if formats.NEVER in (cand, base):  # a level that is an endless wait has no "in ..."
        said = (f"{comparison['metric']} of {candidate} {cand} against {base} for {baseline} (never: a retry "
                "was not redelivered)")
    else:
        said = f"{candidate} {what} {cand}{shares} against {base} for {baseline}"
    if comparison["verdict"] == NOT_ENOUGH:
        return f"{said} (not enough data to judge: {comparison['reason']})"
    return f"{said} ({comparison['verdict']})"


def _losses(per_variant: Sequence[dict], variants: Sequence[str]) -> str:
    """Lost and duplicated messages of the two sides, over every scenario compared."""
    counts = {v: [0, 0] for v in variants}
    for row in per_variant:
        if row["variant"] in counts:
            counts[row["variant"]][0] += row["ledger"].get("lost", 0)
            counts[row["variant"]][1] += row["ledger"].get("duplicated", 0)
    bad = [f"{v} lost {lost} and duplicated {dup}" for v, (lost, dup) in counts.items() if lost or dup]
    return "; ".join(bad) if bad else "nothing lost or duplicated on either side"


def sentence(summary: dict) -> str:
    """One sentence for a comparison's summary: each scenario's primary comparison, then the losses."""
    baseline, candidate = summary["baseline"], summary["candidate"]
    primaries = [c for c in summary["comparisons"] if c["primary"]]
    scenarios = {c["scenario"] for c in primaries}
    said = [(f"{c['scenario']}: " if len(scenarios) > 1 else "") + _primary(c, baseline, candidate)
            for c in primaries]
    found = "; ".join(said) if said else f"no comparison of {candidate} against {baseline} could be made"
    return f"{found}; {_losses(summary['per_variant'], (baseline, candidate))}."
