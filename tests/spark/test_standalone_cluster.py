"""The Spark stage on a real Spark standalone cluster (tests/spark/standalone.py) whose worker cannot see the
driver's /tmp: compare, matrix and history give what they give in local mode. The archives lie where both
see them (not /tmp); every report is written by the driver under its own /tmp, which the executors cannot see:
whatever the tasks compute comes back through Spark."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from harness.core.paths import REPO_ROOT
from spark.jobs import history, matrix
from tests import synth
from tests.spark.standalone import Cluster, standalone, worker_sees
from tests.spark.test_golden_summary import GOLDEN, _figures

JOB_TIMEOUT_S = 240


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with standalone(tmp_path_factory.mktemp("spark-cluster")) as c:
        yield c


@pytest.fixture(scope="module")
def shared() -> Iterator[Path]:
    """A directory the driver and the worker both see (the worker's /tmp is its own)."""
    d = Path(tempfile.mkdtemp(prefix="rmq-harness-shared-", dir="/var/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _on_cluster(job: str, argv: list[str], cluster: Cluster) -> None:
    got = subprocess.run([sys.executable, "-m", f"spark.jobs.{job}", *argv, "--master", cluster.master],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=JOB_TIMEOUT_S)
    assert got.returncode in (0, 3), got.stderr[-3000:]


def _apps(cluster: Cluster) -> list[str]:
    with urllib.request.urlopen(f"{cluster.ui}/json", timeout=5) as r:
        state = json.load(r)
    return [a["name"] for a in state.get("completedapps", []) + state.get("activeapps", [])]


def _same_places(summary: dict, *places: tuple[Path, str]) -> dict:
    """The summary with each directory that differs between the two runs named alike."""
    text = json.dumps(summary, sort_keys=True)
    for path, name in places:
        text = text.replace(str(path.resolve()), name)
    out = json.loads(text)
    for k in ("generated_at", "out", "report"):  # when; and where (run() adds it to what summary.json holds)
        out.pop(k, None)
    return out


def test_compare_on_the_cluster_gives_the_committed_summary(cluster, shared, tmp_path):
    [archive] = [p for p in GOLDEN.iterdir() if (p / "manifest.json").exists()]
    where = shared / "golden" / archive.name
    shutil.copytree(archive, where)
    report = tmp_path / "report"
    assert worker_sees(where) and not worker_sees(tmp_path)
    _on_cluster("compare", [str(where), "--baseline", "unpatched", "--candidate", "patched", "--out", str(report)],
                cluster)
    got = json.loads((report / "summary.json").read_text())
    want = json.loads((GOLDEN / "summary.json").read_text())
    assert _figures(got) == _figures(want)
    assert got["verdict"] == "improvement"
    assert "rmq-harness-compare" in _apps(cluster)  # it ran there, not in a local Spark
    # Every retry and ledger row came back to the driver's report.
    retries = pq.read_table(report / "retries.parquet")
    ledger = pq.read_table(report / "ledger.parquet")
    per = got["per_variant"]
    assert retries.num_rows == sum(r["retry_deliveries"] for r in per) > 0
    assert ledger.num_rows == sum(r["ledger"]["sent"] for r in per) > 0


def _matrix_archives(root: Path) -> list[Path]:
    variants = {"unpatched": synth.slow, "patched": synth.fast, "upstream-5.4.0": synth.fast}
    return [synth.archive(root, "run-burst", variants, messages=40, seed=1, lost=1),
            synth.archive(root, "run-lapse", variants, messages=40, seed=2, lost=0, scenario="lapse",
                          scenario_doc={"expect": ["wakeup_ms.p50 < 1000", "ledger.lost == 0"],
                                        "reference": "a test"})]


def test_matrix_on_the_cluster_is_what_local_mode_gives(cluster, shared, spark, tmp_path):
    runs = shared / "matrix"
    archives = _matrix_archives(runs)
    local_out, cluster_out = tmp_path / "local" / "m", tmp_path / "cluster" / "m"
    argv = [*map(str, archives), "--variant", "unpatched", "--variant", "patched", "--variant", "upstream-5.4.0",
            "--bootstrap", "300"]
    want = matrix.run(matrix.parser().parse_args([*argv, "--out", str(local_out)]), spark=spark)
    _on_cluster("matrix", [*argv, "--out", str(cluster_out)], cluster)
    got = json.loads((cluster_out / "summary.json").read_text())
    assert len(got["overview"]) == 6
    assert _same_places(got, (cluster_out, "<out>")) == _same_places(want, (local_out, "<out>"))
    assert "rmq-harness-matrix" in _apps(cluster)


def test_history_on_the_cluster_is_what_local_mode_gives(cluster, shared, spark, tmp_path):
    series = shared / "history"
    for i in range(8):  # a build that gets slower at its seventh run
        def wakeup(rng: np.random.Generator, n: int, slow: bool = i >= 6) -> np.ndarray:
            return (150 if slow else 0) + rng.exponential(30, n)

        synth.archive(series, f"run-{i:02d}", {"patched": wakeup}, messages=40, seed=100 + i, lost=0,
                      started_at=f"2026-11-{i + 1:02d}T00:00:00+00:00")
    local_ds, cluster_ds = tmp_path / "local" / "ds", tmp_path / "cluster" / "ds"
    local_h, cluster_h = tmp_path / "local" / "h", tmp_path / "cluster" / "h"
    want = history.run(history.parser().parse_args([str(series), "--dataset", str(local_ds), "--window", "4",
                                                    "--out", str(local_h)]), spark=spark)
    _on_cluster("history", [str(series), "--dataset", str(cluster_ds), "--window", "4", "--out", str(cluster_h)],
                cluster)
    got = json.loads((cluster_h / "summary.json").read_text())
    assert len(got["runs_added"]) == 8
    assert (_same_places(got, (cluster_h, "<out>"), (cluster_ds, "<ds>"))
            == _same_places(want, (local_h, "<out>"), (local_ds, "<ds>")))
    assert "rmq-harness-history" in _apps(cluster)
