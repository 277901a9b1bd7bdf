"""The matrix job for real (local Spark) on generated archives: two scenarios, three variants."""

import json

import pandas as pd
import pytest

from harness.cli.main import main
from spark.jobs.matrix import parser, run
from tests import synth

VARIANTS = {"unpatched": synth.slow, "patched": synth.fast, "upstream-5.4.0": synth.fast}


@pytest.fixture(scope="module")
def archives(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    burst = synth.archive(runs, "run-burst", VARIANTS, messages=40, seed=1, lost=1)
    lapse = synth.archive(runs, "run-lapse", VARIANTS, messages=40, seed=2, lost=0, scenario="lapse",
                          scenario_doc={"expect": ["wakeup_ms.p50 < 1000", "ledger.lost == 0", "pickup_ms.p50 < 5"],
                                        "reference": "a test"},
                          extra={"patched": [{"kind": "error", "topic": "%DLQ%G", "consumer": "G_dlq_reader-1",
                                              "detail": "dlq receive: CODE: 16 no permission to read"}]})
    # Two points of a series (4 and 16 groups): the probe saw each nack wake every other group on the
    # baseline, nobody else on the fixed ones.
    points = []
    for n in (4, 16):
        probe = {v: [{"name": "rmq_probe_pop_wakeups_total", "group": "G", "cause": "retry_other",
                      "value": 40.0 * (n - 1) if v == "unpatched" else 0.0},
                     {"name": "rmq_probe_pop_wakeups_total", "group": "NotOfThisScenario", "cause": "retry_other",
                      "value": 999.0}] for v in VARIANTS}
        points.append(synth.archive(runs, f"run-gs-{n}", VARIANTS, messages=40, seed=3 + n, lost=0,
                                    scenario=f"gs-{n}", probe=probe,
                                    scenario_doc={"series": {"groups": [n], "of": "gs"},
                                                  "expect": ["probe.retry_other_per_nack < 0.5"]}))
    return [burst, lapse, *points]


def test_every_scenario_and_variant_is_checked_and_compared_to_the_first(spark, archives, tmp_path):
    argv = [*map(str, archives), "--variant", "unpatched", "--variant", "patched", "--variant", "upstream-5.4.0",
            "--bootstrap", "300", "--out", str(tmp_path / "m"), "--failed", "fifo=brokers did not start",
            "--not-applicable", "fifo-remoting=FIFO pop over remoting is not built yet"]
    s = run(parser().parse_args(argv), spark=spark)
    rows = {(r["scenario"], r["variant"]): r for r in s["overview"]}
    assert len(rows) == 12 and s["baseline"] == "unpatched"
    # The baseline is slow: it fails the wakeup expectation, the fixed ones meet it; burst lost one message
    # per variant (its synthetic scenario has no ledger rule, so nothing fails for it).
    slow_p50 = rows[("burst", "unpatched")]["wakeup_p50_ms"]
    assert slow_p50 > 10_000 and rows[("burst", "unpatched")]["failing"] == [
        f"wakeup_ms.p50 < 1000 (failed: {slow_p50:.0f})"]
    assert rows[("burst", "patched")]["expectations"] == "1/1" and rows[("burst", "patched")]["lost"] == 1
    assert rows[("lapse", "patched")]["expectations"] == "2/3"  # no pickups: that rule has no data
    assert rows[("lapse", "patched")]["failing"] == ["pickup_ms.p50 < 5 (no data)"]
    verdicts = {(sc, v): rows[(sc, v)]["verdict"] for sc in ("burst", "lapse") for v in ("patched", "upstream-5.4.0")}
    # lapse on patched is faster but had a client error (its DLQ reader's): not called an improvement.
    assert verdicts.pop(("lapse", "patched")) == "inconclusive" and set(verdicts.values()) == {"improvement"}
    assert rows[("burst", "unpatched")]["verdict"] == "baseline"
    assert set(s["against_baseline"]) == {"patched", "upstream-5.4.0"}
    assert s["variant_facts"][0]["name"] == "unpatched"
    assert s["variant_facts"][0]["pop_implementation"] == "file-based (default)"
    assert s["scenarios"]["lapse"]["reference"] == "a test" and s["failed_runs"] == {"fifo": "brokers did not start"}
    out = tmp_path / "m"
    assert json.loads((out / "summary.json").read_text())["kind"] == "matrix"
    ledger = pd.read_parquet(out / "ledger.parquet")
    assert set(ledger["variant"]) == set(VARIANTS) and set(ledger["scenario"]) == {"burst", "lapse", "gs-4", "gs-16"}
    html = (out / "report.html").read_text()
    assert "fifo" in html and "brokers did not start" in html and "From: a test" in html
    # A form left out because it does not apply to its protocol is said, apart from the failed runs.
    assert s["not_applicable"] == {"fifo-remoting": "FIFO pop over remoting is not built yet"}
    assert "<code>fifo-remoting</code>: FIFO pop over remoting is not built yet" in html
    # Each row names its protocol and the seed's own measure (nack -> retry: the nack's 1 s delay and more).
    assert {r["protocol"] for r in s["overview"]} == {"grpc"}
    assert rows[("burst", "unpatched")]["nack_retry_p50_ms"] > rows[("burst", "patched")]["nack_retry_p50_ms"] > 1000
    # A DLQ the broker would not let the harness read is said, with the reason, where the ledger is.
    assert rows[("lapse", "patched")]["verdict"] and [r["dlq_reader_errors"] for r in s["per_variant"]
                                                       if (r["scenario"], r["variant"]) == ("lapse", "patched")] == [
        [{"group": "G", "errors": 1, "example": "dlq receive: CODE: 16 no permission to read"}]]
    assert "lapse on patched: the dead-letter queue of G could not be read" in html
    for sc in ("burst", "lapse"):
        assert (out / "plots" / f"{sc}-wakeup-cdf.png").stat().st_size > 1000


def test_a_series_is_a_curve_of_wakeups_per_nack_over_its_points(spark, archives, tmp_path):
    argv = [*map(str, archives), "--variant", "unpatched", "--variant", "patched", "--bootstrap", "200",
            "--out", str(tmp_path / "m")]
    s = run(parser().parse_args(argv), spark=spark)
    curve = s["series"]["gs"]
    assert [(r["groups"], r["variant"]) for r in curve] == [(4, "unpatched"), (4, "patched"), (16, "unpatched"),
                                                            (16, "patched")]
    # 40 nacks per point; only the scenario's own groups count (G), not the stray group's 999.
    assert [r["retry_other_per_nack"] for r in curve] == [3.0, 0.0, 15.0, 0.0]
    assert all(r["nacks"] == 40 for r in curve)
    rows = {(r["scenario"], r["variant"]): r for r in s["overview"]}
    assert rows[("gs-16", "unpatched")]["failing"] == ["probe.retry_other_per_nack < 0.5 (failed: 15)"]
    assert rows[("gs-16", "patched")]["failing"] == []
    assert (tmp_path / "m" / "plots" / "series-gs.png").stat().st_size > 1000
    assert "Series: gs" in (tmp_path / "m" / "report.html").read_text()


def test_the_cli_renders_a_matrix_from_archives_and_refuses_an_existing_report(archives, tmp_path, capsys):
    argv = ["matrix", "--variant", "unpatched", "--variant", "patched", "--archives", *map(str, archives),
            "--out", str(tmp_path / "m")]
    assert main(argv) == 0
    assert "report:" in capsys.readouterr().out
    assert main(argv) == 2
    assert "already exists" in capsys.readouterr().err
