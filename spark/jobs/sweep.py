"""A release sweep over run archives: per scenario, each release's level with its interval, its p90 and its
ledger, and where the behaviour changed between adjacent releases (by the comparison job's own rule).

Called by `rmq-harness sweep` after its runs, or directly:
    spark-submit spark/jobs/sweep.py RUN... --variant rocketmq-5.2.0 --variant rocketmq-5.3.3 ...

Variants are given oldest first. Each adjacent pair (the older as baseline) is judged with
spark.jobs.compare.analyse: the cycle as the unit, Holm over that pair's scenarios and metrics. A release
that changed is the newer of a pair whose primary verdict is an improvement or a regression.

Writes (staged, never overwritten, like every report): summary.json (kind "sweep"), per_variant.parquet,
ledger.parquet, retries.parquet, report.html with plots/. Exit codes: 0 done, 1 error, 2 bad input.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

from harness.core.errors import ConfigError, HarnessError  # noqa: E402
from harness.inputs.expectations import describe  # noqa: E402
from spark.io import load_archives  # noqa: E402
from spark.jobs.compare import (  # noqa: E402
    SUMMARY_SCHEMA_VERSION,
    Collected,
    analyse,
    check_variants,
    collect,
    expectations,
    json_safe,
    nested_runs,
    stage,
    under_spark_submit,
)
from spark.jobs.matrix import _reasons, rule_options, variant_facts  # noqa: E402
from spark.stats import (  # noqa: E402
    IMPROVEMENT,
    REGRESSION,
    SHARE,
    STATISTIC,
    VerdictRule,
    cycle_values,
    level_ci,
)

LEDGER_COLUMNS = ("lost", "duplicated", "cross_topic", "retries_never_redelivered", "dead_lettered")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sweep", description="Spark release sweep of run archives")
    p.add_argument("archives", nargs="+", help="run archive directories")
    p.add_argument("--variant", action="append", dest="variants", required=True, metavar="NAME",
                   help="the releases' variants, oldest first (repeat)")
    p.add_argument("--out", default=None, help="output directory (default: reports/<time>-sweep)")
    rule_options(p)
    p.add_argument("--skipped", action="append", default=[], metavar="VERSION=REASON",
                   help="a release not run (Maven Central cannot assemble it), shown in the report (repeat)")
    p.add_argument("--failed", action="append", default=[], metavar="SCENARIO@VARIANT=REASON",
                   help="a run that failed, shown in the report (repeat)")
    p.add_argument("--not-applicable", action="append", default=[], metavar="SCENARIO@VARIANT=REASON",
                   help="a release a scenario could not run on (it lacks a setting the scenario needs) (repeat)")
    p.add_argument("--master", default=None)
    return p


def release_rows(c: Collected, scenario: str, variants: Sequence[str], rule: VerdictRule,
                 versions: dict[str, str | None]) -> list[dict]:
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
        level = float(np.mean(levels) if statistic == SHARE else np.median(levels)) if levels.size else None
        dist = r.get(metric) if isinstance(r.get(metric), dict) else {}
        e = checks[v]
        rows.append({
            "variant": v, "version": versions.get(v), "metric": metric, "statistic": statistic,
            "cycles": len(cycles), "runs": sum(1 for run in runs if run), "level": level,
            "ci": list(ci) if ci else None, "p90": dist.get("p90"), "n": dist.get("n"),
            "stalled_share": (r.get("stalled") or {}).get("share"),
            **{k: r["ledger"].get(k, 0) for k in LEDGER_COLUMNS},
            "sent": r.get("sent"), "probe_retry_other_per_nack": (r.get("probe") or {}).get("retry_other_per_nack"),
            "probe_note": probe_note(c, v),
            "expectations": f"{e['met']}/{len(e['checks'])}",
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
        for v in a.manifest.get("variants", []):
            lines = (v.get("agent_report") or {}).get(PROBE_JAR)
            if v["name"] == variant and lines is not None and not any(WAKEUP_CLASS in ln for ln in lines):
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
        rows = release_rows(c, name, variants, rule, versions)
        if not rows:
            continue
        mine = [s for s in steps if s["scenario"] == name]
        per_scenario[name] = {
            "description": c.scenarios[name].description, "reference": c.scenarios[name].reference,
            "metric": c.scenarios[name].verdict_metric, "releases": rows, "steps": mine,
            "changed": [{"release": s["newer"], "from": s["older"], "verdict": s["verdict"]} for s in mine
                        if s["verdict"] in (IMPROVEMENT, REGRESSION)],
        }
    return {"kind": "sweep", "variants": list(variants), "variant_facts": facts,
            "rule": rule.as_dict(), "scenarios": per_scenario, "skipped": skipped, "failed_runs": failed,
            "not_applicable": not_applicable or {}}


def write(c: Collected, result: dict, out: Path) -> dict:
    from spark.report.render import render_sweep

    summary = json_safe({
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "generated_at": dt.datetime.now(dt.UTC).isoformat(),
        **result,
        "runs": [{"run_id": a.run_id, "path": a.path, "variants": a.variants} for a in c.archives],
        "per_variant": c.per_variant,
    })
    return stage(c, summary, out, render_sweep)


def run(args: argparse.Namespace, warn: Callable[[str], None] = print, spark: object | None = None) -> dict:
    from spark.session import interruptible, local_session

    if args.out and Path(args.out).exists():
        raise ConfigError(f"{args.out} already exists; reports are never overwritten (choose another --out)")
    variants = list(dict.fromkeys(args.variants))
    if len(variants) != len(args.variants):
        raise ConfigError("--variant: each release once")
    skipped = _reasons("--skipped", args.skipped)
    failed = _reasons("--failed", args.failed)
    not_applicable = _reasons("--not-applicable", args.not_applicable)
    archives = load_archives(args.archives, warn=warn)
    present = {v for a in archives for v in a.variants}
    ran = [v for v in variants if v in present]
    if not ran:
        raise ConfigError(f"none of {', '.join(variants)} is in the archives")
    check_variants(archives, ran)
    if spark is None:
        spark = local_session(args.master or (None if under_spark_submit() else "local[*]"), app="rmq-harness-sweep")
    with interruptible(spark):
        archives = load_archives(args.archives, spark=spark, warn=lambda s: None)
        rule = VerdictRule(alpha=args.alpha, min_effect=args.min_effect, bootstrap=args.bootstrap)
        c = collect(spark, archives, ran, seed=rule.seed)
        try:
            result = analyse_sweep(c, ran, rule, skipped, failed, not_applicable)
            now = dt.datetime.now(dt.UTC)
            out = Path(args.out) if args.out else Path("reports") / f"{now:%Y%m%d-%H%M%S}-sweep"
            return write(c, result, out)
        finally:
            c.close()


def main(argv: Sequence[str] | None = None) -> int:
    try:
        summary = run(parser().parse_args(argv))
    except HarnessError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    print(f"report: {summary['report']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
