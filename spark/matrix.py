"""The scenario x variant matrix, as a library: the first variant is the baseline and every other one is
compared against it by the comparison's own rule (spark.comparison.analyse: cycles as the unit, one family per
scenario and candidate); every (scenario, variant) is checked against its scenario's expectations
and its message ledger. spark/jobs/matrix.py runs it."""

from __future__ import annotations

from collections.abc import Sequence

from harness.contracts.modules import hybrid_note
from harness.contracts.verdict import VerdictRule
from harness.inputs.expectations import describe
from spark.comparison import Collected, analyse, expectations

OVERVIEW_LEDGER = ("lost", "duplicated", "cross_topic", "dead_lettered")


def overview(c: Collected, variants: Sequence[str], checks: Sequence[dict], verdicts: dict) -> list[dict]:
    """One row per (scenario, variant): expectations met, the failing ones, wakeup p50, the ledger's defects,
    and the verdict against the baseline."""
    by = {(e["scenario"], e["variant"]): e for e in checks}
    rows = []
    for r in sorted(c.per_variant, key=lambda r: (r["scenario"], list(variants).index(r["variant"]))):
        e = by[(r["scenario"], r["variant"])]
        rows.append({
            "scenario": r["scenario"], "protocol": c.scenarios[r["scenario"]].protocol,
            "variant": r["variant"], "cycles": r["cycles"],
            "expectations": f"{e['met']}/{len(e['checks'])}",
            "failing": [describe(x) for x in e["checks"] if x["status"] != "met"],
            "wakeup_p50_ms": r["wakeup_ms"]["p50"], "wakeup_n": r["wakeup_ms"]["n"],
            "nack_retry_p50_ms": r["nack_retry_ms"]["p50"],
            **{k: r["ledger"][k] for k in OVERVIEW_LEDGER},
            "verdict": "baseline" if r["variant"] == variants[0]
            else verdicts.get((r["scenario"], r["variant"]), "not compared"),
        })
    return rows


POP_KV = "popConsumerKVServiceEnable"


def variant_facts(c: Collected, variants: Sequence[str]) -> list[dict]:
    """What each variant ran, from the newest archive that has it: version or jars, agents, and which of the
    broker's two pop implementations served it (file-based, or RocksDB with popConsumerKVServiceEnable)."""
    out = []
    for name in variants:
        infos = [v.model_dump() for a in sorted(c.archives, key=lambda a: a.record.started_at)
                 for v in a.record.variants if v.name == name]
        info = infos[-1] if infos else {}
        kv = str(info.get("broker_config", {}).get(POP_KV, "false")).lower() == "true"
        out.append({"name": name, "version": info.get("version"), "jars": info.get("jars"),
                    "agents": [a.get("jar", "?").rsplit("/", 1)[-1] for a in info.get("agents", [])],
                    "pop_implementation": f"RocksDB ({POP_KV}=true)" if kv else "file-based (default)",
                    "ignored_settings": info.get("ignored_settings", []),
                    "hybrid": hybrid_note(info.get("version"), info.get("modules"))})
    return out


def series(c: Collected, variants: Sequence[str]) -> dict[str, list[dict]]:
    """Scenarios that are points of a series (harness.inputs.traffic.Series) -> per series, one row per (number of
    groups, variant): the probe's wasted wakeups per nack and the retry latencies, to draw as a curve. The
    unit is the run (one per point): the ratios are totals over its nacks, not a spread."""
    by = {(r["scenario"], r["variant"]): r for r in c.per_variant}
    out: dict[str, list[dict]] = {}
    for name, sc in c.scenarios.items():
        if sc.series is None or sc.series.of is None:
            continue
        for v in variants:
            r = by.get((name, v))
            if r is None:
                continue
            probe = r.get("probe") or {}
            out.setdefault(sc.series.of, []).append({
                "groups": sc.series.groups[0], "scenario": name, "variant": v, "cycles": r["cycles"],
                "nacks": r["nacks"], "retry_other_per_nack": probe.get("retry_other_per_nack"),
                "empty_per_nack": probe.get("empty_per_nack"),
                "wakeup_p50_ms": r["wakeup_ms"]["p50"], "wakeup_p90_ms": r["wakeup_ms"]["p90"],
                "wakeup_n": r["wakeup_ms"]["n"], "pickup_p90_ms": r["pickup_ms"]["p90"],
                "pickup_n": r["pickup_ms"]["n"],
            })
    order = list(variants)
    return {k: sorted(rows, key=lambda x: (x["groups"], order.index(x["variant"]))) for k, rows in sorted(out.items())}


def analyse_matrix(c: Collected, variants: Sequence[str], rule: VerdictRule, failed: dict[str, str],
                   not_applicable: dict[str, str] | None = None) -> dict:
    baseline, candidates = variants[0], list(variants[1:])
    against = {cand: analyse(c, baseline, cand, rule) for cand in candidates}
    verdicts = {}
    for cand, res in against.items():
        for x in res["comparisons"]:
            if x["primary"]:
                verdicts[(x["scenario"], cand)] = x["verdict"]
    checks = expectations(c, c.per_variant)
    return {
        "kind": "matrix",
        "baseline": baseline,
        "variants": list(variants),
        "variant_facts": variant_facts(c, variants),
        "rule": rule.as_dict(),
        "overview": overview(c, variants, checks, verdicts),
        "series": series(c, variants),
        "expectations": checks,
        "against_baseline": {cand: {k: res[k] for k in ("verdict", "family", "completeness", "comparisons")}
                             for cand, res in against.items()},
        "scenarios": {name: {"description": sc.description, "reference": sc.reference, "expect": sc.expect,
                             "protocol": sc.protocol} for name, sc in sorted(c.scenarios.items())},
        "failed_runs": failed,
        "not_applicable": not_applicable or {},
    }


