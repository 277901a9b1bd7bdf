"""History over every run archive in directories: add the runs not yet in the dataset (spark/history.py: per-
cycle statistics, partitioned Parquet), then the series per (scenario, variant, metric) over runs and per
(scenario, metric) over releases, their change points (Apache Otava's E-divisive means) and a report.

Called by `rmq-harness history`, or directly:
    spark-submit spark/jobs/history.py runs/ --dataset runs/history

Exit codes: 0 done, 1 error, 2 bad input, 3 the newest run of a series starts a regression (for CI).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from harness.core.errors import ConfigError, HarnessError  # noqa: E402
from spark import history  # noqa: E402
from spark.io import Archive, load_archives  # noqa: E402
from spark.jobs.compare import EXIT_REGRESSION, collect, json_safe, staged, under_spark_submit  # noqa: E402
from spark.stats import STATISTIC  # noqa: E402

DEFAULT_DATASET = Path("runs") / "history"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="history", description="change points over archived runs")
    p.add_argument("sources", nargs="+", help="run archives, or directories holding them (searched below)")
    p.add_argument("--dataset", type=Path, default=DEFAULT_DATASET,
                   help=f"the per-cycle history dataset to add the new runs to and read (default: {DEFAULT_DATASET})")
    p.add_argument("--out", type=Path, default=None, help="report directory (default: reports/<time>-history)")
    p.add_argument("--window", type=int, default=history.WINDOW, help="E-divisive window, in points")
    p.add_argument("--max-pvalue", type=float, default=history.MAX_PVALUE, help="a change point's p-value limit")
    p.add_argument("--master", default=None)
    return p


def find_archives(sources: Sequence[str]) -> list[Path]:
    """Archive directories (those with a manifest.json), below each source; staging and work directories
    (names starting with '.') are not archives."""
    found: list[Path] = []
    for s in sources:
        p = Path(s)
        if not p.exists():
            raise ConfigError(f"{s}: no such archive or directory")
        if (p / "manifest.json").is_file():
            found.append(p)
            continue
        for m in sorted(p.rglob("manifest.json")):
            rel = m.parent.relative_to(p)
            if not any(part.startswith(".") for part in rel.parts):
                found.append(m.parent)
    return list(dict.fromkeys(found))


def definition(archive: Archive) -> str:
    """What pools a run with others: its scenario as far as the load goes (not its length or expectations)."""
    from spark.io import _comparable

    doc = _comparable(archive.manifest.get("scenario") or {})
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:12]


def ingest(spark: object, dataset: Path, paths: Sequence[Path], warn: Callable[[str], None]) -> dict:
    """Add the archives not yet in the dataset; returns what was added and what was skipped (and why)."""
    have = history.ingested(dataset)
    loaded = load_archives([str(p) for p in paths], skip_bad=True, warn=warn, pool=False)
    new = [a for a in loaded if a.run_id not in have]
    groups: dict[tuple[str, str], list[Archive]] = {}
    for a in new:
        groups.setdefault(((a.manifest.get("scenario") or {}).get("name", "?"), definition(a)), []).append(a)
    added = 0
    for (_name, digest), archives in sorted(groups.items()):
        variants = list(dict.fromkeys(v for a in archives for v in a.variants))
        c = collect(spark, archives, variants)
        try:
            levels = history.cycle_levels(c.samples, STATISTIC)
        finally:
            c.close()
        runs = {a.run_id: {"started_at": str(a.manifest.get("started_at", "")),
                           "harness_version": str(a.manifest.get("harness_version", "")), "definition": digest,
                           "variants": {v["name"]: v for v in a.manifest.get("variants", [])}} for a in archives}
        missing = sorted(set(runs) - set(levels["run_id"]))
        for run_id in missing:
            warn(f"run {run_id}: no retry measured (no cycle level); not in the history")
        added += history.append(dataset, levels, runs)
    return {"archives_found": len(paths), "runs_added": sorted(a.run_id for a in new),
            "runs_already_in": sorted(a.run_id for a in loaded if a.run_id in have), "files_written": added}


def run(args: argparse.Namespace, warn: Callable[[str], None] = print, spark: object | None = None) -> dict:
    from spark.report.render import render_history
    from spark.session import interruptible, local_session

    if args.out and Path(args.out).exists():
        raise ConfigError(f"{args.out} already exists; reports are never overwritten (choose another --out)")
    if args.window < 4:
        raise ConfigError(f"--window {args.window}: at least 4 points")
    if not 0 < args.max_pvalue < 1:
        raise ConfigError(f"--max-pvalue {args.max_pvalue}: a probability between 0 and 1")
    paths = find_archives(args.sources)
    skipped: list[str] = []

    def note(line: str) -> None:
        skipped.append(line)
        warn(line)

    added: dict = {"archives_found": len(paths), "runs_added": [], "runs_already_in": [], "files_written": 0}
    if paths:
        if spark is None:
            spark = local_session(getattr(args, "master", None) or (None if under_spark_submit() else "local[*]"),
                                  app="rmq-harness-history")
        with interruptible(spark):
            added = ingest(spark, args.dataset, paths, note)
    result = history.analyse(history.read(args.dataset), args.window, args.max_pvalue)
    now = dt.datetime.now(dt.UTC)
    out = Path(args.out) if args.out else Path("reports") / f"{now:%Y%m%d-%H%M%S}-history"
    summary = json_safe({"generated_at": now.isoformat(), "dataset": str(args.dataset.resolve()), **added,
                         "skipped": skipped, **result})

    def fill(staging: Path) -> None:
        (staging / "summary.json").write_text(json.dumps(summary, indent=2, allow_nan=False) + "\n")
        render_history(summary, staging)

    staged(out, fill)
    return {**summary, "out": str(out.resolve()), "report": str((out / "report.html").resolve())}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        summary = run(parser().parse_args(argv), warn=lambda s: print(f"warning: {s}", file=sys.stderr))
    except HarnessError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    print(f"report: {summary['report']}")
    return EXIT_REGRESSION if summary["regressions"] else 0


if __name__ == "__main__":
    sys.exit(main())
