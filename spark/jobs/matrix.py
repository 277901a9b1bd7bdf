"""The scenario x variant matrix over run archives: one Spark job, one report.

Called by `rmq-harness matrix` after its runs, or directly:
    spark-submit spark/jobs/matrix.py RUN... --variant unpatched --variant patched --variant upstream-5.4.0

The first variant is the baseline: every other one is compared against it with the comparison job's own
rule (spark/jobs/compare.py: cycles as the unit, Holm over one candidate's scenarios and metrics). Every
(scenario, variant) is checked against its scenario's expectations and its message ledger.

Writes into the output directory (staged and marked INCOMPLETE until complete, never overwritten):
summary.json (kind "matrix"), per_variant.parquet, ledger.parquet, retries.parquet, report.html with plots/.
Exit codes: 0 done, 1 error, 2 bad input.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from harness.core.errors import ConfigError  # noqa: E402
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
    stage,
    under_spark_submit,
)
from spark.stats import VerdictRule  # noqa: E402

OVERVIEW_LEDGER = ("lost", "duplicated", "cross_topic", "dead_lettered")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="matrix", description="Spark scenario x variant matrix of run archives")
    p.add_argument("archives", nargs="+", help="run archive directories")
    p.add_argument("--variant", action="append", dest="variants", required=True, metavar="NAME",
                   help="variants in the matrix, the first being the baseline (repeat)")
    p.add_argument("--out", default=None, help="output directory (default: reports/<time>-matrix)")
    rule_options(p)
    p.add_argument("--failed", action="append", default=[], metavar="SCENARIO=REASON",
                   help="a scenario whose run failed, shown in the report (repeat)")
    p.add_argument("--not-applicable", action="append", default=[], metavar="SCENARIO=REASON",
                   help="a scenario form that was not run because it does not apply, shown in the report (repeat)")
    p.add_argument("--master", default=None)
    return p


def rule_options(p: argparse.ArgumentParser) -> None:
    """The verdict rule's settings, as every report over several variants takes them."""
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--min-effect", type=float, default=0.10)
    p.add_argument("--bootstrap", type=int, default=2000)


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
        infos = [v for a in sorted(c.archives, key=lambda a: str(a.manifest.get("started_at", "")))
                 for v in a.manifest.get("variants", []) if v["name"] == name]
        info = infos[-1] if infos else {}
        kv = str(info.get("broker_config", {}).get(POP_KV, "false")).lower() == "true"
        out.append({"name": name, "version": info.get("version"), "jars": info.get("jars"),
                    "agents": [a.get("jar", "?").rsplit("/", 1)[-1] for a in info.get("agents", [])],
                    "pop_implementation": f"RocksDB ({POP_KV}=true)" if kv else "file-based (default)",
                    "ignored_settings": info.get("ignored_settings", [])})
    return out


def series(c: Collected, variants: Sequence[str]) -> dict[str, list[dict]]:
    """Scenarios that are points of a series (harness.inputs.scenario.Series) -> per series, one row per (number of
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


def write(c: Collected, result: dict, out: Path) -> dict:
    from spark.report.render import render_matrix

    summary = json_safe({
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "generated_at": dt.datetime.now(dt.UTC).isoformat(),
        **result,
        "runs": [{"run_id": a.run_id, "path": a.path, "variants": a.variants} for a in c.archives],
        "per_variant": c.per_variant,
    })
    return stage(c, summary, out, render_matrix)


def _reasons(option: str, items: Sequence[str]) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, reason = item.partition("=")
        if not sep:
            raise ConfigError(f"{option} {item!r}: write SCENARIO=REASON")
        out[name] = reason
    return out


def run(args: argparse.Namespace, warn: Callable[[str], None] = print, spark: object | None = None) -> dict:
    from spark.session import interruptible, local_session

    if args.out and Path(args.out).exists():
        raise ConfigError(f"{args.out} already exists; reports are never overwritten (choose another --out)")
    variants = list(dict.fromkeys(args.variants))
    if len(variants) != len(args.variants):
        raise ConfigError("--variant: each variant once")
    failed = _reasons("--failed", args.failed)
    not_applicable = _reasons("--not-applicable", args.not_applicable)
    check_variants(load_archives(args.archives, warn=warn), variants)
    if spark is None:
        spark = local_session(args.master or (None if under_spark_submit() else "local[*]"), app="rmq-harness-matrix")
    # A Ctrl-C or SIGTERM in the middle comes out as KeyboardInterrupt, never as a cancelled job's error.
    with interruptible(spark):
        archives = load_archives(args.archives, spark=spark, warn=lambda s: None)
        rule = VerdictRule(alpha=args.alpha, min_effect=args.min_effect, bootstrap=args.bootstrap)
        c = collect(spark, archives, variants, seed=rule.seed)
        try:
            result = analyse_matrix(c, variants, rule, failed, not_applicable)
            now = dt.datetime.now(dt.UTC)
            out = Path(args.out) if args.out else Path("reports") / f"{now:%Y%m%d-%H%M%S}-matrix"
            return write(c, result, out)
        finally:
            c.close()


def main(argv: Sequence[str] | None = None) -> int:
    try:
        summary = run(parser().parse_args(argv))
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"report: {summary['report']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
