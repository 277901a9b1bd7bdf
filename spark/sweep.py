"""A release sweep, as a library: per scenario, each release's level with its interval, its p90 and its
ledger, and where the behaviour changed between adjacent releases. Variants come oldest first; each adjacent
pair (the older as baseline) is judged with spark.comparison.analyse: the cycle as the unit, one family per
scenario (its primary metric first). A release that changed is the newer of a pair whose primary verdict is an
improvement or a regression. spark/jobs/sweep.py runs it."""

from __future__ import annotations

from collections.abc import Sequence

from harness.contracts.verdict import CHANGED, STATISTIC, VerdictRule, level
from harness.inputs import needs
from harness.inputs.expectations import NOT_APPLICABLE, PRESENT, RUN_FAILED, defect, describe
from spark.comparison import Collected, analyse, expectations, nested_runs
from spark.matrix import variant_facts
from spark.stats import cycle_values, level_ci

LEDGER_COLUMNS = ("lost", "duplicated", "cross_topic", "retries_never_redelivered", "dead_lettered")


def release_rows(c: Collected, scenario: str, variants: Sequence[str], rule: VerdictRule,
                 versions: dict[str, str | None], hybrids: dict[str, str | None] | None = None) -> list[dict]:
    """One row per release that ran ``scenario``: its level of the scenario's verdict metric (median of cycle
    medians, or mean share) with the hierarchical interval, the retries' p90, the ledger, the probe."""
    sc = c.scenarios[scenario]
    metric = sc.verdict_metric
    by = {r["variant"]: r for r in c.per_variant if r["scenario"] == scenario}
    checks = {e["variant"]: e for e in expectations(c, list(by.values()))}
    rows = []
    for v in variants:
        r = by.get(v)
        if r is None:
            continue
        runs = nested_runs(c.samples, scenario, v, metric)
        cycles = [x for run in runs for x in run if len(x)]
        statistic = STATISTIC[metric]
        ci = level_ci(runs, rule, statistic)
        levels = cycle_values(runs, statistic)
        side = level(levels, statistic) if levels.size else None
        dist = r.get(metric) if isinstance(r.get(metric), dict) else {}
        e = checks[v]
        rows.append({
            "variant": v, "version": versions.get(v), "hybrid": (hybrids or {}).get(v), "metric": metric,
            "statistic": statistic,
            "cycles": len(cycles), "runs": sum(1 for run in runs if run), "level": side,
            "ci": list(ci) if ci else None, "p90": dist.get("p90"), "n": dist.get("n"),
            "stalled_share": (r.get("stalled") or {}).get("share"),
            **{k: r["ledger"].get(k, 0) for k in LEDGER_COLUMNS},
            "sent": r.get("sent"), "probe_retry_other_per_nack": (r.get("probe") or {}).get("retry_other_per_nack"),
            "probe_note": probe_note(c, v),
            "expectations": f"{e['met']}/{len(e['checks'])}", "defect": defect(e),
            "failing": [describe(x) for x in e["checks"] if x["status"] != "met"],
        })
    return rows


PROBE_JAR = "pop-wakeup-probe.jar"


WAKEUP_CLASS = "PopLongPollingService"


def probe_note(c: Collected, variant: str) -> str | None:
    """Why a release mounted with the wakeup probe has no wakeup counts: the probe counts wakeups in
    PopLongPollingService, and a release without that class (5.1.x keeps its long polling in
    PopMessageProcessor) gives it nothing to observe. None when it observed, or was not mounted."""
    for a in c.archives:
        for v in a.record.variants:
            lines = v.agent_report.get(PROBE_JAR)
            if v.name == variant and lines is not None and not any(WAKEUP_CLASS in ln for ln in lines):
                return f"the probe found no {WAKEUP_CLASS} to count wakeups in"
    return None


def adjacent(c: Collected, variants: Sequence[str], rule: VerdictRule) -> list[dict]:
    """Each pair of adjacent releases that both ran a scenario, judged older -> newer."""
    out = []
    ran = {(r["scenario"], r["variant"]) for r in c.per_variant}
    for older, newer in zip(variants, variants[1:], strict=False):
        if not any((s, older) in ran and (s, newer) in ran for s in c.scenarios):
            continue
        res = analyse(c, older, newer, rule)
        for x in res["comparisons"]:
            if not x["primary"]:
                continue
            out.append({"scenario": x["scenario"], "older": older, "newer": newer, "metric": x["metric"],
                        "verdict": x["verdict"], "reason": x["reason"], "ratio": x["ratio_of_medians"],
                        "ci": x["ci"], "p_adjusted": x["p_adjusted"], "n_older": x["n_baseline"],
                        "n_newer": x["n_candidate"],
                        "completeness": res["completeness"].get(x["scenario"], {}).get("why", [])})
    return out


def analyse_sweep(c: Collected, variants: Sequence[str], rule: VerdictRule, skipped: dict[str, str],
                  failed: dict[str, str], not_applicable: dict[str, str] | None = None) -> dict:
    steps = adjacent(c, variants, rule)
    facts = variant_facts(c, variants)
    versions = {f["name"]: f["version"] for f in facts}
    per_scenario = {}
    for name in sorted(c.scenarios):
        rows = release_rows(c, name, variants, rule, versions, {f["name"]: f["hybrid"] for f in facts})
        if not rows:
            continue
        mine = [s for s in steps if s["scenario"] == name]
        per_scenario[name] = {
            "description": c.scenarios[name].description, "reference": c.scenarios[name].reference,
            "metric": c.scenarios[name].verdict_metric, "releases": rows, "steps": mine,
            "changed": [{"release": s["newer"], "from": s["older"], "verdict": s["verdict"]} for s in mine
                        if s["verdict"] in CHANGED],
        }
    return {"kind": "sweep", "variants": list(variants), "variant_facts": facts,
            "rule": rule.as_dict(), "scenarios": per_scenario, "skipped": skipped, "failed_runs": failed,
            "not_applicable": not_applicable or {},
            "defects": defect_table(per_scenario, c, variants, versions, failed, not_applicable or {})}


def defect_table(per_scenario: dict, c: Collected, variants: Sequence[str], versions: dict[str, str | None],
                 failed: dict[str, str], not_applicable: dict[str, str]) -> list[dict]:
    """Per scenario, each release's state of the scenario's defect (harness.inputs.expectations.defect): from
    its rules where it ran, else not applicable or run failed (the campaign's keys are scenario@release, or the
    scenario alone for a run that failed on a whole batch); and the first and last release that shows it."""
    rows = []
    for name in sorted(set(c.scenarios) | {k.split("@")[0] for k in [*failed, *not_applicable]}):
        ran = {r["variant"]: r for r in (per_scenario.get(name) or {}).get("releases", [])}
        states = {}
        for v in variants:
            if v in ran:
                states[v] = {"state": ran[v]["defect"], "failing": ran[v]["failing"]}
            elif f"{name}@{v}" in not_applicable:
                states[v] = {"state": NOT_APPLICABLE, "why": not_applicable[f"{name}@{v}"]}
            elif f"{name}@{v}" in failed or name in failed:
                states[v] = {"state": RUN_FAILED, "why": failed.get(f"{name}@{v}") or failed.get(name)}
            elif name in c.scenarios and (why := needs.not_applicable(c.scenarios[name], versions.get(v))):
                # A sweep drawn again from archives knows the releases the scenario applies to from the scenario.
                states[v] = {"state": NOT_APPLICABLE, "why": why}
        shows = [v for v in variants if states.get(v, {}).get("state") == PRESENT]
        sc = c.scenarios.get(name)
        rows.append({"scenario": name, "reference": sc.reference if sc else "", "releases": states,
                     "first_present": versions.get(shows[0], shows[0]) if shows else None,
                     "last_present": versions.get(shows[-1], shows[-1]) if shows else None})
    return rows


