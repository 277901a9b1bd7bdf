"""The Spark stage on a real Spark standalone cluster (tests/spark/standalone.py) whose worker cannot see the
driver's /tmp: compare (of the committed run, read from a bucket) gives the committed summary, matrix and history
give what they give in local mode. The archives lie where both see them (a bucket, or not /tmp); every report is
written by the driver under its own /tmp, which the executors cannot see: whatever the tasks compute comes back
through Spark."""

from __future__ import annotations

import json
import os
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
from spark import history as history_data
from spark.jobs import history, matrix
from tests import synth
from tests.s3_server import running_s3
from tests.spark.golden import figures, golden_archive, golden_summary
from tests.spark.standalone import Cluster, standalone, worker_sees
from tools.s3.seaweedfs import S3Server

JOB_TIMEOUT_S = 240
BUCKET = "runs"


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A real S3 server (SeaweedFS) with a bucket for the runs."""
    with running_s3(tmp_path_factory.mktemp("s3"), bucket=BUCKET) as server:
        yield server


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, s3: S3Server) -> Iterator[Cluster]:
    # The worker has the bucket's credentials in its environment, as a node would (never in Spark's settings).
    with standalone(tmp_path_factory.mktemp("spark-cluster"), env=s3.env()) as c:
        yield c


@pytest.fixture(scope="module")
def shared() -> Iterator[Path]:
    """A directory the driver and the worker both see (the worker's /tmp is its own)."""
    d = Path(tempfile.mkdtemp(prefix="rmq-harness-shared-", dir="/var/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _on_cluster(job: str, argv: list[str], cluster: Cluster, env: dict[str, str] | None = None) -> str:
    got = subprocess.run([sys.executable, "-m", f"spark.jobs.{job}", *argv, "--master", cluster.master],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=JOB_TIMEOUT_S,
                         env={**os.environ, **(env or {})})
    assert got.returncode in (0, 3), got.stderr[-3000:]
    return got.stdout + got.stderr


def _apps(cluster: Cluster) -> list[str]:
    with urllib.request.urlopen(f"{cluster.ui}/json", timeout=5) as r:
        state = json.load(r)
    return [a["name"] for a in state.get("completedapps", []) + state.get("activeapps", [])]


def _same_places(summary: dict, *places: tuple[Path | str, str]) -> dict:
    """The summary with each directory (or bucket prefix) that differs between the two runs named alike."""
    text = json.dumps(summary, sort_keys=True)
    for path, name in places:
        text = text.replace(str(path.resolve()) if isinstance(path, Path) else path, name)
    out = json.loads(text)
    for k in ("generated_at", "out", "report"):  # when; and where (run() adds it to what summary.json holds)
        out.pop(k, None)
    return out


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
    # The tasks read the archives where every node sees them; the report goes where only the driver does.
    assert worker_sees(archives[0]) and not worker_sees(tmp_path)
    argv = [*map(str, archives), "--variant", "unpatched", "--variant", "patched", "--variant", "upstream-5.4.0",
            "--bootstrap", "300"]
    want = matrix.run(matrix.parser().parse_args([*argv, "--out", str(local_out)]), spark=spark)
    _on_cluster("matrix", [*argv, "--out", str(cluster_out)], cluster)
    got = json.loads((cluster_out / "summary.json").read_text())
    assert len(got["overview"]) == 6
    assert _same_places(got, (cluster_out, "<out>")) == _same_places(want, (local_out, "<out>"))
    assert "rmq-harness-matrix" in _apps(cluster)


def test_history_on_the_cluster_reads_and_writes_the_bucket_and_is_what_local_mode_gives(cluster, shared, spark, s3,
                                                                                         tmp_path):
    """The archives and the history dataset in the bucket, the executors reading and writing it there: the same
    change points as local mode over local files."""
    series = shared / "history"
    for i in range(8):  # a build that gets slower at its seventh run
        def wakeup(rng: np.random.Generator, n: int, slow: bool = i >= 6) -> np.ndarray:
            return (150 if slow else 0) + rng.exponential(30, n)

        synth.archive(series, f"run-{i:02d}", {"patched": wakeup}, messages=40, seed=100 + i, lost=0,
                      started_at=f"2026-11-{i + 1:02d}T00:00:00+00:00")
    local_ds, local_h, cluster_h = tmp_path / "local" / "ds", tmp_path / "local" / "h", tmp_path / "cluster" / "h"
    want = history.run(history.parser().parse_args([str(series), "--dataset", str(local_ds), "--window", "4",
                                                    "--out", str(local_h)]), spark=spark)
    runs, dataset = f"s3://{BUCKET}/series", f"s3://{BUCKET}/history"
    up = _cli(["upload", *map(str, sorted(p for p in series.iterdir() if (p / "manifest.json").exists())),
               "--runs-dir", runs], s3.env())
    assert up.returncode == 0, up.stderr[-2000:]
    said = _on_cluster("history", [runs, "--dataset", dataset, "--window", "4", "--out", str(cluster_h)], cluster,
                       s3.env())
    got = json.loads((cluster_h / "summary.json").read_text())
    assert len(got["runs_added"]) == 8 and got["dataset"] == dataset
    assert (_same_places(got, (cluster_h, "<out>"), (dataset, "<ds>"), (runs, "<runs>"))
            == _same_places(want, (local_h, "<out>"), (local_ds, "<ds>"), (series, "<runs>")))
    assert "rmq-harness-history" in _apps(cluster)
    # What the next history reads to add only new runs (tests/spark/test_history.py for the rest of it).
    with pytest.MonkeyPatch.context() as mp:
        for k, v in s3.env().items():
            mp.setenv(k, v)
        assert history_data.ingested(dataset) == set(got["runs_added"])
    assert not _secret_anywhere(s3.secret_key, said, up.stdout, up.stderr, under=tmp_path)


def _cli(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli.main", *argv], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=JOB_TIMEOUT_S, env={**os.environ, **env})


def _secret_anywhere(secret: str, *texts: str, under: Path | None = None) -> bool:
    files = [p.read_bytes().decode("utf-8", "replace") for p in under.rglob("*") if p.is_file()] if under else []
    return any(secret in t for t in [*texts, *files])


@pytest.fixture(scope="module")
def uploaded(s3: S3Server) -> tuple[str, str]:
    """The golden archive uploaded to the bucket with `rmq-harness upload`: its URI, and what the upload said."""
    archive = golden_archive()
    up = _cli(["upload", str(archive), "--runs-dir", f"s3://{BUCKET}/golden"], s3.env())
    uri = f"s3://{BUCKET}/golden/{archive.name}"
    assert up.returncode == 0 and uri in up.stdout, up.stderr[-2000:]
    return uri, up.stdout + up.stderr


def test_an_archive_in_the_bucket_is_compared_with_the_executors_reading_the_bucket(cluster, s3, uploaded,
                                                                                     tmp_path):
    """No copy of the archive anywhere the executors look: the driver and the tasks read the bucket."""
    uri, said = uploaded
    report = tmp_path / "report"
    said += _on_cluster("compare", [uri, "--baseline", "unpatched", "--candidate", "patched", "--out", str(report)],
                        cluster, s3.env())
    got = json.loads((report / "summary.json").read_text())
    assert figures(got) == figures(golden_summary())
    assert got["verdict"] == "improvement"
    assert got["runs"][0]["path"] == uri
    assert "rmq-harness-compare" in _apps(cluster)  # it ran there, not in a local Spark
    # Every retry and ledger row came back to the driver's report, under a /tmp the executors cannot see.
    assert not worker_sees(tmp_path)
    retries = pq.read_table(report / "retries.parquet")
    ledger = pq.read_table(report / "ledger.parquet")
    per = got["per_variant"]
    assert retries.num_rows == sum(r["retry_deliveries"] for r in per) > 0
    assert ledger.num_rows == sum(r["ledger"]["sent"] for r in per) > 0
    # The credentials are in no report, no output, no log line.
    assert not _secret_anywhere(s3.secret_key, said, under=tmp_path)


def test_a_bucket_that_is_missing_refuses_or_holds_half_an_upload_is_one_line_and_exit_2(s3, tmp_path, capsys,
                                                                                          monkeypatch):
    """Each before any JVM starts (in this process: the commands' own main)."""
    from harness.cli.main import main as harness_main
    from harness.core.storage import location, upload_tree
    from spark.jobs.compare import main as compare_main

    def said(command: object, argv: list[str], case_env: dict[str, str]) -> tuple[int, str]:
        with pytest.MonkeyPatch.context() as mp:
            for k, v in case_env.items():
                mp.setenv(k, v)
            code = command(argv)
        out = capsys.readouterr()
        assert s3.secret_key not in out.out + out.err
        return code, out.err

    archive = golden_archive()
    env = s3.env()
    compare = ["--baseline", "unpatched", "--candidate", "patched", "--out", str(tmp_path / "r")]
    cases = {
        "does not exist": (["s3://no-such-bucket/x", *compare], env),
        "refused the credentials": ([f"s3://{BUCKET}/x", *compare], {**env, "AWS_SECRET_ACCESS_KEY": "wrong"}),
        "no S3 endpoint answers": ([f"s3://{BUCKET}/x", *compare],
                                   {**env, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}),
    }
    # An upload cut short: every file but the manifest (which goes last).
    half = f"s3://{BUCKET}/half/{archive.name}"
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        assert list(upload_tree(archive, location(half), "manifest.json"))[-1] == "manifest.json"
        location(half).fs.delete_file(location(half).join("manifest.json").inner)
    cases["an upload cut short"] = ([half, *compare], env)
    for needle, (argv, case_env) in cases.items():
        code, err = said(compare_main, argv, case_env)
        assert code == 2 and needle in err, (needle, err[-2000:])
        assert len(err.strip().splitlines()) == 1, err
    # Uploads and runs check their destination before anything starts; nothing is written over.
    upload = ["upload", str(archive), "--runs-dir", f"s3://{BUCKET}/twice"]
    assert said(harness_main, upload, env)[0] == 0
    code, err = said(harness_main, upload, env)
    assert code == 2 and "already exists" in err
    code, err = said(harness_main, ["run", "--runs-dir", "s3://no-such-bucket/runs", "--duration", "5"], env)
    assert code == 2 and "bucket no-such-bucket does not exist" in err, err[-2000:]
    assert not (tmp_path / "r").exists()
