"""Compare a candidate variant against a baseline over one or many run archives.

Called by `rmq-harness compare` (Spark local[*]) or directly:
    spark-submit spark/jobs/compare.py RUN... --baseline unpatched --candidate patched

Three steps, as Apache Otava keeps them apart: ``collect`` (Spark: archives -> the per-variant table and
the per-cycle samples), ``analyse`` (pure: samples -> the comparisons and the verdict, one summary dict),
``write`` (the report directory). `rmq-harness calibrate` calls the same three.

Writes into the output directory (staged in ``.<name>.partial`` beside it, marked by an INCOMPLETE file
until it is renamed into place when complete; never overwritten; an interrupted report's staging is removed):
    summary.json        SUMMARY_SCHEMA_VERSION; docs/summary.md
    per_variant.parquet one row per (scenario, variant)
    retries.parquet     one row per retry delivery with wakeup / pickup / redelivery recomputed
    report.html, plots/ rendered by spark.report
Exit codes: 0 done, 1 error, 2 bad input, 3 regression with --fail-on-regression.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from harness.core.errors import ConfigError, HarnessError  # noqa: E402
from harness.inputs.expectations import (  # noqa: E402
    DISTRIBUTIONS,  # noqa: E402
    evaluate,
    per_nack,
    probe_counts,
)
from harness.inputs.scenario import Scenario  # noqa: E402
from harness.measure import ordering  # noqa: E402
from harness.measure.ordering import fifo_counts  # noqa: E402
from harness.measure.tally import nest, table  # noqa: E402
from spark.facts import LEDGER, RETRIES, unreadable_file  # noqa: E402
from spark.io import Archive, ArchiveError, load_archives, read_events, scenario_of  # noqa: E402
from spark.stats import (  # noqa: E402
    COMPARED,
    IMPROVEMENT,
    NO_CHANGE,
    REGRESSION,
    STATISTIC,
    VerdictRule,
    compare,
    completeness,
    decide,
    holm,
    overall,
)

# 2: the cycle as the unit (n counts cycles), Holm-adjusted p, the interval's level follows alpha,
#    completeness, "not enough data", pickup_ms.
# 3: the message ledger's classes in each ledger, expectations, ledger.parquet.
# 4: stalled (retries that waited for a poll to run out) per variant; each comparison's statistic; the
#    primary comparison is the scenario's verdict_metric.
# 5: per variant, the faults its runs injected and what each did (harness/measure/fault_impact.py).
SUMMARY_SCHEMA_VERSION = 5
EXIT_REGRESSION = 3
INCOMPLETE = "INCOMPLETE"  # in a report's staging directory until it is renamed into place
SAMPLE_CAP = 500_000  # values per (scenario, variant) brought to the driver for statistics
PLOT_CAP = 20_000


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="compare", description="Spark regression comparison of run archives")
    p.add_argument("archives", nargs="+", help="run archive directories (local, file://, s3a://, hdfs://)")
    p.add_argument("--baseline", required=True, help="variant to compare against")
    p.add_argument("--candidate", required=True, help="variant under test")
    p.add_argument("--out", default=None, help="output directory (default: reports/<time>-<cand>-vs-<base>)")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="family-wise significance level; the interval is at 1 - alpha (default 0.05)")
    p.add_argument("--min-effect", type=float, default=0.10,
                   help="relative change of the level that counts (default 0.10 = 10%%)")
    p.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples (default 2000)")
    p.add_argument("--fail-on-regression", action="store_true", help="exit 3 when the candidate regresses")
    p.add_argument("--skip-bad", action="store_true", help="warn about unreadable archives and compare the rest")
    p.add_argument("--master", default=None, help="Spark master (default: local[*], or spark-submit's)")
    return p


def under_spark_submit() -> bool:
    return "SPARK_SUBMIT_OPTS" in os.environ or os.environ.get("SPARK_ENV_LOADED") == "1"


def check_variants(archives: Sequence[Archive], wanted: Sequence[str], roles: Sequence[str] = ()) -> None:
    present = sorted({v for a in archives for v in a.variants})
    for i, name in enumerate(wanted):
        if name not in present:
            role = roles[i] if i < len(roles) else "variant"
            raise ConfigError(f"{role} {name!r} is not in the archives; variants present: {', '.join(present)}")
    if len(set(wanted)) < len(wanted):
        raise ConfigError("--baseline and --candidate name the same variant")


@dataclass
class Collected:
    """What Spark computed; everything after it is plain Python. ``scratch`` holds the retry and ledger rows
    (Parquet parts) until a report takes them (``stage``) or ``close`` drops them."""

    archives: list[Archive]
    scenarios: dict[str, Scenario]  # by name, as the newest archive of it ran it
    per_variant: list[dict]  # nested, per (scenario, variant)
    per_run: list[dict]  # nested, per (run_id, scenario, variant)
    samples: pd.DataFrame  # scenario, variant, run_id, cycle, metric, value (inf: never redelivered)
    plot: pd.DataFrame  # scenario, variant, t_client_ns, wakeup_ms, redelivery_ms (a sample)
    per_variant_table: pd.DataFrame  # flat, per (scenario, variant): per_variant.parquet
    scratch: Path
    # Runs with faults: traffic per second (spark.analysis.TIMELINE); empty without faults.
    timeline: pd.DataFrame = field(default_factory=pd.DataFrame)

    def close(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)


def _capped(df: pd.DataFrame, cap: int, seed: int) -> pd.DataFrame:
    """Every row, or a uniform sample of ``cap`` rows when there are more."""
    return df if len(df) <= cap else df.sample(n=cap, random_state=seed)


def collect(spark: object, archives: list[Archive], variants: Sequence[str], seed: int = 1,
            per_run: bool = False) -> Collected:
    from pyspark.sql import functions as F

    from spark.analysis import (
        dlq_reader_errors,
        fault_impacts,
        fifo,
        measured_samples,
        message_facts,
        outcome_samples,
        retry_rows,
        routing,
    )

    scratch = Path(tempfile.mkdtemp(prefix="rmq-harness-facts-"))
    try:
        try:
            tallies = message_facts(spark, archives, variants, scratch, routing(archives))
        except Exception as e:
            bad = unreadable_file(e)
            if bad is None:
                raise
            raise ArchiveError(bad) from None
        retries = retry_rows(scratch, ["run_id", "scenario", "variant", "cycle", "t_client_ns", *DISTRIBUTIONS])
        flat = table(tallies, retries, ["scenario", "variant"])
        rows = flat.to_dict("records")
        runs = table(tallies, retries, ["run_id", "scenario", "variant"]).to_dict("records") if per_run else []
        measured = _capped(measured_samples(retries), SAMPLE_CAP * max(1, len(rows)), seed)
        samples = pd.concat([measured, outcome_samples(tallies)], ignore_index=True)
        plot = _capped(retries[["scenario", "variant", "t_client_ns", "wakeup_ms", "redelivery_ms"]],
                       PLOT_CAP * max(1, len(rows)), seed)
        impacts, timeline = fault_impacts(archives, scratch, retries, variants)
        del retries
        # Strings compared per comparison below: as categories, a comparison of small integers.
        samples = samples.astype({c: "category" for c in ("scenario", "variant", "metric")})
        events = read_events(spark, archives).filter(F.col("variant").isin(list(variants)))
        checks = tallies.groupby("name")["value"].sum()
        # Two more passes over the events, only where the tasks saw something for them to check.
        fifo_rows = (fifo(events).toPandas() if checks.get("fifo_events", 0)
                     else ordering.SCHEMA.empty_table().to_pandas())
        dlq_errors = ([r.asDict() for r in dlq_reader_errors(events).collect()]
                      if checks.get("dlq_reader_errors", 0) else [])
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    newest = sorted(archives, key=lambda a: str(a.manifest.get("started_at", "")))
    scenarios = {sc.name: sc for sc in map(scenario_of, newest)}
    nested = [nest(r) for r in rows]
    add_probes(archives, nested)
    add_fifo(fifo_rows, nested)
    for r in nested:
        mine = [f for f in impacts if (f["scenario"], f["variant"]) == (r["scenario"], r["variant"])]
        if mine:
            r["faults"] = mine
    for r in nested:
        r["dlq_reader_errors"] = [{k: e[k] for k in ("group", "errors", "example")} for e in dlq_errors
                                  if (e["scenario"], e["variant"]) == (r["scenario"], r["variant"])]
    return Collected(archives, scenarios, nested, [nest(r) for r in runs], samples, plot, flat, scratch, timeline)


def add_fifo(rows_of_fifo: pd.DataFrame, rows: list[dict]) -> None:
    """The ``fifo.*`` metrics (harness.measure.ordering) into the rows of (scenario, variant)s that ran FIFO."""
    for r in rows:
        mine = rows_of_fifo[(rows_of_fifo["scenario"] == r["scenario"]) & (rows_of_fifo["variant"] == r["variant"])]
        if not mine.empty:
            r["fifo"] = fifo_counts(mine)


def add_probes(archives: Sequence[Archive], rows: list[dict]) -> None:
    """Sum the wakeup probe's counters per (scenario, variant) into the rows' ``probe`` (when every archive
    of that pair ran with the probe; otherwise the rows have none, and probe rules say "no data")."""
    per: dict[tuple[str, str], list[dict | None]] = {}
    for a in archives:
        sc = scenario_of(a)
        groups = [g.name for g in sc.groups]
        for v in a.variants:
            samples = (a.manifest.get("probe") or {}).get(v)
            per.setdefault((sc.name, v), []).append(probe_counts(samples, groups) if samples else None)
    for r in rows:
        got = per.get((r["scenario"], r["variant"]), [])
        if got and all(g is not None for g in got):
            total = {k: sum(g[k] for g in got) for k in got[0]}
            r["probe"] = {**total, **per_nack(total, r.get("nacks") or 0)}


def nested_runs(samples: pd.DataFrame, scenario: str, variant: str, metric: str) -> list[list[np.ndarray]]:
    """runs -> cycles -> values of one side of one comparison."""
    sub = samples[(samples["scenario"] == scenario) & (samples["variant"] == variant) & (samples["metric"] == metric)]
    return [[g["value"].to_numpy(dtype=float) for _, g in run.groupby("cycle", sort=True)]
            for _, run in sub.groupby("run_id", sort=True)]


def expectations(c: Collected, rows: Sequence[dict]) -> list[dict]:
    """Each (scenario, variant) row checked against its scenario's expect: rules."""
    out = []
    for r in rows:
        sc = c.scenarios.get(r["scenario"])
        rules = sc.expect if sc else []
        out.append({"scenario": r["scenario"], "variant": r["variant"], "reference": sc.reference if sc else "",
                    **evaluate(rules, r)})
    return out


def analyse(c: Collected, baseline: str, candidate: str, rule: VerdictRule, run_id: str | None = None) -> dict:
    """The comparisons, their verdicts and the overall verdict (pure). ``run_id``: one run's data only."""
    samples = c.samples if run_id is None else c.samples[c.samples["run_id"] == run_id]
    table = c.per_variant if run_id is None else [r for r in c.per_run if r["run_id"] == run_id]
    sides = {(r["scenario"], r["variant"]): r for r in table}
    scenarios = sorted({s for s, v in sides if v == baseline} & {s for s, v in sides if v == candidate})
    comparisons = [
        {"scenario": s, "metric": m, "primary": m == primary,
         **compare(nested_runs(samples, s, baseline, m), nested_runs(samples, s, candidate, m), rule, STATISTIC[m])}
        for s in scenarios for primary in [c.scenarios[s].verdict_metric]
        for m in dict.fromkeys([primary, *COMPARED])
    ]
    adjusted = holm([x["p_value"] for x in comparisons])
    family = sum(p is not None for p in adjusted)
    blocked = {}
    for x, p in zip(comparisons, adjusted, strict=True):
        x["p_adjusted"] = p
        x["verdict"], x["reason"] = decide(x, p, family, rule)
    for s in scenarios:
        base, cand = ({**sides[(s, v)]["ledger"], "sent": sides[(s, v)]["sent"], "errors": sides[(s, v)]["errors"]}
                      for v in (baseline, candidate))
        verdict, why = completeness(base, cand)
        blocked[s] = (verdict, why)
        for x in comparisons:
            if x["scenario"] != s or not x["primary"] or verdict is None:
                continue
            if verdict == REGRESSION:
                x["verdict"], x["reason"] = REGRESSION, "loses what the baseline does not: " + "; ".join(why)
            elif x["verdict"] == IMPROVEMENT:
                x["verdict"], x["reason"] = NO_CHANGE, "faster but less complete: " + "; ".join(why)
    return {
        "baseline": baseline,
        "candidate": candidate,
        "verdict": overall(comparisons, blocked),
        "rule": rule.as_dict(),
        "family": family,
        "completeness": {s: {"verdict": v, "why": w} for s, (v, w) in blocked.items()},
        "comparisons": comparisons,
        "expectations": expectations(c, [r for r in table if r["variant"] in (baseline, candidate)]),
    }


def json_safe(node: object) -> object:
    """JSON has no infinity: an endless wait is written as the string "inf"."""
    if isinstance(node, float) and not math.isfinite(node):
        return "inf" if node > 0 else ("-inf" if node < 0 else None)
    if isinstance(node, dict):
        return {k: json_safe(v) for k, v in node.items()}
    if isinstance(node, list | tuple):
        return [json_safe(v) for v in node]
    if isinstance(node, np.floating | np.integer):
        return json_safe(node.item())
    return node


def write(c: Collected, result: dict, out: Path, log: Callable[[str], None] = _stderr) -> dict:
    from spark.report.render import render

    now = dt.datetime.now(dt.UTC)
    summary = json_safe({
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "generated_at": now.isoformat(),
        **result,
        "runs": [{"run_id": a.run_id, "path": a.path, "variants": a.variants} for a in c.archives],
        "per_variant": [r for r in c.per_variant if r["variant"] in (result["baseline"], result["candidate"])],
    })
    return stage(c, summary, out, render, log)


def _mark_incomplete(staging: Path, out: Path) -> None:
    note = (f"INCOMPLETE: this report was never completed.\n"
            f"It was being written by process {os.getpid()} on {socket.gethostname()}, started "
            f"{dt.datetime.now(dt.UTC).isoformat(timespec='seconds')}, to become {out}.\n"
            "This file is written when the staging directory is created and removed just before the directory is "
            f"renamed to {out.name}; a directory whose name starts with '.' and ends with '.partial' is never a "
            "complete report. If that process is no longer running, it was killed: delete this directory (the "
            "comparison can be run again).\n")
    tmp = staging / f".{INCOMPLETE}.tmp"
    tmp.write_text(note)
    tmp.replace(staging / INCOMPLETE)


def _writer_alive(staging: Path) -> bool:
    """Whether the process an INCOMPLETE marker names still runs on this host."""
    import re

    import psutil

    try:
        text = (staging / INCOMPLETE).read_text()
    except OSError:
        return False
    m = re.search(r"written by process (\d+) on (\S+), started", text)
    return bool(m) and m.group(2) == socket.gethostname() and psutil.pid_exists(int(m.group(1)))


def staged(out: Path, fill: Callable[[Path], None], log: Callable[[str], None] = _stderr) -> None:
    """Write a report directory: ``fill`` writes into a staging directory next to ``out`` (marked INCOMPLETE
    meanwhile), renamed into place when complete, never over one; an interrupted or failed write removes it."""
    if out.exists():
        raise ConfigError(f"{out} already exists; reports are never overwritten (choose another --out)")
    staging = out.with_name(f".{out.name}.partial")
    if staging.exists():
        if not (staging / INCOMPLETE).is_file() or _writer_alive(staging):
            raise ConfigError(f"{staging} exists (another comparison writing {out}?); remove it or choose "
                              "another --out")
        shutil.rmtree(staging)  # left by a killed comparison: never a report
    staging.mkdir(parents=True)
    try:
        _mark_incomplete(staging, out)
        log(f"writing the report: {staging}")
        fill(staging)
        (staging / INCOMPLETE).unlink()
        staging.rename(out)
    except BaseException:
        # Ctrl-C or a failure: nothing half-written stays behind (a report is made again from the archives).
        shutil.rmtree(staging, ignore_errors=True)
        raise


def stage(c: Collected, summary: dict, out: Path, render: Callable[..., object],
          log: Callable[[str], None] = _stderr) -> dict:
    """The report of a comparison, matrix or sweep (``staged``); the retry and ledger rows move there from
    ``c.scratch`` (directories of Parquet parts)."""
    def fill(staging: Path) -> None:
        pq.write_table(pa.Table.from_pandas(c.per_variant_table, preserve_index=False),
                       staging / "per_variant.parquet")
        for name in (RETRIES, LEDGER):
            shutil.move(c.scratch / name, staging / f"{name}.parquet")
        (staging / "summary.json").write_text(json.dumps(summary, indent=2, allow_nan=False) + "\n")
        render(summary, c.plot, c.samples, staging, timeline=c.timeline)

    staged(out, fill, log)
    c.close()
    return {**summary, "out": str(out.resolve()), "report": str((out / "report.html").resolve())}


def run(args: argparse.Namespace, warn: Callable[[str], None] = print, spark: object | None = None,
        log: Callable[[str], None] = _stderr) -> dict:
    """The whole job; returns the summary (also written to summary.json). ``log``: a line when Spark starts,
    one when it starts working and one when the report is being written. A Ctrl-C or SIGTERM comes out as
    KeyboardInterrupt."""
    from spark.session import interruptible, local_session

    if args.out and Path(args.out).exists():
        raise ConfigError(f"{args.out} already exists; reports are never overwritten (choose another --out)")
    wanted, roles = [args.baseline, args.candidate], ["baseline variant", "candidate variant"]
    # Validate local inputs before paying for a JVM.
    if not any("://" in a for a in args.archives):
        check_variants(load_archives(args.archives, skip_bad=args.skip_bad, warn=warn), wanted, roles)
    if spark is None:
        # Under spark-submit the submit's master rules; run from Python, local[*].
        spark = local_session(args.master or (None if under_spark_submit() else "local[*]"), log=log)
    with interruptible(spark):
        archives = load_archives(args.archives, spark=spark, skip_bad=args.skip_bad, warn=lambda s: None)
        check_variants(archives, wanted, roles)
        log(f"comparing {args.candidate} against {args.baseline} on Spark {spark.version}: "
            f"{len(archives)} archive(s)")
        rule = VerdictRule(alpha=args.alpha, min_effect=args.min_effect, bootstrap=args.bootstrap)
        collected = collect(spark, archives, wanted, seed=rule.seed)
        try:
            result = analyse(collected, args.baseline, args.candidate, rule)
            now = dt.datetime.now(dt.UTC)
            out = Path(args.out) if args.out else \
                Path("reports") / f"{now:%Y%m%d-%H%M%S}-{args.candidate}-vs-{args.baseline}"
            return write(collected, result, out, log)
        finally:
            collected.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        summary = run(args, warn=lambda s: print(f"warning: {s}", file=sys.stderr))
    except HarnessError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    print(json.dumps({k: summary[k] for k in ("verdict", "report")}, indent=2))
    return EXIT_REGRESSION if args.fail_on_regression and summary["verdict"] == REGRESSION else 0


__all__ = ["main", "run", "collect", "analyse", "write", "ArchiveError"]

if __name__ == "__main__":
    sys.exit(main())
