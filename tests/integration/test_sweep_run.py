"""A real sweep of two releases side by side (5.1.3 and 5.2.0, jars from Maven Central; 5.1.3 a hybrid with
5.1.1's name server and controller), one short scenario, then the Spark sweep report and the history dataset
it lands in. (Several scenarios per batch: tests/unit/test_releases.py; a sweep report over several releases'
archives: tests/spark/test_sweep.py.)"""

import json
from pathlib import Path

import pytest

from harness.cli.main import main
from spark import history

RESOURCES = Path(__file__).parent.parent / "resources" / "scenarios"
RELEASES = ["rocketmq-5.1.3", "rocketmq-5.2.0"]


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    d = tmp_path_factory.mktemp("sweep")
    code = main(["sweep", "--versions", "5.1.3..5.2.0", "--scenario", str(RESOURCES / "short-burst.yaml"),
                 "--batch", "2",
                 "--runs-dir", str(d / "runs"), "--out", str(d / "report"), "--dataset", str(d / "history")])
    assert code == 0
    return d, json.loads((d / "report" / "summary.json").read_text())


def test_each_release_ran_each_scenario_side_by_side_and_every_message_is_accounted_for(swept):
    d, s = swept
    assert s["kind"] == "sweep" and s["variants"] == RELEASES
    archives = [p for p in (d / "runs").iterdir() if not p.name.startswith(".")]
    assert len(archives) == 1 and {tuple(r["variants"]) for r in s["runs"]} == {tuple(RELEASES)}
    for name in ("short-burst",):
        sc = s["scenarios"][name]
        assert [r["variant"] for r in sc["releases"]] == RELEASES
        for r in sc["releases"]:
            assert r["cycles"] >= 1 and r["level"] is not None and r["n"] > 0
            assert (r["lost"], r["duplicated"], r["retries_never_redelivered"]) == (0, 0, 0)
        assert [(x["older"], x["newer"]) for x in sc["steps"]] == list(zip(RELEASES, RELEASES[1:], strict=False))
        assert sc["steps"][0]["n_older"] == sc["releases"][0]["cycles"] and all(x["verdict"] for x in sc["steps"])
    # What lies between the ends and Maven Central cannot assemble is named with the reason, not dropped: 5.1.4
    # would take 5.1.3's proxy, which does not link with 5.1.4's remoting.
    assert list(s["skipped"]) == ["5.1.4"]
    assert "its modules do not link: rocketmq-proxy-5.1.3.jar" in s["skipped"]["5.1.4"]
    for v in s["variant_facts"]:
        assert v["ignored_settings"] == []  # the releases know every setting the harness writes
    assert [v["hybrid"] for v in s["variant_facts"]] == ["hybrid: controller, namesrv from 5.1.1", None]


def test_the_sweep_runs_are_in_the_history_dataset(swept):
    d, s = swept
    assert history.ingested(d / "history") == {r["run_id"] for r in s["runs"]}
    df = history.read(d / "history")
    assert set(df["version"]) == {"5.1.3", "5.2.0"} and set(df["metric"]) >= {"wakeup_ms", "stalled"}
