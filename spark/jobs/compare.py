"""Compare a candidate variant against a baseline over one or many run archives.

Called by `rmq-harness compare` (Spark local[*]) or directly:
    spark-submit spark/jobs/compare.py RUN... --baseline unpatched --candidate patched

Writes into the output directory (staged, renamed into place when complete, never overwritten):
    summary.json        SUMMARY_SCHEMA_VERSION; see docs in README ("summary.json")
    per_variant.parquet one row per (scenario, variant)
    retries.parquet     one row per retry delivery with wakeup_ms and redelivery_ms recomputed
    report.html, plots/ rendered by spark.report
Exit codes: 0 done, 1 error, 2 bad input, 3 regression with --fail-on-regression.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a script by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

from harness.errors import ConfigError, HarnessError  # noqa: E402
from spark.io import ArchiveError, load_archives, read_events  # noqa: E402
from spark.stats import IMPROVEMENT, NO_CHANGE, REGRESSION, VerdictRule, compare  # noqa: E402

SUMMARY_SCHEMA_VERSION = 1
EXIT_REGRESSION = 3
PRIMARY_METRIC = "wakeup_ms"
METRICS = ("wakeup_ms", "redelivery_ms")
SAMPLE_CAP = 200_000  # values per (scenario, variant, metric) brought to the driver for statistics
PLOT_CAP = 20_000


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="compare", description="Spark regression comparison of run archives")
    p.add_argument("archives", nargs="+", help="run archive directories (local, file://, s3a://, hdfs://)")
    p.add_argument("--baseline", required=True, help="variant to compare against")
    p.add_argument("--candidate", required=True, help="variant under test")
    p.add_argument("--out", default=None, help="output directory (default: reports/<time>-<cand>-vs-<base>)")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    p.add_argument("--min-effect", type=float, default=0.10,
                   help="relative change of the median that counts (default 0.10 = 10%%)")
    p.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples (default 2000)")
    p.add_argument("--fail-on-regression", action="store_true", help="exit 3 when the candidate regresses")
    p.add_argument("--skip-bad", action="store_true", help="warn about unreadable archives and compare the rest")
    p.add_argument("--master", default=None, help="Spark master (default: local[*], or spark-submit's)")
    return p


def _under_spark_submit() -> bool:
    return "SPARK_SUBMIT_OPTS" in os.environ or os.environ.get("SPARK_ENV_LOADED") == "1"


def _check_variants(archives: Sequence, baseline: str, candidate: str) -> None:
    present = sorted({v for a in archives for v in a.variants})
    for role, name in (("baseline", baseline), ("candidate", candidate)):
        if name not in present:
            raise ConfigError(f"{role} variant {name!r} is not in the archives; variants present: {', '.join(present)}")
    if baseline == candidate:
        raise ConfigError("--baseline and --candidate name the same variant")


def _rows(df: object) -> list[dict]:
    return [r.asDict(recursive=True) for r in df.collect()]


def _nest(row: dict) -> dict:
    """per_variant row -> the summary.json shape."""
    out = {k: row[k] for k in ("scenario", "variant", "runs", "sent", "deliveries", "retry_deliveries", "acks",
                               "nacks", "empty_polls", "errors")}
    out = {k: (int(v) if isinstance(v, int | float) and k != "scenario" and v is not None else v)
           for k, v in out.items()}
    out["ledger"] = {k.removeprefix("ledger_"): int(row[k] or 0) for k in row if k.startswith("ledger_")}
    for m in METRICS:
        out[m] = {"n": int(row[f"{m}_n"] or 0), **{q: row[f"{m}_{q}"] for q in ("p50", "p90", "p99", "max")}}
    return out


def run(args: argparse.Namespace, warn: Callable[[str], None] = print, spark: object | None = None) -> dict:
    """The whole job; returns the summary (also written to summary.json)."""
    from pyspark.sql import functions as F

    from spark.analysis import per_variant, retry_deliveries
    from spark.report.render import render
    from spark.session import local_session

    if args.out and Path(args.out).exists():
        raise ConfigError(f"{args.out} already exists; reports are never overwritten (choose another --out)")
    # Validate local inputs before paying for a JVM.
    if not any("://" in a for a in args.archives):
        _check_variants(load_archives(args.archives, skip_bad=args.skip_bad, warn=warn), args.baseline,
                        args.candidate)
    if spark is None:
        # Under spark-submit the submit's master rules; run from Python, local[*].
        spark = local_session(args.master or (None if _under_spark_submit() else "local[*]"))
    archives = load_archives(args.archives, spark=spark, skip_bad=args.skip_bad, warn=lambda s: None)
    _check_variants(archives, args.baseline, args.candidate)
    rule = VerdictRule(alpha=args.alpha, min_effect=args.min_effect, bootstrap=args.bootstrap)

    wanted = [args.baseline, args.candidate]
    events = read_events(spark, archives).filter(F.col("variant").isin(wanted))
    events = events.cache()
    retries = retry_deliveries(events).cache()
    pv_rows = _rows(per_variant(events, retries))
    pv = [_nest(r) for r in pv_rows]

    comparisons, samples = [], {}
    scenarios = sorted({r["scenario"] for r in pv if r["variant"] == args.baseline}
                       & {r["scenario"] for r in pv if r["variant"] == args.candidate})
    for scenario in scenarios:
        per_metric: dict[str, dict[str, np.ndarray]] = {m: {} for m in METRICS}
        samples[scenario] = {"__redelivery__": {}}
        for variant in wanted:
            sub = retries.filter((F.col("scenario") == scenario) & (F.col("variant") == variant))
            rows = sub.select("t_client_ns", *METRICS).orderBy(F.rand(rule.seed)).limit(SAMPLE_CAP).toPandas()
            for m in METRICS:
                per_metric[m][variant] = rows[m].to_numpy(dtype=float)
            first = rows["t_client_ns"].min() if len(rows) else 0
            plot = rows.head(PLOT_CAP)
            t_s = ((plot["t_client_ns"] - first) / 1e9).to_numpy(dtype=float)
            samples[scenario][variant] = (t_s, plot["wakeup_ms"].to_numpy(dtype=float))
            samples[scenario]["__redelivery__"][variant] = (t_s, plot["redelivery_ms"].to_numpy(dtype=float))
        for m in METRICS:
            res = compare(per_metric[m][args.baseline], per_metric[m][args.candidate], rule)
            comparisons.append({"scenario": scenario, "metric": m, "primary": m == PRIMARY_METRIC, **res})

    primary = [c["verdict"] for c in comparisons if c["primary"]]
    if any(c["verdict"] == REGRESSION for c in comparisons):
        verdict = REGRESSION
    elif primary and all(v == IMPROVEMENT for v in primary):
        verdict = IMPROVEMENT
    else:
        verdict = NO_CHANGE
    now = dt.datetime.now(dt.UTC)
    summary = {
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "generated_at": now.isoformat(),
        "baseline": args.baseline,
        "candidate": args.candidate,
        "verdict": verdict,
        "rule": rule.as_dict(),
        "runs": [{"run_id": a.run_id, "path": a.path, "variants": a.variants} for a in archives],
        "per_variant": pv,
        "comparisons": comparisons,
    }

    out = Path(args.out) if args.out else Path("reports") / f"{now:%Y%m%d-%H%M%S}-{args.candidate}-vs-{args.baseline}"
    if out.exists():
        raise ConfigError(f"{out} already exists; reports are never overwritten (choose another --out)")
    staging = out.with_name(f".{out.name}.partial")
    staging.mkdir(parents=True)
    spark.createDataFrame(pv_rows).coalesce(1).write.parquet(
        str(staging / "per_variant.parquet"))
    retries.coalesce(1).write.parquet(str(staging / "retries.parquet"))
    (staging / "summary.json").write_text(json.dumps(summary, indent=2, default=float) + "\n")
    render(summary, samples, staging)
    staging.rename(out)
    summary["out"] = str(out.resolve())
    summary["report"] = str((out / "report.html").resolve())
    events.unpersist()
    retries.unpersist()
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        summary = run(args, warn=lambda s: print(f"warning: {s}", file=sys.stderr))
    except HarnessError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    print(json.dumps({k: summary[k] for k in ("verdict", "report")}, indent=2))
    return EXIT_REGRESSION if args.fail_on_regression and summary["verdict"] == REGRESSION else 0


__all__ = ["main", "run", "ArchiveError"]

if __name__ == "__main__":
    sys.exit(main())
