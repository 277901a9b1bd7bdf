"""History: per-cycle statistics of every archived run, kept as one partitioned Parquet dataset, and the
change points of their series (over runs, and over releases).

The dataset (DATASET_SCHEMA_VERSION) has one row per (run, scenario, variant, metric, cycle): the cycle's
level as the verdict rule computes it (spark.stats: the median of its retries' values, a share for
``stalled``), the retries behind it, and what identifies the run (when it started, the RocketMQ version of
the variant, the harness that ran it). It is partitioned by scenario (``scenario=<name>/``); each run adds
one file per scenario, ``<run_id>.parquet``, written to a temporary name and renamed, never over another.

Runs pool only within one scenario definition (``definition``: a digest of its load, not its length or
expectations), so a scenario whose load was changed starts a new series. A series over runs has one point
per run: the median of that run's cycle levels (the mean for shares). A series over releases has one point
per release variant (``rocketmq-<version>``), pooling every run of it.
Change points are Apache Otava's E-divisive means (otava.analysis.compute_change_points) with the settings
below; their false-alarm rate and power are measured by tests/benchmarks/bench_history.py.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from harness.contracts import schemas
from harness.contracts.verdict import (
    AGGREGATE,
    IMPROVEMENT,
    REGRESSION,
    STATISTIC,
    group_levels,
    per_value,
    sample_counts,
)
from harness.core.errors import ConfigError
from harness.core.storage import Location, location
from harness.inputs.variants import release_of
from spark.io import Archive

DATASET_SCHEMA_VERSION = schemas.HISTORY.version
SCHEMA = pa.schema([
    ("dataset_schema_version", pa.int16()), ("run_id", pa.string()), ("started_at", pa.string()),
    ("definition", pa.string()), ("variant", pa.string()), ("version", pa.string()), ("jars", pa.bool_()),
    ("harness_version", pa.string()),
    ("metric", pa.string()), ("statistic", pa.string()), ("cycle", pa.int64()), ("level", pa.float64()),
    ("values", pa.int64()),
])
# Otava's own defaults for its CI use: a point is a change when its split's t-test gives p below MAX_PVALUE
# within a window of WINDOW points. p 0.001 (not 0.05): looser, its first pass cuts a series into pieces too
# small to keep a real change (measured: bench-results/history.json).
WINDOW = 30
MAX_PVALUE = 0.001
# An endless level (every retry of a run lost) is drawn and tested as this many times the largest finite one.
ENDLESS_FACTOR = 10.0
LOWER_IS_BETTER = True  # every metric kept: latencies and shares of stalls


def cycle_levels(samples: pd.DataFrame, statistics: dict[str, str]) -> pd.DataFrame:
    """(scenario, variant, run_id, cycle, metric, value) samples -> one level per cycle: the median of its
    values, or their mean for a share (``statistics``: metric -> "median" | "share")."""
    keys = ["scenario", "variant", "run_id", "metric", "cycle"]
    df = samples[samples["metric"].astype(str).isin(statistics)]
    df = df.astype({"scenario": str, "variant": str, "run_id": str, "metric": str})
    # A share's level is its values' mean: from each row's value and count, without a row per value (a row per
    # owed message is what the counts spare); the medians from their values.
    mean = (df["metric"].map(statistics).map(AGGREGATE) == "mean").to_numpy()
    g = per_value(df[~mean]).groupby(keys, sort=True, observed=True)["value"]
    level = group_levels(g, lambda groups: groups.get_level_values("metric").map(statistics))
    shares = df[mean]
    n = sample_counts(shares)
    summed = (shares[keys].assign(values=n, level=shares["value"].to_numpy(dtype=float) * n)
              .groupby(keys, sort=True, observed=True)[["values", "level"]].sum())
    summed["level"] = summed["level"] / summed["values"]
    out = pd.concat([pd.concat([g.size().rename("values"), level], axis=1), summed]).sort_index().reset_index()
    out["statistic"] = out["metric"].map(statistics)
    return out[[*keys, "values", "statistic", "level"]]


def dataset_files(dataset: str | Path) -> list[Location]:
    """The dataset's files (scenario=<name>/<run id>.parquet), wherever it is (a directory, s3://)."""
    root = location(dataset, "history dataset")
    return [f for f in root.files() if len(parts := f.below(root)) == 2 and parts[0].startswith("scenario=")
            and parts[1].endswith(".parquet") and not parts[1].startswith(".")]


def ingested(dataset: str | Path) -> set[str]:
    """Run ids the dataset holds."""
    return {f.name.removesuffix(".parquet") for f in dataset_files(dataset)}


def append(dataset: str | Path, levels: pd.DataFrame, runs: dict[str, dict]) -> int:
    """Add each run's rows, one file per (scenario, run), atomically; a run already there is refused, not
    written twice. ``runs``: run_id -> {started_at, harness_version, definition (a digest of the scenario's
    load: runs pool only within one), variants: {name: {version, jars}}}."""
    have = ingested(dataset)
    written = 0
    for (scenario, run_id), rows in levels.groupby(["scenario", "run_id"], sort=True):
        if run_id in have:
            raise ConfigError(f"{dataset}: run {run_id} is already in the history dataset")
        meta = runs[run_id]
        info = meta["variants"]
        table = pa.Table.from_pandas(pd.DataFrame({
            "dataset_schema_version": DATASET_SCHEMA_VERSION, "run_id": run_id, "started_at": meta["started_at"],
            "definition": meta["definition"],
            "variant": rows["variant"].to_numpy(),
            "version": [info.get(v, {}).get("version") for v in rows["variant"]],
            "jars": [bool(info.get(v, {}).get("jars")) for v in rows["variant"]],
            "harness_version": meta.get("harness_version"), "metric": rows["metric"].to_numpy(),
            "statistic": rows["statistic"].to_numpy(), "cycle": rows["cycle"].to_numpy(dtype="int64"),
            "level": rows["level"].to_numpy(dtype="float64"), "values": rows["values"].to_numpy(dtype="int64"),
        }), schema=SCHEMA, preserve_index=False)
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        # Whole or not at all (harness.core.storage): renamed into place locally, one object on S3.
        location(dataset).join(f"scenario={scenario}", f"{run_id}.parquet").write_bytes(sink.getvalue().to_pybytes())
        written += 1
    return written


def read(dataset: str | Path) -> pd.DataFrame:
    """The whole dataset, with its scenario column; refuses a dataset written by a newer harness."""
    files = dataset_files(dataset)
    if not files:
        raise ConfigError(f"{location(dataset).uri}: no history yet (no scenario=*/<run>.parquet); add run archives "
                          "to it")
    parts = []
    for f in files:
        try:
            t = pq.read_table(pa.BufferReader(f.read_bytes()))
        except (pa.ArrowInvalid, OSError) as e:
            raise ConfigError(f"{f.uri}: not a readable Parquet file ({str(e).splitlines()[0]}); remove it and "
                              "add its run again") from None
        if "dataset_schema_version" not in t.column_names:
            raise ConfigError(f"{f.uri}: not a history file (no dataset_schema_version)")
        newest = max(t.column("dataset_schema_version").to_pylist() or [0])
        if newest > DATASET_SCHEMA_VERSION:
            raise ConfigError(f"{f.uri}: history dataset schema {newest} is newer than this harness reads "
                              f"({DATASET_SCHEMA_VERSION}); upgrade the harness")
        df = t.to_pandas()
        df["scenario"] = f.inner.rsplit("/", 2)[-2].split("=", 1)[1]
        parts.append(df)
    return pd.concat(parts, ignore_index=True)


@dataclass(frozen=True)
class ChangePoint:
    index: int  # the first point after the change
    before: float  # mean level of the points since the change before it
    after: float
    p_value: float
    direction: str  # REGRESSION (higher) or IMPROVEMENT (lower)

    def as_dict(self) -> dict:
        return {"index": self.index, "before": self.before, "after": self.after, "p_value": self.p_value,
                "direction": self.direction}


def _finite(values: Sequence[float]) -> list[float]:
    """Endless levels as a big finite number (Otava's statistics need finite values); None: no value."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    top = max(finite, default=1.0)
    big = (abs(top) if top else 1.0) * ENDLESS_FACTOR
    return [big if v is not None and math.isinf(v) else float(v) for v in values]


def change_points(values: Sequence[float], window: int = WINDOW, max_pvalue: float = MAX_PVALUE) -> list[ChangePoint]:
    """E-divisive change points of a series (Apache Otava)."""
    from otava.analysis import compute_change_points

    series = _finite(values)
    if len(series) < 4:
        return []
    # A list, not an array: Otava shifts window indices for arrays without slicing them.
    found, _weak = compute_change_points(list(series), window_len=window, max_pvalue=max_pvalue)
    out = []
    for cp in found:
        before, after = float(cp.stats.mean_before()), float(cp.stats.mean_after())
        worse = after > before if LOWER_IS_BETTER else after < before
        out.append(ChangePoint(int(cp.index), before, after, float(cp.stats.pvalue),
                               REGRESSION if worse else IMPROVEMENT))
    return out


def newest_starts_regression(values: Sequence[float], window: int = WINDOW,
                             max_pvalue: float = MAX_PVALUE) -> ChangePoint | None:
    """The regression the newest point brings: a change point found with it and not without it (as Otava's
    CI use flags a change among new data). None when there is none."""
    if len(values) < 5:
        return None
    now = change_points(values, window, max_pvalue)
    before = {c.index for c in change_points(values[:-1], window, max_pvalue)}
    new = [c for c in now if c.index not in before and c.direction == REGRESSION]
    return new[-1] if new else None


def _statistic_of(groups: pd.Index) -> pd.Index:
    return groups.get_level_values("statistic")


def over_runs(df: pd.DataFrame) -> pd.DataFrame:
    """One point per (scenario, variant, metric, run): the run's level over its cycles, ordered by start."""
    g = df.groupby(["scenario", "definition", "variant", "metric", "statistic", "run_id", "started_at", "version"],
                   sort=False, dropna=False)["level"]
    pts = pd.concat([g.size().rename("cycles"), group_levels(g, _statistic_of)], axis=1).reset_index()
    return pts.sort_values(["scenario", "definition", "variant", "metric", "started_at", "run_id"],
                           ignore_index=True)


def over_releases(df: pd.DataFrame) -> pd.DataFrame:
    """One point per (scenario, metric, release): the release variants' cycles pooled over every run of them,
    ordered by version."""
    rel = df[df["variant"].map(release_of).notna()].copy()
    if rel.empty:
        return pd.DataFrame(columns=["scenario", "definition", "metric", "statistic", "version", "level", "cycles",
                                     "runs"])
    rel["version"] = rel["variant"].map(release_of)
    g = rel.groupby(["scenario", "definition", "metric", "statistic", "version"], sort=False)
    pts = pd.concat([g.size().rename("cycles"), g["run_id"].nunique().rename("runs"),
                     group_levels(g["level"], _statistic_of)], axis=1).reset_index()
    key = pts["version"].map(lambda v: tuple(int(x) for x in v.split(".")))
    pts = pts.assign(_k=key).sort_values(["scenario", "definition", "metric", "_k"])
    return pts.drop(columns=["_k"]).reset_index(drop=True)


def analyse(df: pd.DataFrame, window: int = WINDOW, max_pvalue: float = MAX_PVALUE) -> dict:
    """Every series with its change points, and the regressions the newest run of each series starts."""
    runs_series = []
    for (scenario, digest, variant, metric), pts in over_runs(df).groupby(
            ["scenario", "definition", "variant", "metric"], sort=True):
        values = pts["level"].tolist()
        cps = change_points(values, window, max_pvalue)
        starts = newest_starts_regression(values, window, max_pvalue)
        runs_series.append({
            "scenario": scenario, "definition": digest, "variant": variant, "metric": metric,
            "statistic": pts["statistic"].iloc[0],
            "points": [{"run_id": r.run_id, "started_at": r.started_at, "version": r.version, "level": r.level,
                        "cycles": int(r.cycles)} for r in pts.itertuples()],
            "change_points": [{**c.as_dict(), "run_id": pts["run_id"].iloc[c.index]} for c in cps],
            "newest_starts_regression": None if starts is None else
            {**starts.as_dict(), "run_id": pts["run_id"].iloc[starts.index]},
        })
    release_series = []
    for (scenario, digest, metric), pts in over_releases(df).groupby(["scenario", "definition", "metric"],
                                                                     sort=True):
        values = pts["level"].tolist()
        release_series.append({
            "scenario": scenario, "definition": digest, "metric": metric, "statistic": pts["statistic"].iloc[0],
            "points": [{"version": r.version, "level": r.level, "cycles": int(r.cycles), "runs": int(r.runs)}
                       for r in pts.itertuples()],
            "change_points": [{**c.as_dict(), "version": pts["version"].iloc[c.index]}
                              for c in change_points(values, window, max_pvalue)],
        })
    return {"kind": "history", "method": {"name": "E-divisive means (Apache Otava, otava.analysis)",
                                          "window": window, "max_pvalue": max_pvalue,
                                          "unit": "a run (its cycles' median level); a release (its cycles pooled)"},
            "dataset_schema_version": DATASET_SCHEMA_VERSION, "runs": int(df["run_id"].nunique()),
            "over_runs": runs_series, "over_releases": release_series,
            "regressions": [s for s in runs_series if s["newest_starts_regression"]]}


# Archives into the dataset (Spark: the samples of every new run).


def find_archives(sources: Sequence[str]) -> list[str]:
    """Archives (directories with a manifest.json) below each source, a directory or s3://bucket/prefix;
    staging and work directories (names starting with '.') are not archives."""
    found: list[str] = []
    for s in sources:
        root = location(s, "history source")
        if not root.exists():
            raise ConfigError(f"{s}: no such archive or directory")
        if root.join("manifest.json").is_file():
            found.append(root.uri)
            continue
        for f in root.files():
            rel = f.below(root)
            if rel[-1] == "manifest.json" and not any(part.startswith(".") for part in rel[:-1]):
                found.append(root.join(*rel[:-1]).uri)
    return list(dict.fromkeys(found))


def definition(archive: Archive) -> str:
    """What pools a run with others: its scenario as far as the load goes (not its length or expectations)."""
    from spark.io import _comparable

    doc = _comparable(archive.record.scenario)
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:12]


def ingest(spark: object, dataset: str | Path, paths: Sequence[str | Path], warn: Callable[[str], None]) -> dict:
    """Add the archives not yet in the dataset; returns what was added and what was skipped (and why)."""
    from spark.comparison import collect
    from spark.io import load_archives

    have = ingested(dataset)
    loaded = load_archives([str(p) for p in paths], skip_bad=True, warn=warn, pool=False)
    new = [a for a in loaded if a.run_id not in have]
    groups: dict[tuple[str, str], list[Archive]] = {}
    for a in new:
        groups.setdefault((a.record.scenario_name, definition(a)), []).append(a)
    added = 0
    for (_name, digest), archives in sorted(groups.items()):
        variants = list(dict.fromkeys(v for a in archives for v in a.variants))
        c = collect(spark, archives, variants)
        try:
            levels = cycle_levels(c.samples, STATISTIC)
        finally:
            c.close()
        runs = {a.run_id: {"started_at": a.record.started_at, "harness_version": a.record.harness_version,
                           "definition": digest, "variants": {v.name: v.model_dump() for v in a.record.variants}}
                for a in archives}
        missing = sorted(set(runs) - set(levels["run_id"]))
        for run_id in missing:
            warn(f"run {run_id}: no retry measured (no cycle level); not in the history")
        added += append(dataset, levels, runs)
    return {"archives_found": len(paths), "runs_added": sorted(a.run_id for a in new),
            "runs_already_in": sorted(a.run_id for a in loaded if a.run_id in have), "files_written": added}


