"""History for real (local Spark) over generated archives: a series of runs of one build with a step planted
in it, added to the dataset run by run as CI would; the newest run that brings the step exits 3."""

import json

import numpy as np
import pytest

from harness.cli.main import main
from spark.history import find_archives
from spark.jobs.history import parser, run
from tests import synth

BEFORE, AFTER = 10, 2


def usual(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.exponential(30, n)


def slower(rng: np.random.Generator, n: int) -> np.ndarray:
    return 150 + rng.exponential(30, n)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    out = []
    for i in range(BEFORE + AFTER):
        out.append(synth.archive(root, f"run-{i:02d}", {"patched": usual if i < BEFORE else slower}, messages=40,
                                 seed=100 + i, lost=0, started_at=f"2026-11-{i + 1:02d}T00:00:00+00:00"))
    (root / ".20261124-x.partial").mkdir()  # a run being written is not an archive
    return root, out


def test_only_finished_archives_are_found_below_a_directory(runs):
    root, archives = runs
    assert find_archives([str(root)]) == [str(a.resolve()) for a in archives]


def test_the_step_is_found_and_only_the_run_that_brings_it_exits_3(spark, runs, tmp_path, capsys):
    root, archives = runs
    ds = tmp_path / "history"
    # CI after the last usual run: everything so far goes in; nothing regressed.
    s = run(parser().parse_args([*map(str, archives[:BEFORE]), "--dataset", str(ds), "--out", str(tmp_path / "a")]),
            spark=spark)
    assert len(s["runs_added"]) == BEFORE and s["regressions"] == []
    # The first slower run: it starts a regression of wakeup_ms.
    argv = ["history", str(root), "--dataset", str(ds), "--out", str(tmp_path / "b")]
    s = run(parser().parse_args([str(a) for a in archives[:BEFORE + 1]] + ["--dataset", str(ds), "--out",
                                                                            str(tmp_path / "b0")]), spark=spark)
    assert s["runs_added"] == [f"run-{BEFORE:02d}"] and len(s["runs_already_in"]) == BEFORE
    wake = next(x for x in s["regressions"] if x["metric"] == "wakeup_ms")
    assert wake["variant"] == "patched" and wake["newest_starts_regression"]["run_id"] == f"run-{BEFORE:02d}"
    assert wake["newest_starts_regression"]["after"] > 3 * wake["newest_starts_regression"]["before"]
    # The next slower run: the change point stays where it began, and this run starts nothing new (exit 0).
    assert main(argv) == 0
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    series = next(x for x in summary["over_runs"] if x["metric"] == "wakeup_ms")
    assert len(series["points"]) == BEFORE + AFTER
    assert [(c["run_id"], c["direction"]) for c in series["change_points"]] == [(f"run-{BEFORE:02d}", "regression")]
    assert "regression at run-10" in capsys.readouterr().out


def test_the_cli_exits_3_on_a_regression_the_newest_run_starts(runs, tmp_path, capsys):
    root, archives = runs
    ds = tmp_path / "history"
    assert main(["history", *map(str, archives[:BEFORE + 1]), "--dataset", str(ds), "--out", str(tmp_path / "r")]) == 3
    assert "regression starting at run run-10" in capsys.readouterr().out
    assert main(["history", str(root), "--dataset", str(ds), "--out", str(tmp_path / "r")]) == 2
    assert "already exists" in capsys.readouterr().err
