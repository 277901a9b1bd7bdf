"""The Spark comparison for real (local mode) on archives the tests generate."""

import json

import numpy as np
import pandas as pd
import pytest

from harness.cli import main
from harness.latency import derive, summarize
from spark.jobs.compare import parser, run
from tests import synth


@pytest.fixture(scope="module")
def spark():
    from spark.session import local_session

    s = local_session("local[2]")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def archives(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    a = synth.archive(runs, "run-a", {"unpatched": synth.slow, "patched": synth.fast}, messages=40, seed=1)
    b = synth.archive(runs, "run-b", {"unpatched": synth.slow, "patched": synth.fast}, messages=25, seed=2, lost=0)
    return [a, b]


def _args(paths, out, *extra):
    return parser().parse_args([*map(str, paths), "--baseline", "unpatched", "--candidate", "patched",
                                "--out", str(out), "--bootstrap", "300", *extra])


def test_summary_matches_a_pandas_recomputation_of_the_raw_events(spark, archives, tmp_path):
    summary = run(_args(archives, tmp_path / "out"), spark=spark)
    raw = pd.concat([pd.read_parquet(f) for a in archives for f in sorted((a / "events").glob("*.parquet"))])
    expected = {(s["scenario"], s["variant"]): s for s in summarize(derive(raw))}
    assert len(summary["per_variant"]) == 2
    for got in summary["per_variant"]:
        want = expected[(got["scenario"], got["variant"])]
        for key in ("sent", "deliveries", "retry_deliveries", "acks", "nacks", "empty_polls", "errors"):
            assert got[key] == want[key], key
        assert got["ledger"] == want["ledger"]
        for metric in ("wakeup_ms", "redelivery_ms"):
            assert got[metric]["n"] == want[metric]["n"] == 65
            for q in ("p50", "p90", "p99", "max"):
                assert got[metric][q] == pytest.approx(want[metric][q], rel=1e-9), (metric, q)
    assert summary["runs"][0]["run_id"] in {"run-a", "run-b"} and len(summary["runs"]) == 2
    [wake] = [c for c in summary["comparisons"] if c["metric"] == "wakeup_ms"]
    assert wake["verdict"] == "improvement" and wake["p_value"] < 1e-6
    assert summary["verdict"] == "improvement"
    out = tmp_path / "out"
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk["schema_version"] == 1 and on_disk["verdict"] == "improvement"
    assert len(pd.read_parquet(out / "retries.parquet")) == 2 * 65
    assert len(pd.read_parquet(out / "per_variant.parquet")) == 2
    html = (out / "report.html").read_text()
    assert "Verdict: improvement" in html
    for name in ("wakeup-cdf", "wakeup-box", "wakeup-over-time", "redelivery-cdf"):
        assert (out / "plots" / f"burst-{name}.png").stat().st_size > 1000
        assert f"plots/burst-{name}.png" in html


def test_regression_exits_3_when_asked(spark, archives, tmp_path, capsys):
    argv = [str(archives[0]), "--baseline", "patched", "--candidate", "unpatched", "--bootstrap", "200"]
    assert main(["compare", *argv, "--out", str(tmp_path / "r1"), "--fail-on-regression"]) == 3
    assert main(["compare", *argv, "--out", str(tmp_path / "r2")]) == 0
    assert "regression" in capsys.readouterr().out


def test_unknown_variant_lists_those_present(archives, tmp_path, capsys):
    assert main(["compare", str(archives[0]), "--baseline", "unpatched", "--candidate", "nope",
                 "--out", str(tmp_path / "x")]) == 2
    assert "variants present: patched, unpatched" in capsys.readouterr().err


@pytest.mark.parametrize("damage, needle", [
    (lambda a: (a / "manifest.json").unlink(), "manifest.json: missing"),
    (lambda a: (a / "manifest.json").write_text("{not json"), "manifest.json: corrupt JSON"),
    (lambda a: (a / "events" / "patched.parquet").write_bytes(b"garbage"), "patched.parquet: not a readable Parquet"),
    (lambda a: (a / "manifest.json").write_text(json.dumps(
        {**json.loads((a / "manifest.json").read_text()), "schema_version": 99})), "manifest schema version 99"),
])
def test_bad_archives_are_named_in_one_line(tmp_path, capsys, damage, needle):
    a = synth.archive(tmp_path / "runs", "bad", {"unpatched": synth.slow, "patched": synth.fast}, messages=6)
    good = synth.archive(tmp_path / "runs", "good", {"unpatched": synth.slow, "patched": synth.fast}, messages=6)
    damage(a)
    argv = ["compare", str(a), str(good), "--baseline", "unpatched", "--candidate", "patched", "--bootstrap", "100"]
    assert main([*argv, "--out", str(tmp_path / "o1")]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and err.count("\n") == 0 and "Traceback" not in err
    assert not (tmp_path / "o1").exists()


def test_skip_bad_warns_and_compares_the_rest(spark, tmp_path, capsys):
    bad = synth.archive(tmp_path / "runs", "bad", {"unpatched": synth.slow, "patched": synth.fast}, messages=6)
    good = synth.archive(tmp_path / "runs", "good", {"unpatched": synth.slow, "patched": synth.fast}, messages=12)
    (bad / "manifest.json").unlink()
    summary = run(_args([bad, good], tmp_path / "o", "--skip-bad"), spark=spark, warn=lambda s: print(s))
    assert [r["run_id"] for r in summary["runs"]] == ["good"]
    assert "skipped" in capsys.readouterr().out
    assert {v["retry_deliveries"] for v in summary["per_variant"]} == {12}


def test_reports_are_never_overwritten(archives, tmp_path, capsys):
    out = tmp_path / "exists"
    out.mkdir()
    (out / "keep").write_text("x")
    assert main(["compare", str(archives[0]), "--baseline", "unpatched", "--candidate", "patched",
                 "--out", str(out)]) == 2
    assert (out / "keep").read_text() == "x"


def test_generated_latencies_are_what_the_archive_says(archives):
    ev = pd.read_parquet(archives[0] / "events" / "unpatched.parquet")
    d = derive(ev)
    w = d.loc[d.wakeup_ms.notna(), "wakeup_ms"].to_numpy()
    assert w.size == 40 and np.all((w >= 14_000) & (w <= 20_000))
