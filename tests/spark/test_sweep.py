"""The sweep job for real (local Spark) on generated archives: four releases in two batches, the wakeup
fixed in the last; what a sweep report says per release and between adjacent releases."""

import json

import pytest

from harness.cli.main import main
from spark import history
from spark.jobs.sweep import parser, run
from tests import synth

RELEASES = {"5.0.0": synth.slow, "5.1.0": synth.slow, "5.3.3": synth.slow, "5.4.0": synth.fast}
NAMES = [f"rocketmq-{v}" for v in RELEASES]
# 5.4.0 recorded as a hybrid (manifest schema 7): its proxy from 5.3.3.
HYBRID = [{"artifact": "rocketmq-broker", "version": "5.4.0", "sha256": "a" * 64},
          {"artifact": "rocketmq-proxy", "version": "5.3.3", "sha256": "b" * 64}]


def _record_modules(archive, name: str, modules: list[dict]) -> None:
    path = archive / "manifest.json"
    m = json.loads(path.read_text())
    for v in m["variants"]:
        if v["name"] == name:
            v["modules"] = modules
    path.write_text(json.dumps(m))


@pytest.fixture(scope="module")
def archives(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    out = []
    for b, batch in enumerate((("5.0.0", "5.1.0"), ("5.3.3", "5.4.0"))):
        out.append(synth.archive(runs, f"run-b{b}", {f"rocketmq-{v}": RELEASES[v] for v in batch}, messages=64,
                                 seed=10 + b, lost=0, cycles=8, versions={f"rocketmq-{v}": v for v in batch}))
    _record_modules(out[-1], "rocketmq-5.4.0", HYBRID)
    return out


def test_each_release_has_its_level_interval_and_ledger_and_the_change_is_where_it_happened(spark, archives, tmp_path):
    argv = [*map(str, archives), *[x for n in NAMES for x in ("--variant", n)], "--bootstrap", "300",
            "--out", str(tmp_path / "s"), "--skipped", "5.3.4=rocketmq-proxy 5.3.4 not published on Maven Central"]
    s = run(parser().parse_args(argv), spark=spark)
    sc = s["scenarios"]["burst"]
    assert [r["version"] for r in sc["releases"]] == list(RELEASES)
    for r in sc["releases"]:
        assert r["cycles"] == 8 and r["ci"][0] <= r["level"] <= r["ci"][1]
        assert (r["lost"], r["duplicated"], r["retries_never_redelivered"]) == (0, 0, 0)
    slow, fast = sc["releases"][0], sc["releases"][-1]
    assert slow["level"] > 10_000 and fast["level"] < 1_000 and slow["p90"] > slow["level"]
    # Adjacent pairs: only 5.3.3 -> 5.4.0 differs (across the batch boundary 5.1.0 -> 5.3.3 too).
    assert [(x["older"], x["newer"], x["verdict"]) for x in sc["steps"]] == [
        ("rocketmq-5.0.0", "rocketmq-5.1.0", "inconclusive"), ("rocketmq-5.1.0", "rocketmq-5.3.3", "equivalent"),
        ("rocketmq-5.3.3", "rocketmq-5.4.0", "improvement")]
    assert sc["changed"] == [{"release": "rocketmq-5.4.0", "from": "rocketmq-5.3.3", "verdict": "improvement"}]
    assert s["skipped"] == {"5.3.4": "rocketmq-proxy 5.3.4 not published on Maven Central"}
    html = (tmp_path / "s" / "report.html").read_text()
    assert "5.3.4" in html and "rocketmq-5.4.0 (improvement from rocketmq-5.3.3)" in html
    # A hybrid says so in the rows, the facts and the page.
    assert [r["hybrid"] for r in sc["releases"]] == [None, None, None, "hybrid: proxy from 5.3.3"]
    assert "5.4.0 (hybrid)" in html and "hybrid: proxy from 5.3.3" in html
    assert (tmp_path / "s" / "plots" / "burst-releases.png").stat().st_size > 10_000
    assert json.loads((tmp_path / "s" / "summary.json").read_text())["kind"] == "sweep"


def test_the_cli_sweeps_archives_of_a_range_and_refuses_a_range_they_do_not_hold(archives, tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["sweep", "--versions", "5.1.0..5.4.0", "--archives", *map(str, archives), "--out", str(out),
                 "--dataset", str(tmp_path / "history")]) == 0
    printed = capsys.readouterr().out
    assert "report:" in printed and "improvement" in printed
    assert "5.4.0 is a hybrid: proxy from 5.3.3" in printed.replace("\n", " ")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["variants"] == NAMES[1:]  # 5.0.0 is outside the range
    assert history.ingested(tmp_path / "history") == {"run-b0", "run-b1"}  # a sweep's runs join the history
    assert main(["sweep", "--versions", "5.5.0..", "--archives", *map(str, archives)]) == 2
    assert "hold no release variant in that range (they hold 5.0.0, 5.1.0, 5.3.3, 5.4.0)" in capsys.readouterr().err
