"""The Spark comparison for real (local mode) on archives the tests generate."""

import json

import numpy as np
import pandas as pd
import pytest

from harness.cli.main import main
from harness.contracts.schemas import SUMMARY
from harness.measure.latency import derive
from spark.jobs.compare import parser, run
from tests import synth


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
    expected = {(s["scenario"], s["variant"]): s
                for s in synth.own_summary(derive(raw), {"T": {"G": ["*"]}}, {"G": 17}, 20_000)}
    assert len(summary["per_variant"]) == 2
    for got in summary["per_variant"]:
        want = expected[(got["scenario"], got["variant"])]
        for key in ("sent", "deliveries", "retry_deliveries", "acks", "nacks", "empty_polls", "errors"):
            assert got[key] == want[key], key
        assert got["ledger"] == want["ledger"]
        assert got["cycles"] == want["cycles"] == 16  # 8 in each of the two runs
        for metric in ("wakeup_ms", "redelivery_ms", "nack_retry_ms"):  # one definition, two engines
            assert got[metric]["n"] == want[metric]["n"] == 65
            for q in ("p50", "p90", "p99", "max"):
                assert got[metric][q] == pytest.approx(want[metric][q], rel=1e-9), (metric, q)
        assert got["pickup_ms"]["n"] == want["pickup_ms"]["n"] == 0
        assert got["stalled"] == want["stalled"]  # slow wakeups (14-20 s) wait over half the 20 s poll
        assert got["stalled"]["count"] == (65 if got["variant"] == "unpatched" else 0)
    assert summary["runs"][0]["run_id"] in {"run-a", "run-b"} and len(summary["runs"]) == 2
    [wake] = [c for c in summary["comparisons"] if c["metric"] == "wakeup_ms"]
    # The unit is the cycle: 8 cycles in each of 2 runs a side, not 65 retries.
    assert (wake["unit"], wake["n_baseline"], wake["n_candidate"], wake["runs_baseline"]) == ("cycle", 16, 16, 2)
    assert wake["verdict"] == "improvement" and wake["p_adjusted"] < 1e-6
    assert wake["p_adjusted"] == wake["p_value"]  # the primary alone at alpha, then redelivery (fixed sequence)
    assert summary["verdict"] == "improvement" and summary["family"] == {"burst": 2}
    out = tmp_path / "out"
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk["schema_version"] == SUMMARY.version and on_disk["verdict"] == "improvement"
    ledger = pd.read_parquet(out / "ledger.parquet")
    assert len(ledger) == sum(v["ledger"]["owed"] + v["ledger"]["cross_topic"] + v["ledger"]["unknown"]
                              for v in summary["per_variant"])
    assert ledger.groupby("variant")["class"].apply(lambda c: (c == "lost").sum()).to_dict() == {
        v["variant"]: v["ledger"]["lost"] for v in summary["per_variant"]}
    assert {e["variant"]: (e["met"], e["failed"]) for e in summary["expectations"]} == {
        "unpatched": (0, 1), "patched": (1, 0)}  # the synthetic scenario expects wakeup_ms.p50 < 1000
    assert len(pd.read_parquet(out / "retries.parquet")) == 2 * 65
    assert len(pd.read_parquet(out / "per_variant.parquet")) == 2
    html = (out / "report.html").read_text()
    assert "Verdict: improvement" in html and "unit: the cycle" in html
    assert "wakeup_ms.p50 &lt; 1000 (failed" in html and "messages owed" in html
    for name in ("wakeup-cycles", "wakeup-cdf", "wakeup-box", "wakeup-over-time", "redelivery-cdf"):
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


def test_a_faster_candidate_that_loses_retries_is_never_an_improvement(spark, tmp_path):
    a = synth.archive(tmp_path / "runs", "lossy", {"unpatched": synth.slow, "patched": synth.fast}, messages=40,
                      lost=0, never_redelivered={"patched": 1})
    summary = run(_args([a], tmp_path / "o"), spark=spark)
    [wake] = [c for c in summary["comparisons"] if c["metric"] == "wakeup_ms"]
    assert wake["verdict"] == "regression" and "retries never redelivered 1 vs 0" in wake["reason"]
    assert summary["verdict"] == "regression"
    [patched] = [v for v in summary["per_variant"] if v["variant"] == "patched"]
    assert patched["ledger"]["retries_never_redelivered"] == 1 and patched["ledger"]["retries_expected"] == 40


def test_a_scenario_judged_on_stalls_compares_their_share_per_cycle(spark, tmp_path):
    def half_stall(rng, n):  # every other retry waits for its poll to run out, the others are woken at once
        return np.where(np.arange(n) % 2 == 0, rng.uniform(15_000, 20_000, n), rng.exponential(30, n))

    a = synth.archive(tmp_path / "runs", "coin", {"upstream": half_stall, "fixed": synth.fast}, messages=48,
                      lost=0, cycles=12, scenario="v2", scenario_doc={"verdict_metric": "stalled"})
    summary = run(parser().parse_args([str(a), "--baseline", "upstream", "--candidate", "fixed", "--out",
                                       str(tmp_path / "o"), "--bootstrap", "300"]), spark=spark)
    by = {c["metric"]: c for c in summary["comparisons"]}
    assert list(by) == ["stalled", "wakeup_ms", "redelivery_ms"] and list(summary["family"].values()) == [3]
    stall = by["stalled"]
    assert stall["primary"] and not by["wakeup_ms"]["primary"] and stall["statistic"] == "share"
    # 4 retries a cycle, 2 of them stalled: each cycle's share is 0.5 on the baseline, 0 on the fix.
    assert (stall["median_baseline"], stall["median_candidate"], stall["ratio_of_medians"]) == (0.5, 0.0, 0.0)
    assert (stall["n_baseline"], stall["n_candidate"]) == (12, 12)
    # judged by the difference of shares: 50 points fewer stalled (the bootstrap resamples retries within cycles)
    assert stall["effect"] == "difference" and stall["difference"] == -0.5 and stall["ci"][1] < -0.05
    assert stall["verdict"] == "improvement" and summary["verdict"] == "improvement"
    upstream = next(v for v in summary["per_variant"] if v["variant"] == "upstream")
    assert upstream["stalled"] == {"retries": 48, "count": 24, "share": 0.5}
    assert "50%" in (tmp_path / "o" / "report.html").read_text()


def test_too_few_cycles_is_not_enough_data_with_the_number_needed(spark, tmp_path):
    a = synth.archive(tmp_path / "runs", "short", {"unpatched": synth.slow, "patched": synth.fast}, messages=12,
                      cycles=3)
    summary = run(_args([a], tmp_path / "o"), spark=spark)
    [wake] = [c for c in summary["comparisons"] if c["metric"] == "wakeup_ms"]
    assert wake["verdict"] == "not enough data" and "at least 4 per side" in wake["reason"]
    assert summary["verdict"] == "not enough data"


def test_identical_builds_are_never_called_different(spark, tmp_path):
    a = synth.archive(tmp_path / "runs", "aa", {"patched": synth.fast, "patched-copy": synth.fast}, messages=160,
                      cycles=16, lost=0, seed=11)
    args = parser().parse_args([str(a), "--baseline", "patched", "--candidate", "patched-copy", "--out",
                                str(tmp_path / "o"), "--bootstrap", "300"])
    summary = run(args, spark=spark)
    # 16 cycles of 10 retries each side cannot pin the ratio within 1/1.1-1.1: not different, not shown the same
    assert summary["verdict"] == "inconclusive"
    [wake] = [c for c in summary["comparisons"] if c["metric"] == "wakeup_ms"]
    assert wake["ci"][0] < 1 / 1.1 or wake["ci"][1] > 1.1


def test_version_1_archives_are_read_each_run_one_cycle(spark, tmp_path):
    import pyarrow.parquet as pq

    from harness.contracts.events import COLUMNS_BY_VERSION

    paths = []
    for i in range(2):
        a = synth.archive(tmp_path / "runs", f"v1-{i}", {"unpatched": synth.slow, "patched": synth.fast},
                          messages=10, seed=i)
        for f in (a / "events").glob("*.parquet"):
            pq.write_table(pq.read_table(f).select(list(COLUMNS_BY_VERSION[1])), f)
        m = json.loads((a / "manifest.json").read_text())
        (a / "manifest.json").write_text(json.dumps({**m, "schema_version": 1, "event_schema_version": 1}))
        paths.append(a)
    summary = run(_args(paths, tmp_path / "o"), spark=spark)
    [wake] = [c for c in summary["comparisons"] if c["metric"] == "wakeup_ms"]
    assert (wake["n_baseline"], wake["n_candidate"], wake["verdict"]) == (2, 2, "not enough data")
    assert {v["wakeup_ms"]["n"] for v in summary["per_variant"]} == {20}


def test_archives_of_different_scenario_definitions_are_not_pooled(tmp_path, capsys):
    one = synth.archive(tmp_path / "runs", "one", {"unpatched": synth.slow, "patched": synth.fast}, messages=6,
                        scenario_doc={"name": "burst", "produce": {"count": 32}})
    two = synth.archive(tmp_path / "runs", "two", {"unpatched": synth.slow, "patched": synth.fast}, messages=6,
                        scenario_doc={"name": "burst", "produce": {"count": 8}})
    assert main(["compare", str(one), str(two), "--baseline", "unpatched", "--candidate", "patched",
                 "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "scenario 'burst' differs" in err and err.strip().count("\n") == 0


def test_faults_are_judged_alike_by_spark_and_by_the_runs_own_summary_and_drawn(spark, tmp_path):
    import pandas as pd

    from harness.inputs.scenario import parse_scenario
    from harness.run.faults import FaultRecord

    base_ns = 1_795_000_000_000 * synth.MS
    records = []
    for variant in ("unpatched", "patched"):
        r = FaultRecord(variant, "kill9", "broker", 100, 5, process="broker pid 1", started_ns=base_ns + 100 * 10**9,
                        ended_ns=base_ns + 130 * 10**9, back="broker pid 2")
        records.append(r.as_dict())
    archive = synth.archive(tmp_path / "runs", "faulty", {"unpatched": synth.slow, "patched": synth.fast},
                            messages=40, faults=records, never_redelivered={"patched": 2})
    out = tmp_path / "report"
    args = parser().parse_args([str(archive), "--baseline", "unpatched", "--candidate", "patched", "--out", str(out),
                                "--bootstrap", "50"])
    summary = run(args, spark=spark, warn=lambda s: None)
    spark_rows = {v["variant"]: v["faults"] for v in summary["per_variant"]}
    events = pd.concat([pd.read_parquet(p) for p in sorted((archive / "events").glob("*.parquet"))], ignore_index=True)
    sc = parse_scenario(json.loads((archive / "manifest.json").read_text())["scenario"])
    own = {s["variant"]: s["faults"] for s in synth.own_summary(events, sc.subscriptions(), sc.allowed_deliveries(),
                                                                sc.consume.long_poll_s * 1000, records)}
    for variant in ("unpatched", "patched"):
        [spark_row], [own_row] = spark_rows[variant], own[variant]
        assert {k: spark_row[k] for k in own_row} == own_row  # one definition, whichever engine
        assert spark_row["exposed"] > 0 and spark_row["from_s"] is not None
    # patched's two nacks never redelivered (delivered once, never acked) were still owed across the fault.
    assert spark_rows["patched"][0]["lost"] == 2 and spark_rows["patched"][0]["longest_wait_open"] is True
    assert spark_rows["unpatched"][0]["lost"] == 0
    assert (out / "plots" / "burst-faults-timeline.png").stat().st_size > 0
    assert "<h2>Faults</h2>" in (out / "report.html").read_text()
