"""The history dataset and its change points (Apache Otava's E-divisive means), on series built here."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.contracts.verdict import STATISTIC
from harness.core.errors import ConfigError
from spark import history


def noisy(n: int, level: float, seed: int, sd: float = 5.0) -> list[float]:
    return list(np.random.default_rng(seed).normal(level, sd, n))


def test_a_planted_step_is_found_where_it_was_planted_and_named_by_direction():
    up = history.change_points(noisy(20, 100, 1) + noisy(10, 150, 2))
    assert [(c.index, c.direction) for c in up] == [(20, "regression")]
    assert up[0].before == pytest.approx(100, abs=5) and up[0].after == pytest.approx(150, abs=5)
    down = history.change_points(noisy(20, 150, 3) + noisy(10, 100, 4))
    assert [(c.index, c.direction) for c in down] == [(20, "improvement")]


def test_noise_alone_has_no_change_point_and_short_series_none_at_all():
    assert history.change_points(noisy(30, 100, 5)) == []
    assert history.change_points([1.0, 100.0, 1.0]) == []


def test_only_the_run_that_brings_a_regression_starts_it():
    base = noisy(20, 100, 6)
    shifted = base + [150.0]
    starts = history.newest_starts_regression(shifted)
    assert starts is not None and starts.index == 20 and starts.direction == "regression"
    # A second shifted run: the change was already there without it, so it starts nothing.
    assert history.newest_starts_regression(shifted + [151.0]) is None
    assert history.newest_starts_regression(base + [50.0]) is None  # an improvement is no regression


def test_an_endless_level_is_the_worst_not_a_hole():
    cps = history.change_points(noisy(20, 100, 7) + [float("inf")] * 3)
    assert [(c.index, c.direction) for c in cps] == [(20, "regression")]


def samples() -> pd.DataFrame:
    rows = []
    for cycle, values in enumerate(([10.0, 20.0, 30.0], [40.0, float("inf")])):
        rows += [{"scenario": "burst", "variant": "v", "run_id": "r1", "cycle": cycle, "metric": "wakeup_ms",
                  "value": x} for x in values]
    rows += [{"scenario": "burst", "variant": "v", "run_id": "r1", "cycle": 0, "metric": "stalled", "value": x}
             for x in (1.0, 0.0, 0.0, 0.0)]
    rows.append({"scenario": "burst", "variant": "v", "run_id": "r1", "cycle": 0, "metric": "other", "value": 1.0})
    return pd.DataFrame(rows)


def test_a_cycle_level_is_the_median_of_its_values_or_the_share():
    lv = history.cycle_levels(samples(), STATISTIC).set_index(["metric", "cycle"])
    assert lv.loc[("wakeup_ms", 0), "level"] == 20.0 and lv.loc[("wakeup_ms", 1), "level"] == float("inf")
    assert lv.loc[("stalled", 0), "level"] == 0.25 and lv.loc[("stalled", 0), "values"] == 4
    assert "other" not in lv.index.get_level_values("metric")


RUNS = {"r1": {"started_at": "2026-11-01T00:00:00+00:00", "harness_version": "t", "definition": "abc",
               "variants": {"v": {"name": "v", "version": "5.3.3"}}}}


def test_the_dataset_adds_a_run_once_and_reads_back_what_was_written(tmp_path):
    ds = tmp_path / "history"
    levels = history.cycle_levels(samples(), STATISTIC)
    assert history.append(ds, levels, RUNS) == 1
    assert history.ingested(ds) == {"r1"}
    back = history.read(ds)
    assert len(back) == len(levels) and set(back["scenario"]) == {"burst"}
    assert set(back["version"]) == {"5.3.3"} and set(back["definition"]) == {"abc"}
    with pytest.raises(ConfigError, match="run r1 is already in the history dataset"):
        history.append(ds, levels, RUNS)
    assert [p.name for p in (ds / "scenario=burst").iterdir()] == ["r1.parquet"]  # no temporary file left


def test_a_dataset_from_a_newer_harness_or_a_broken_file_is_refused_in_one_line(tmp_path):
    with pytest.raises(ConfigError, match="no history yet"):
        history.read(tmp_path / "none")
    part = tmp_path / "ds" / "scenario=burst"
    part.mkdir(parents=True)
    pq.write_table(pa.table({"dataset_schema_version": pa.array([99], pa.int16())}), part / "r9.parquet")
    with pytest.raises(ConfigError, match="schema 99 is newer than this harness reads"):
        history.read(tmp_path / "ds")
    (part / "r9.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(ConfigError, match="r9.parquet: not a readable Parquet file"):
        history.read(tmp_path / "ds")


def test_releases_are_ordered_by_version_not_by_text():
    df = pd.DataFrame([{"scenario": "s", "definition": "d", "variant": f"rocketmq-{v}", "metric": "wakeup_ms",
                        "statistic": "median", "run_id": f"r{v}", "level": lv}
                       for v, lv in (("5.10.0", 3.0), ("5.2.0", 1.0), ("5.9.0", 2.0))]
                      + [{"scenario": "s", "definition": "d", "variant": "patched", "metric": "wakeup_ms",
                          "statistic": "median", "run_id": "rp", "level": 9.0}])
    assert history.over_releases(df)["version"].tolist() == ["5.2.0", "5.9.0", "5.10.0"]
