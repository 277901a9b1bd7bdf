"""A run's per-variant summary and a comparison as flat records, one a variant or a comparison: what
`--format tsv|json` prints for programs, and what the terminal's tables spell for people (run_tables.py,
comparison_table.py). Figures stay raw here (milliseconds as measured, shares as fractions, None where there is
none); formats.py spells them for people."""

from __future__ import annotations

from collections.abc import Mapping

# The record of one variant of a run (a summary entry of the run's manifest), in column order.
SUMMARY_FIELDS = ("scenario", "variant", "hybrid", "cycles", "cycles_timed_out", "sent", "retries", "wakeup_n",
                  "wakeup_p50_ms", "wakeup_p90_ms", "wakeup_max_ms", "pickup_n", "pickup_p50_ms", "redelivery_p50_ms",
                  "nack_retry_p50_ms", "stalled", "stalled_of", "never_redelivered", "retries_expected", "lost",
                  "duplicated", "cross_topic", "errors")
# The record of one comparison of a comparison's summary (summary.json), in column order.
COMPARISON_FIELDS = ("scenario", "metric", "primary", "statistic", "baseline", "candidate", "cycles_baseline",
                     "cycles_candidate", "level_baseline", "level_candidate", "ratio", "difference", "ci_low",
                     "ci_high", "detectable_below", "detectable_above", "p_adjusted", "verdict", "reason")


def summary_record(s: Mapping) -> dict:
    """One variant of a run, as SUMMARY_FIELDS (stalled: None in archives before summary schema 4)."""
    w, p, r, ledger = s["wakeup_ms"], s["pickup_ms"], s["redelivery_ms"], s["ledger"]
    nack = s.get("nack_retry_ms") or {}
    stalled = s.get("stalled") or {}
    return {
        "scenario": s["scenario"], "variant": s["variant"], "hybrid": s.get("hybrid"), "cycles": s["cycles"],
        "cycles_timed_out": s.get("cycles_timed_out"),  # None: an archive before summary schema 16
        "sent": s["sent"], "retries": s["retry_deliveries"],
        "wakeup_n": w["n"], "wakeup_p50_ms": w["p50"], "wakeup_p90_ms": w["p90"], "wakeup_max_ms": w["max"],
        "pickup_n": p["n"], "pickup_p50_ms": p["p50"], "redelivery_p50_ms": r["p50"],
        "nack_retry_p50_ms": nack.get("p50"),
        "stalled": stalled.get("count"), "stalled_of": stalled.get("retries"),
        "never_redelivered": ledger["retries_never_redelivered"], "retries_expected": ledger["retries_expected"],
        "lost": ledger["lost"], "duplicated": ledger["duplicated"], "cross_topic": ledger["cross_topic"],
        "errors": s["errors"],
    }


def comparison_records(summary: Mapping) -> list[dict]:
    """Each comparison of a comparison's summary, as COMPARISON_FIELDS."""
    out = []
    for c in summary["comparisons"]:
        ci = c.get("ci") or (None, None)
        detectable = c.get("detectable") or (None, None)  # summaries before schema 15 have none
        out.append({
            "scenario": c["scenario"], "metric": c["metric"], "primary": c["primary"],
            "statistic": c.get("statistic", "median"), "baseline": summary["baseline"],
            "candidate": summary["candidate"], "cycles_baseline": c["n_baseline"],
            "cycles_candidate": c["n_candidate"], "level_baseline": c["median_baseline"],
            "level_candidate": c["median_candidate"], "ratio": c["ratio_of_medians"],
            "difference": c.get("difference"), "ci_low": ci[0], "ci_high": ci[1], "detectable_below": detectable[0],
            "detectable_above": detectable[1], "p_adjusted": c["p_adjusted"],
            "verdict": c["verdict"], "reason": c["reason"],
        })
    return out
